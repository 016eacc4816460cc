// The tiny RoFormer the model unit tests share (test_model, test_position): V 50, H 32, 2 layers,
// 4 heads (D 8), 32 positions, no dropout, a wide initializer so that differences show.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "model/options.h"
#include "model/roformer.h"

namespace roformer::test {

// Two layers without dropout; the sizes given, the rest the defaults.
inline config::ModelConfig two_layer_model_config(int64_t hidden, int64_t heads, int64_t intermediate,
                                                  int64_t max_positions) {
  config::ModelConfig m;
  m.hidden_size = hidden;
  m.num_layers = 2;
  m.num_heads = heads;
  m.intermediate_size = intermediate;
  m.max_position_embeddings = max_positions;
  m.hidden_dropout = 0.0;
  m.attention_dropout = 0.0;
  return m;
}

inline config::ModelConfig tiny_model_config() {
  config::ModelConfig m = two_layer_model_config(32, 4, 48, 32);
  m.embedding_size = 32;
  m.initializer_range = 0.1;
  return m;
}

// The tiny model with config overrides applied, as `--set` applies them: {"model.norm=pre"}.
inline model::RoFormerOptions tiny_model_options(const std::vector<std::string>& overrides = {},
                                                 int64_t vocab_size = 50) {
  config::Config c;
  c.model = tiny_model_config();
  for (const auto& o : overrides) config::apply_override(c, o);
  return model::RoFormerOptions(c.model, vocab_size);
}

// A config read by the table (config::parse_config), then held to the model section's rules, each
// position scheme's its own (model::validate_model_config): what the model checks before it builds.
inline config::Config model_checked_config(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  config::Config c = config::parse_config(yaml, overrides);
  model::validate_model_config(c.model);
  return c;
}

// The model's parameters by their Hugging Face (RoFormer) names, tied tensors once.
inline std::map<std::string, torch::Tensor> parameters_by_name(const model::RoFormerForMaskedLMImpl& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, t] : model.hf_named_parameters()) out.emplace(name, t);
  return out;
}

}  // namespace roformer::test
