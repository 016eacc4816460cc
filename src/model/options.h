// RoFormerOptions: the model's architecture is the config's model section (config::ModelConfig,
// docs/config.md), taken as it is, with the vocabulary resolved; beside it only the padding token,
// which the config does not say. How the model computes (which kernels) is not an option of the
// model but the process-wide kernel policy (model/kernel_policy.h).
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <utility>

#include "core/config.h"

namespace roformer::model {

// The model section's rules, checked before a model is built (and in a run's config:
// train/run_config.h): its fields within the table's ranges, the shapes the layers need, and each
// position scheme's own keys (validate_position_keys, position.h). Throws roformer::Error naming the
// key to change.
void validate_model_config(const config::ModelConfig& model);

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
};

// Whether layer `layer` (0-based) attends within model.local_attention's window: with a window,
// every layer but 0, n, 2n, ... (n = model.global_attention_every), as ModernBERT's layer_types.
inline bool is_local_layer(const config::ModelConfig& m, int64_t layer) {
  return m.local_attention > 0 && layer % m.global_attention_every != 0;
}

}  // namespace roformer::model
