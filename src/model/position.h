// The position scheme: where position information enters the model (model.position), chosen once
// per model by make_position_scheme and shared by its modules. A scheme owns
//   - its parameters and buffers, registered into the modules Hugging Face keeps them in and at HF's
//     place in the registration order (which is the state dict's order and the order in which
//     init_weights draws them; the golden tests check both):
//       embeddings  after word_embeddings     register_embeddings    (absolute table)
//       attention   after query, key, value   register_attention     (disentangled: pos_*_proj)
//       encoder     before the layers         register_encoder_front (rotary table, a buffer)
//                   after the layers          register_encoder_back  (relative table, its LayerNorm)
//   - what it prepares once per forward for a length T (PositionInputs: the rotary rows, the
//     relative rows and their index), and how it enters each layer (AttentionPositions: q and k
//     rotated, an additive bias of the scores, the softmax scale);
//   - the absolute rows it adds to the input embeddings, and the enhanced mask decoder's;
//   - its figures: FLOPs (model/flops.h), the longest sequence it takes, and the tensors whose size
//     its keys set (model/size.h, so that the commands refuse a huge table before allocating it).
// Schemes: rotary (model/rotary.h), absolute (model/absolute.h), disentangled
// (model/disentangled.h); none is this base class (nothing enters). A new scheme is its own file
// (the math, the scheme, make_<name>_positions, validate_<name>_keys: the rules of its keys), a row
// of kSchemes (position.cpp), and its enum value and keys as rows of the config table
// (core/config.{h,cpp}: their types, defaults and ranges); its Hugging Face family, if it has one, is
// a file in src/hf/.
// Dimensions: B batch, T sequence, H hidden, E embedding, N heads, D head dim.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"

namespace roformer::model {

struct RoFormerOptions;

// What the layers of one forward share from the scheme, prepared for its length T. Two lists so
// that layer recomputation (model/recompute.h) needs no knowledge of a scheme: it passes the
// trainable tensors on as inputs with a gradient and keeps the fixed ones as they are.
struct PositionInputs {
  std::vector<torch::Tensor> trainable;  // carry a gradient to the scheme's parameters (relative rows)
  std::vector<torch::Tensor> fixed;      // tables and indices (rotary sin/cos, the relative index)
};

// How a scheme's bias of the attention scores enters SDPA (model/layers.h attention_backend).
enum class ScoreBias {
  kNone,     // no bias: SDPA gets the key mask only
  kTrained,  // a float bias from q, k and parameters, with a gradient (disentangled)
};

// The scheme's part of one self-attention layer. The defaults leave everything as it is.
class AttentionPositions {
 public:
  virtual ~AttentionPositions() = default;
  // Softmax attention's q, k, v (B, N, T, D) as they enter the scores: rotary rotates q and k (and
  // v with model.rotary_value).
  virtual void transform(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const PositionInputs& inputs) const;
  // The same from the fused QKV projection (B, T, 3, N, D): returns q, k, v (B, N, T, D). The
  // default splits and calls transform; rotary's fused form rotates q and k there in one call.
  virtual std::array<torch::Tensor, 3> transform_packed(const torch::Tensor& qkv, const PositionInputs& inputs) const;
  // Linear attention's feature map phi(q) or phi(k) (B, N, T, D) as its numerator pairs them
  // (RoFormer eq. 19: R_m phi(q_m)); its denominator keeps the plain features.
  virtual torch::Tensor transform_features(const torch::Tensor& features, const PositionInputs& inputs) const;
  // The additive bias of this layer's scores, (B, N, T, T) float, from its q and k (B, N, T, D),
  // already scaled; undefined without one. `training`: the layer's mode (dropout).
  virtual torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const PositionInputs& inputs,
                                   bool training) const;
  virtual ScoreBias bias_kind() const { return ScoreBias::kNone; }
  // The multiplier of q.k; nullopt: SDPA's 1/sqrt(D).
  virtual std::optional<double> score_scale() const { return std::nullopt; }
};

