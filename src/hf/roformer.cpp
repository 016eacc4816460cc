// Hugging Face RoFormerForMaskedLM (RoFormerConfig): rotary positions in post-LN layers with an MLP
// feed-forward. Our parameter names are its own, and its embedding_size is ours (an E -> H
// projection when smaller than hidden_size).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "hf/family.h"
#include "model/options.h"

namespace roformer::hf {

namespace {

class RoFormer final : public Family {
 public:
  const char* model_type() const override { return "roformer"; }
  const char* architecture() const override { return "RoFormerForMaskedLM"; }
  const char* title() const override { return "RoFormer"; }
  const char* description() const override { return "A RoFormer encoder (rotary position embeddings)"; }
  const char* what() const override { return "rotary positions"; }
  config::Position position() const override { return config::Position::kRotary; }
  bool claims(const config::ModelConfig& m) const override {
    return m.position == config::Position::kRotary && m.feed_forward == config::FeedForward::kMlp;
  }

  void check_expressible(const model::RoFormerOptions& options) const override {
    check_bert_layers(options, title());
    const double base = options.model().rotary_base;
    if (base != 10000.0)
      throw Error(fmt::format("this model uses model.rotary_base {}; Hugging Face's RoFormer hard-codes 10000, so "
                              "export is refused", base));
  }

  void write_config(const model::RoFormerOptions& options, nlohmann::json& config) const override {
    write_bert_config(options, config);
    config["embedding_size"] = options.embedding_size();
    config["rotary_value"] = options.model().rotary_value;
    config["use_cache"] = false;
  }

  config::ModelConfig read_config(const core::JsonReader& config) const override {
    auto m = read_bert_config(config, position());
    m.embedding_size = config.integer("embedding_size", m.hidden_size);
    m.rotary_value = config.boolean("rotary_value", false);
    return m;
  }
};

}  // namespace

const Family& roformer_family() {
  static const RoFormer family;
  return family;
}

}  // namespace roformer::hf
