// The building blocks of RoFormer, named and nested exactly like Hugging Face's
// modeling_roformer.py so that `named_parameters()` yields HF's state_dict keys:
//   RoFormerEmbeddings    -> roformer.embeddings.{word_embeddings, position_embeddings (absolute only),
//                                                 token_type_embeddings, LayerNorm}
//   RoFormerSelfAttention -> ...layer.L.attention.self.{query, key, value}
//   RoFormerLayer         -> ...layer.L.{attention.output.{dense, LayerNorm}, intermediate.dense,
//                                        output.{dense, LayerNorm}}
//   RoFormerEncoder       -> roformer.encoder.{embed_positions.weight (buffer, rotary only), layer.L,
//                                              final_layer_norm}
//   RoFormerLMHead        -> cls.predictions.{bias, transform.{dense, LayerNorm}}
// Dimensions: B batch, T sequence, H hidden, E embedding, V vocab, N heads, D head dim, I inner.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/options.h"

namespace roformer::model {

// A Linear layer's forward (Kernels::bias_in_gemm): on CUDA ATen's linear, which folds the
// bias into the GEMM (addmm) and under autocast casts it with the weight. nn::Linear::forward
// (F::linear) runs a matmul and then `output += bias` for 3-D inputs: a separate mixed-dtype
// (bf16 += fp32) kernel per layer, forward and backward. The CPU keeps F::linear, bit-identical to
// the reference values.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, bool bias_in_gemm);
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x, bool bias_in_gemm);

// gelu (erf), gelu_tanh, relu.

torch::Tensor activation(const torch::Tensor& x, config::Activation act);

class RoFormerEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit RoFormerEmbeddingsImpl(const RoFormerOptions& options);
  // input_ids, token_type_ids: (B, T) -> (B, T, E). LayerNorm(word + token_type [+ position]), then
  // dropout, as HF BertEmbeddings. With absolute positions token t takes row position_offset + t of
  // the position table (HF's position_ids; the offset exists for tests of shifted positions).
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids = {},
                        int64_t position_offset = 0);

  torch::nn::Embedding word_embeddings{nullptr};        // (V, E), padding_idx = pad_token_id
  torch::nn::Embedding position_embeddings{nullptr};    // (P, E) learned; null unless position absolute
  torch::nn::Embedding token_type_embeddings{nullptr};  // (type_vocab_size, E); null when 0
  torch::nn::LayerNorm layer_norm{nullptr};             // HF name "LayerNorm"

 private:
  RoFormerOptions options_;
};
TORCH_MODULE(RoFormerEmbeddings);

class RoFormerSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit RoFormerSelfAttentionImpl(const RoFormerOptions& options);
  // x: (B, T, H); mask: (B, 1, 1, T) bool, true = key is a token, or undefined (no padding);
  // sin_pos, cos_pos: (T, D), undefined unless position rotary. Returns the per-head context merged
  // back to (B, T, H).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& sin_pos,
                        const torch::Tensor& cos_pos);

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};  // (H, H) each

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
  RoFormerOptions options_;
  config::Attention attention_;
  RotaryImpl rotary_impl_;
  bool rotary_;  // position rotary: q and k (and v with rotary_value) are rotated
  bool fused_qkv_;
};
TORCH_MODULE(RoFormerSelfAttention);

class RoFormerLayerImpl : public torch::nn::Module {
 public:
  explicit RoFormerLayerImpl(const RoFormerOptions& options);
  // x: (B, T, H) -> (B, T, H). Arguments as RoFormerSelfAttention.
  //   post: a = LN(x + Drop(W_o Attn(x))),        y = LN(a + Drop(W_2 act(W_1 a)))
  //   pre:  a = x + Drop(W_o Attn(LN(x))),        y = a + Drop(W_2 act(W_1 LN(a)))
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& sin_pos,
                        const torch::Tensor& cos_pos);

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
  // rotary; otherwise the layers get no tables); beyond its P rows it is extended (positions_for).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  // The rotary table with at least seq_len rows: the buffer itself when seq_len <= P, otherwise a
  // (seq_len, D) table built by the same formula, whose first P rows equal the buffer bit for bit.
  // RoPE needs no learned rows, so a model trained at length T runs at any length (the buffer,
  // and so a checkpoint or export, keeps its P rows).
  torch::Tensor positions_for(int64_t seq_len) const;

  torch::Tensor embed_positions;                  // (P, D) sin|cos table, buffer (HF embed_positions.weight);
                                                  // undefined unless position rotary
  torch::nn::ModuleList layers{nullptr};          // "layer"
  torch::nn::LayerNorm final_layer_norm{nullptr};  // pre-LN only

 private:
  RoFormerOptions options_;
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
