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
// The disentangled parts carry Hugging Face DebertaV2's names (model/hf_names.h maps the rest).
// Dimensions: B batch, T sequence, H hidden, E embedding, V vocab, N heads, D head dim, I inner,
// R rows of the relative table a sequence uses.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/disentangled.h"
#include "model/options.h"

namespace roformer::model {

// What every layer of one forward shares: the key mask and the position inputs of model.position.
struct LayerInputs {
  torch::Tensor mask;              // (B, 1, 1, T) bool, true = key is a token; undefined: no padding
  torch::Tensor sin_pos, cos_pos;  // (T, D) rotary tables; undefined unless position rotary
  torch::Tensor rel;               // (R, H) LayerNorm'd relative embeddings (disentangled), rows first_row..
  torch::Tensor rel_index;         // (T, T) int64: the row of rel for query i, key j (RelativeIndex::index)
};

// A Linear layer's forward (KernelPolicy::bias_in_gemm): on CUDA ATen's linear, which folds the
// bias into the GEMM (addmm) and under autocast casts it with the weight. nn::Linear::forward
// (F::linear) runs a matmul and then `output += bias` for 3-D inputs: a separate mixed-dtype
// (bf16 += fp32) kernel per layer, forward and backward. The CPU keeps F::linear, bit-identical to
// the reference values.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x);

// gelu (erf), gelu_tanh, relu.

torch::Tensor activation(const torch::Tensor& x, config::Activation act);

class RoFormerEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit RoFormerEmbeddingsImpl(const RoFormerOptions& options);
  // input_ids, token_type_ids: (B, T) -> (B, T, E). LayerNorm(word + token_type [+ position]), then
  // dropout, as HF BertEmbeddings (DebertaV2Embeddings adds the position before the token type). With
  // absolute positions token t takes row position_offset + t of the position table (HF's
  // position_ids; the offset exists for tests of shifted positions).
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids = {},
                        int64_t position_offset = 0);

  torch::nn::Embedding word_embeddings{nullptr};        // (V, E), padding_idx = pad_token_id
  // (P, E) learned; null unless config::has_absolute_table (position absolute; disentangled with
  // position_biased_input, or the enhanced mask decoder's positions, which the input does not get)
  torch::nn::Embedding position_embeddings{nullptr};
  torch::nn::Embedding token_type_embeddings{nullptr};  // (type_vocab_size, E); null when 0
  torch::nn::LayerNorm layer_norm{nullptr};             // HF name "LayerNorm"

 private:
  RoFormerOptions options_;
};
TORCH_MODULE(RoFormerEmbeddings);

class RoFormerSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit RoFormerSelfAttentionImpl(const RoFormerOptions& options);
  // x: (B, T, H), the keys' and values' input, and the queries' unless `queries` (B, T, H) is given
  // (the enhanced mask decoder). Returns the per-head context merged back to (B, T, H).
  torch::Tensor forward(const torch::Tensor& x, const LayerInputs& inputs, const torch::Tensor& queries = {});
  // Disentangled attention's c2p + p2c scores for this layer's q, k: (B, N, T, T), already scaled by
  // 1/sqrt(D * (1 + terms)); the relative embeddings take hidden dropout first (HF pos_dropout).
  torch::Tensor relative_scores(const torch::Tensor& q, const torch::Tensor& k, const LayerInputs& inputs);
  // 1/sqrt(D) softmax scale, 1/sqrt(D * (1 + terms)) for disentangled attention (HF scale_factor).
  double score_scale() const;

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};  // (H, H) each
  // Disentangled with share_att_key false: the relative embeddings' own projections (H, H), for the
  // c2p and the p2c term; null otherwise (shared: query and key project them).
  torch::nn::Linear pos_key_proj{nullptr}, pos_query_proj{nullptr};

  // The scaled-dot-product-attention kernel that forward picks for a (B, T) batch of `dtype` on
  // `device` (padded: with a key mask): "flash", "efficient", "cudnn", "math", "overrideable" or
  // "linear (no SDPA)". Asks LibTorch's own selector with tensors laid out as forward's q, k, v.
  std::string attention_backend(int64_t batch, int64_t seq_len, torch::ScalarType dtype, const torch::Device& device,
                                bool padded) const;

 private:
  torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& sin_pos, const torch::Tensor& cos_pos) const;
  // Linear attention with RoPE (paper eq. 19) over (B, N, T, D) heads; mask (B, 1, T, 1) or undefined.
  torch::Tensor linear_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& mask, const torch::Tensor& sin_pos,
                                 const torch::Tensor& cos_pos) const;
  std::optional<double> sdpa_scale() const;  // score_scale() for disentangled attention, else SDPA's default
  // SDPA's attn_mask: the key mask (B, 1, 1, T) bool, or for disentangled attention the relative
  // scores (B, N, T, T) float with padded keys at -inf; nullopt without either.
  std::optional<at::Tensor> attention_bias(const torch::Tensor& q, const torch::Tensor& k, const LayerInputs& inputs);
  RoFormerOptions options_;
  config::Attention attention_;
  bool rotary_;  // position rotary: q and k (and v with rotary_value) are rotated
  bool disentangled_;  // position disentangled: relative scores enter SDPA as an additive bias
};
TORCH_MODULE(RoFormerSelfAttention);

