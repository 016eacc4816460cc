// The building blocks of RoFormer, named and nested exactly like Hugging Face's
// modeling_roformer.py so that `named_parameters()` yields HF's state_dict keys:
//   RoFormerEmbeddings    -> roformer.embeddings.{word_embeddings, position_embeddings (absolute only),
//                                                 token_type_embeddings, LayerNorm}
//   RoFormerSelfAttention -> ...layer.L.attention.self.{query, key, value,
//                                                      pos_key_proj, pos_query_proj (disentangled only)}
//   RoFormerLayer         -> ...layer.L.{attention.output.{dense, LayerNorm}, intermediate.dense,
//                                        output.{dense, LayerNorm}}
//   RoFormerEncoder       -> roformer.encoder.{embed_positions.weight (buffer, rotary only), layer.L,
//                                              rel_embeddings, LayerNorm (disentangled only), final_layer_norm}
//   RoFormerLMHead        -> cls.predictions.{bias, transform.{dense, LayerNorm}}
// The position parts belong to the model's position scheme (model/position.h), which registers them
// into these modules at their places; the disentangled ones carry Hugging Face DebertaV2's names
// (src/hf/ maps the rest per family).
// Dimensions: B batch, T sequence, H hidden, E embedding, V vocab, N heads, D head dim, I inner,
// R rows of the relative table a sequence uses.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <optional>

#include "model/options.h"
#include "model/position.h"

namespace roformer::model {

// What every layer of one forward shares: the key masks and what the position scheme prepared.
struct LayerInputs {
  torch::Tensor mask;        // (B, 1, 1, T) bool, true = key is a token; undefined: no padding
  // The local layers' (model.local_attention) mask, (B or 1, 1, T, T) bool: query i attends to key j
  // when |i - j| <= local_attention/2 and j is a token (or j = i, so that no row masks every key);
  // undefined when the window covers the whole sequence (local layers then take `mask`).
  torch::Tensor local_mask;
  PositionInputs positions;  // PositionScheme::prepare
};

// A Linear layer's forward (KernelPolicy::bias_in_gemm): on CUDA ATen's linear, which folds the
// bias into the GEMM (addmm) and under autocast casts it with the weight. nn::Linear::forward
// (F::linear) runs a matmul and then `output += bias` for 3-D inputs: a separate mixed-dtype
// (bf16 += fp32) kernel per layer, forward and backward. The CPU keeps F::linear, bit-identical to
// the reference values.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x);

// [a; b; c] (rows stacked: the fused QKV GEMM's weight or bias) of three tensors of one shape: when
// they lie side by side in one storage (RoFormerSelfAttentionImpl::pack_qkv) a tensor over that
// storage, no copy, whose gradient reaches the three as views of one; nullopt when they do not.
std::optional<torch::Tensor> stacked_view(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c);

// The model's linear layers and LayerNorms: with their additive bias, or without it when
// model.bias is false (the bias is then no parameter at all: no add, no gradient, not saved).
torch::nn::Linear make_linear(const config::ModelConfig& m, int64_t in, int64_t out);
torch::nn::LayerNorm make_layer_norm(const config::ModelConfig& m, int64_t size);

// gelu (erf), gelu_tanh, relu.

torch::Tensor activation(const torch::Tensor& x, config::Activation act);

class RoFormerEmbeddingsImpl : public torch::nn::Module {
 public:
  RoFormerEmbeddingsImpl(const RoFormerOptions& options, std::shared_ptr<PositionScheme> positions);
  // input_ids, token_type_ids: (B, T) -> (B, T, E). LayerNorm(word + token_type [+ position]), then
  // dropout, as HF BertEmbeddings (DebertaV2Embeddings adds the position before the token type). With
  // absolute positions token t takes row position_offset + t of the position table (HF's
  // position_ids; the offset exists for tests of shifted positions).
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids = {},
                        int64_t position_offset = 0);

