// RoFormerOptions: the model's architecture is the config's model section (config::ModelConfig,
// docs/config.md), taken as it is, with the vocabulary resolved; beside it only what the config
// does not say: the padding token and how the model computes on CUDA (Kernels, which `roformer
// bench` varies to measure each fast path).
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/config.h"

namespace roformer::model {

// How the rotation of q and k is computed. Every form gives the same function (up to float rounding).
enum class RotaryImpl {
  kElementwise,  // x cos + rotate_half(x) sin (HF's form; bit-identical to the golden values on the CPU)
  kFused,        // the same rotation as one fp32 complex multiply, rounded once: fewer kernels
  kMatrix,       // naive rotation matrices R_m x_m (benchmark only)
};
// "elementwise" | "fused" | "matrix" (nullopt for another name), and back.
std::optional<RotaryImpl> rotary_impl_named(const std::string& name);
std::string to_string(RotaryImpl impl);

// The kernels the model runs: how it computes, never what (the parameters and checkpoints are the
// same for every choice).
struct Kernels {
  RotaryImpl rotary = RotaryImpl::kElementwise;
  /// On CUDA, q, k and v come from one (3H x H) GEMM of the three weights concatenated per forward
  /// (the parameters stay separate: checkpoints and Hugging Face names do not change). The CPU
  /// always runs the three projections (its results stay bit-identical to the reference).
  bool fused_qkv = true;
  /// On CUDA, every Linear runs ATen's linear: the bias added inside the GEMM (model/layers.h
  /// `linear`), not as a separate mixed-dtype kernel. The CPU keeps the reference F::linear.
  bool bias_in_gemm = true;
};

struct RoFormerOptions {
  // `model.vocab_size` 0 (taken from the tokenizer) is replaced by vocab_size, the rows of the word
  // embedding and of the tied MLM decoder.
  RoFormerOptions(config::ModelConfig model, int64_t vocab_size) : model_(std::move(model)) {
    model_.vocab_size = vocab_size;
  }
  /// E, resolved: model.embedding_size, or H when it is 0. E != H adds the E -> H projection.
  int64_t embedding_size() const { return config::effective_embedding_size(model_); }

  /// The architecture (config::ModelConfig, every field as documented there); vocab_size resolved.
  TORCH_ARG(config::ModelConfig, model);
  /// Padding token: its word-embedding row starts at zero and receives no gradient from the lookup.
  TORCH_ARG(int64_t, pad_token_id) = 0;
  /// The kernels of the forward and backward (CUDA fast paths, the benchmark's naive variants).
  TORCH_ARG(Kernels, kernels);
};

}  // namespace roformer::model
