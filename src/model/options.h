// RoFormerOptions: every knob of the RoFormer MLM model, mirroring config::ModelConfig (see
// docs/config.md for the meaning of each) plus two settings used only by tests and benchmarks.
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <string>

namespace roformer::config {
struct ModelConfig;
}

namespace roformer::model {

struct RoFormerOptions {
  RoFormerOptions() = default;
  /// V: vocabulary size (rows of the word embedding and of the tied MLM decoder).
  TORCH_ARG(int64_t, vocab_size) = 0;
  /// H: hidden size.
  TORCH_ARG(int64_t, hidden_size) = 768;
  /// Encoder layers.
  TORCH_ARG(int64_t, num_layers) = 12;
  /// N: attention heads; the head dim D = H / N must be even (rotary pairs).
  TORCH_ARG(int64_t, num_heads) = 12;
  /// Feed-forward inner size.
  TORCH_ARG(int64_t, intermediate_size) = 3072;
  /// E: embedding size (resolved, never 0). E != H adds the E -> H `embeddings_project` Linear.
  TORCH_ARG(int64_t, embedding_size) = 768;
  /// Rows of the rotary sin/cos table or of the learned absolute position table: the longest
  /// sequence the model accepts (no limit with position "none").
  TORCH_ARG(int64_t, max_position_embeddings) = 1536;
  /// "rotary" (RoPE in every attention layer), "absolute" (BERT's learned position embeddings added
  /// to the word embeddings) or "none" (no position information: the control).
  TORCH_ARG(std::string, position) = "rotary";
  /// Token-type embedding rows; 0 disables the token-type embedding.
  TORCH_ARG(int64_t, type_vocab_size) = 2;
  /// Dropout after the embeddings, the attention output and the feed-forward output.
  TORCH_ARG(double, hidden_dropout) = 0.1;
  /// Dropout on the attention probabilities (softmax attention only).
  TORCH_ARG(double, attention_dropout) = 0.1;
  TORCH_ARG(double, layer_norm_eps) = 1e-12;
  /// Std of the normal initializer (HF's initializer_range).
  TORCH_ARG(double, initializer_range) = 0.02;
  /// theta_i = rotary_base^(-2i/D).
  TORCH_ARG(double, rotary_base) = 10000.0;
  /// Also rotate V (HF's rotary_value).
  TORCH_ARG(bool, rotary_value) = false;
  /// "post" (HF RoFormer / BERT) or "pre" (pre-LayerNorm plus a final LayerNorm).
  TORCH_ARG(std::string, norm) = "post";
  /// "softmax" (scaled dot-product attention) or "linear" (the paper's elu+1 linear attention).
  TORCH_ARG(std::string, attention) = "softmax";
  /// "gelu" (exact erf, HF "gelu"), "gelu_tanh" (HF "gelu_pytorch_tanh" / "gelu_new") or "relu".
  TORCH_ARG(std::string, hidden_act) = "gelu";
  /// Recompute each layer in backward instead of storing its activations.
  TORCH_ARG(bool, gradient_checkpointing) = false;
  /// Padding token: its word-embedding row starts at zero and receives no gradient from the lookup.
  TORCH_ARG(int64_t, pad_token_id) = 0;
  /// "elementwise" (x cos + rotate_half(x) sin), "fused" (the same rotation as one fp32 complex
  /// multiply, rounded once: fewer kernels; the trainer's choice on CUDA) or "matrix" (naive
  /// rotation matrices; benchmark only).
  TORCH_ARG(std::string, rotary_impl) = "elementwise";
  /// On CUDA, q, k and v come from one (3H x H) GEMM of the three weights concatenated per forward
  /// (the parameters stay separate: checkpoints and Hugging Face names do not change). The CPU
  /// always runs the three projections (its results stay bit-identical to the reference).
  TORCH_ARG(bool, fused_qkv) = true;
  /// On CUDA, every Linear runs ATen's linear: the bias added inside the GEMM (model/layers.h
  /// `linear`), not as a separate mixed-dtype kernel. The CPU keeps the reference F::linear.
  TORCH_ARG(bool, bias_in_gemm) = true;
};

// The enumerated options, parsed once (validate_options, the module constructors) so that no forward
// compares strings. Each parser throws roformer::Error naming the option and the accepted values.
enum class Position { kRotary, kAbsolute, kNone };
enum class Norm { kPost, kPre };
enum class Attention { kSoftmax, kLinear };
enum class Activation { kGelu, kGeluTanh, kRelu };
enum class RotaryImpl { kElementwise, kFused, kMatrix };
Position parse_position(const std::string& name);
Norm parse_norm(const std::string& name);
Attention parse_attention(const std::string& name);
Activation parse_activation(const std::string& name);
RotaryImpl parse_rotary_impl(const std::string& name);

// From the config section; vocab_size is passed separately (the config's may be 0 = from tokenizer).
RoFormerOptions options_from_config(const config::ModelConfig& model, int64_t vocab_size);

// Throws roformer::Error when the options are inconsistent (e.g. H not divisible by N, odd D).
void validate_options(const RoFormerOptions& options);

}  // namespace roformer::model