  torch::nn::Embedding word_embeddings{nullptr};        // (V, E), padding_idx = pad_token_id
  torch::nn::Embedding token_type_embeddings{nullptr};  // (type_vocab_size, E); null when 0
  torch::nn::LayerNorm layer_norm{nullptr};             // HF name "LayerNorm"

 private:
  RoFormerOptions options_;
  std::shared_ptr<PositionScheme> positions_;  // its absolute table registers second, as in HF
};
TORCH_MODULE(RoFormerEmbeddings);

class RoFormerSelfAttentionImpl : public torch::nn::Module {
 public:
  // local: the layer attends within model.local_attention's window (is_local_layer).
  RoFormerSelfAttentionImpl(const RoFormerOptions& options, PositionScheme& positions, bool local = false);
  // x: (B, T, H), the keys' and values' input, and the queries' unless `queries` (B, T, H) is given
  // (the enhanced mask decoder). Returns the per-head context merged back to (B, T, H).
  torch::Tensor forward(const torch::Tensor& x, const LayerInputs& inputs, const torch::Tensor& queries = {});
  // The softmax scale: the position scheme's (disentangled: 1/sqrt(D (1 + terms))), else 1/sqrt(D).
  double score_scale() const;
  // The position scheme's part of this layer (its parameters are registered here).
  const AttentionPositions& positions() const { return *positions_; }

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};  // (H, H) each

  // q, k and v's weights (and biases) side by side in one (3H, H) storage, each parameter a view of
  // its rows: CUDA's fused-QKV GEMM reads [Wq; Wk; Wv] as it is, with no concatenation per forward
  // (issue 51). Values, names, checkpoints and the optimizer's state stay those of three parameters.
  // Done at construction and after every to(); make_bf16_compute_model does it for its bf16 copies.
  // Parameters replaced otherwise (set_data) are apart again: the forward then concatenates them,
  // as before, and says so once (kernels/op_paths.h, "qkv_projection").
  void pack_qkv();
  bool qkv_packed() const;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

  // The scaled-dot-product-attention kernel that forward picks for a (B, T) batch of `dtype` on
  // `device` (padded: with a key mask): "flash", "efficient", "cudnn", "math", "overrideable" or
  // "linear (no SDPA)". Asks LibTorch's own selector with tensors laid out as forward's q, k, v.
  std::string attention_backend(int64_t batch, int64_t seq_len, torch::ScalarType dtype, const torch::Device& device,
                                bool padded) const;

 private:
  // Linear attention with RoPE (paper eq. 19) over (B, N, T, D) heads; the key mask of `inputs`.
  torch::Tensor linear_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const LayerInputs& inputs) const;
  // SDPA's attn_mask: the key mask (B, 1, 1, T) bool (a local layer's: its band, (B or 1, 1, T, T)),
  // or the position scheme's bias of the scores (B, N, T, T) float with masked keys at -inf; nullopt
  // without either.
  std::optional<at::Tensor> attention_bias(const torch::Tensor& q, const torch::Tensor& k, const LayerInputs& inputs);
  // The boolean mask of this layer's keys: inputs.mask, or a local layer's inputs.local_mask.
  const torch::Tensor& key_mask(const LayerInputs& inputs) const;
  RoFormerOptions options_;
  config::Attention attention_;
  bool local_;
  std::shared_ptr<AttentionPositions> positions_;
};
TORCH_MODULE(RoFormerSelfAttention);

class RoFormerLayerImpl : public torch::nn::Module {
 public:
  // layer: its index in the encoder (0-based), which says whether it attends locally
  // (is_local_layer) and whether it has its attention LayerNorm (model.first_attention_norm).
  RoFormerLayerImpl(const RoFormerOptions& options, PositionScheme& positions, int64_t layer = 0);
  // x: (B, T, H) -> (B, T, H). Arguments as RoFormerSelfAttention; with `queries` (u) the residual
  // stream is u and x only gives keys and values (u = x otherwise):
  //   post: a = LN(u + Drop(W_o Attn(u, x))),          y = LN(a + Drop(FFN(a)))
  //   pre:  a = u + Drop(W_o Attn(LN(u), LN(x))),      y = a + Drop(FFN(LN(a)))
  // (pre-LN without model.first_attention_norm: layer 0's attention reads u and x as they are), where
  //   mlp: FFN(a) = W_2 act(W_1 a)     glu: FFN(a) = W_o (act(a W_in^T) * a W_gate^T), [W_in; W_gate] = W_1
  torch::Tensor forward(const torch::Tensor& x, const LayerInputs& inputs, const torch::Tensor& queries = {});