// Tensors whose size one config key sets, as the memory checks count them (model/size.h).
struct TableSize {
  std::string key;          // the key that sets their size ("model.max_position_embeddings")
  double parameters = 0;    // trainable elements: fp32, in training with gradients and AdamW state
  double buffer_bytes = 0;  // a buffer's bytes, counting the temporaries it is computed with
};

// Where the input embeddings take absolute positions: each family sums in its own order, so its
// rounding is its own (BertEmbeddings after the token types, DebertaV2Embeddings before).
enum class EmbeddingStage { kBeforeTokenTypes, kAfterTokenTypes };

// model.position: none is this class as it is: no parameters, nothing enters.
class PositionScheme {
 public:
  virtual ~PositionScheme() = default;

  // ---- parameters and buffers, each registered by the module that holds it, at its place
  virtual void register_embeddings(torch::nn::Module& embeddings);
  // query, key: the layer's own projections (DeBERTa-v3 projects the relative rows with them);
  // local: the layer attends within model.local_attention's window (rotary: its own base).
  virtual std::shared_ptr<AttentionPositions> register_attention(torch::nn::Module& attention,
                                                                 const torch::nn::Linear& query,
                                                                 const torch::nn::Linear& key, bool local = false);
  virtual void register_encoder_front(torch::nn::Module& encoder);
  virtual void register_encoder_back(torch::nn::Module& encoder);

  // ---- one forward
  // x: (B, T, E) the input embeddings summed so far; returns x with the absolute rows offset ..
  // offset + T - 1 added at `stage` (HF's position_ids; the offset exists for tests of shifted
  // positions), or x itself.
  virtual torch::Tensor add_input_positions(const torch::Tensor& x, EmbeddingStage stage, int64_t offset) const;
  // The (P, E) table whose rows add_input_positions adds, undefined when it adds none (the fused
  // embeddings, KernelPolicy::fused_embedding, read the rows themselves).
  virtual torch::Tensor input_position_table() const;
  // What every layer of a forward over x (B, T, H) shares.
  virtual PositionInputs prepare(const torch::Tensor& x);
  // The enhanced mask decoder's absolute positions z (T, E); undefined when the MLM head reads the
  // encoder output (no decoder).
  virtual torch::Tensor decoder_positions(int64_t seq_len) const;

  // ---- figures (from the options alone: nothing is allocated)
  // The longest sequence: a learned absolute table has its rows and nothing beyond (nullopt: any
  // length; rotary extends its table by the formula, relative buckets cover any distance).
  virtual std::optional<int64_t> max_length() const { return std::nullopt; }
  // Forward matmul FLOPs one layer adds for a (batch, seq_len) input (model/flops.h).
  virtual double flops_per_layer(int64_t batch, int64_t seq_len) const;
  // Layer passes on top of num_layers (the enhanced mask decoder runs the last layer twice more
  // instead of once).
  virtual int64_t extra_layer_passes() const { return 0; }
  // Values per token and layer kept for backward beyond the layer's own (the memory estimate).
  virtual double activations_per_token(int64_t seq_len) const;
  // Every tensor whose size one of its keys sets.
  virtual std::vector<TableSize> tables() const { return {}; }
  // What the log's `model:` line says of the scheme ("rotary positions", "disentangled positions
  // (c2p+p2c, 256 buckets, enhanced mask decoder)").
  virtual std::string description() const { return "no positions"; }
};

// The scheme of options.model().position (cheap: nothing is allocated until a module registers).
std::shared_ptr<PositionScheme> make_position_scheme(const RoFormerOptions& options);

// Every scheme's rules of its own keys, whatever model.position is: a key set for another scheme is
// refused (it would be silently ignored), and the chosen scheme's keys are checked together with the
// rest of the model section. Throws roformer::Error naming the key.
void validate_position_keys(const config::ModelConfig& model);

// The model section with the sizes a 0 leaves to another key resolved (embedding_size: H; the chosen
// scheme's own, such as disentangled attention's max_relative_positions), so that two sections
// describing the same model compare equal.
config::ModelConfig with_effective_sizes(config::ModelConfig model);

}  // namespace roformer::model