class RoFormerLayerImpl : public torch::nn::Module {
 public:
  explicit RoFormerLayerImpl(const RoFormerOptions& options);
  // x: (B, T, H) -> (B, T, H). Arguments as RoFormerSelfAttention; with `queries` (u) the residual
  // stream is u and x only gives keys and values (u = x otherwise):
  //   post: a = LN(u + Drop(W_o Attn(u, x))),          y = LN(a + Drop(W_2 act(W_1 a)))
  //   pre:  a = u + Drop(W_o Attn(LN(u), LN(x))),      y = a + Drop(W_2 act(W_1 LN(a)))
  torch::Tensor forward(const torch::Tensor& x, const LayerInputs& inputs, const torch::Tensor& queries = {});

  RoFormerSelfAttention self_attention{nullptr};          // attention.self
  torch::nn::Linear attention_dense{nullptr};             // attention.output.dense (H, H)
  torch::nn::LayerNorm attention_layer_norm{nullptr};     // attention.output.LayerNorm
  torch::nn::Linear intermediate_dense{nullptr};          // intermediate.dense (I, H)
  torch::nn::Linear output_dense{nullptr};                // output.dense (H, I)
  torch::nn::LayerNorm output_layer_norm{nullptr};        // output.LayerNorm

 private:
  RoFormerOptions options_;
};
TORCH_MODULE(RoFormerLayer);

class RoFormerEncoderImpl : public torch::nn::Module {
 public:
  explicit RoFormerEncoderImpl(const RoFormerOptions& options);
  // x: (B, T, H); mask: (B, 1, 1, T) bool or undefined. The rotary table is sliced to T (position
  // rotary; beyond its P rows it is extended: positions_for); disentangled attention gets the rows of
  // the relative table that length T uses. Every layer, then the final LayerNorm (pre-LN).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  // The enhanced mask decoder (model.enhanced_mask_decoder; DeBERTa section 3.2): the layers but the
  // last give h (the last layer's input), then the last layer runs twice more, its keys and values
  // from h and its queries first h + z, then its own output: (B, T, H), the MLM head's input.
  // z: (T, H) the absolute positions of the sequence. The last layer's ordinary pass is not run.
  torch::Tensor forward_emd(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& z);
  // What the layers of a (B, T, H) forward share (mask, rotary tables, relative rows and index).
  LayerInputs layer_inputs(const torch::Tensor& x, const torch::Tensor& mask);
  // The rotary table with at least seq_len rows: the buffer itself when seq_len <= P, otherwise a
  // (seq_len, D) table built by the same formula, whose first P rows equal the buffer bit for bit.
  // RoPE needs no learned rows, so a model trained at length T runs at any length (the buffer,
  // and so a checkpoint or export, keeps its P rows).
  torch::Tensor positions_for(int64_t seq_len) const;

  torch::Tensor embed_positions;                  // (P, D) sin|cos table, buffer (HF embed_positions.weight);
                                                  // undefined unless position rotary
  torch::nn::ModuleList layers{nullptr};          // "layer"
  torch::nn::Embedding rel_embeddings{nullptr};   // (2S, H) relative embeddings, every layer's; disentangled only
  torch::nn::LayerNorm rel_layer_norm{nullptr};   // "LayerNorm" over rel_embeddings (HF norm_rel_ebd layer_norm)
  torch::nn::LayerNorm final_layer_norm{nullptr};  // pre-LN only

 private:
  // One layer, recomputed in backward when gradient checkpointing applies.
  torch::Tensor run_layer(size_t i, const torch::Tensor& x, const LayerInputs& inputs, const torch::Tensor& queries);
  RoFormerOptions options_;
  RelativeIndex relative_;  // the last sequence length's (rebuilt when T or the device changes)
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