  RoFormerSelfAttention self_attention{nullptr};          // attention.self
  torch::nn::Linear attention_dense{nullptr};             // attention.output.dense (H, H)
  torch::nn::LayerNorm attention_layer_norm{nullptr};     // attention.output.LayerNorm; null in a pre-LN layer 0
                                                          // without model.first_attention_norm
  torch::nn::Linear intermediate_dense{nullptr};          // intermediate.dense (I, H); glu: (2I, H), W_in over W_gate
  torch::nn::Linear output_dense{nullptr};                // output.dense (H, I)
  torch::nn::LayerNorm output_layer_norm{nullptr};        // output.LayerNorm

 private:
  torch::Tensor feed_forward(const torch::Tensor& a) const;  // FFN above, (..., H) -> (..., H)
  torch::Tensor attention_input(const torch::Tensor& t);  // LN(t) (pre-LN), or t without the LayerNorm
  RoFormerOptions options_;
};
TORCH_MODULE(RoFormerLayer);

class RoFormerEncoderImpl : public torch::nn::Module {
 public:
  RoFormerEncoderImpl(const RoFormerOptions& options, std::shared_ptr<PositionScheme> positions);
  // x: (B, T, H); mask: (B, 1, 1, T) bool or undefined. The position scheme prepares what length T
  // needs (the rotary rows, the relative rows), then every layer, then the final LayerNorm (pre-LN).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  // The enhanced mask decoder (model.enhanced_mask_decoder; DeBERTa section 3.2): the layers but the
  // last give h (the last layer's input), then the last layer runs twice more, its keys and values
  // from h and its queries first h + z, then its own output: (B, T, H), the MLM head's input.
  // z: (T, H) the absolute positions of the sequence. The last layer's ordinary pass is not run.
  torch::Tensor forward_emd(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& z);
  // What the layers of a (B, T, H) forward share (the masks, the position scheme's inputs).
  LayerInputs layer_inputs(const torch::Tensor& x, const torch::Tensor& mask);

  torch::nn::ModuleList layers{nullptr};          // "layer"
  torch::nn::LayerNorm final_layer_norm{nullptr};  // pre-LN only

 private:
  // One layer, recomputed in backward when gradient checkpointing applies.
  torch::Tensor run_layer(size_t i, const torch::Tensor& x, const LayerInputs& inputs, const torch::Tensor& queries);
  // The local layers' mask for a (B, T) forward with key mask `mask` (LayerInputs::local_mask).
  torch::Tensor local_mask(int64_t seq_len, const torch::Tensor& mask, const torch::Device& device);
  RoFormerOptions options_;
  std::shared_ptr<PositionScheme> positions_;  // registers its tables before and after the layers
  torch::Tensor band_;  // (T, T) bool |i - j| <= local_attention/2 of the last length, made once per length
};
TORCH_MODULE(RoFormerEncoder);

class RoFormerLMHeadImpl : public torch::nn::Module {
 public:
  explicit RoFormerLMHeadImpl(const RoFormerOptions& options);
  // h: (..., H); decoder_weight: (V, E), the tied word embedding. Returns (..., V):
  //   logits = LN(act(h W_t^T + b_t)) W_e^T + bias
  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& decoder_weight);

  torch::Tensor bias;                          // (V) cls.predictions.bias (= decoder.bias in HF)
  torch::nn::Linear dense{nullptr};            // transform.dense (E, H)
  torch::nn::LayerNorm layer_norm{nullptr};    // transform.LayerNorm (E)

 private:
  RoFormerOptions options_;
};
TORCH_MODULE(RoFormerLMHead);

}  // namespace roformer::model
