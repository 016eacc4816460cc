// Hugging Face BertForMaskedLM (BertConfig): learned absolute positions, added to the embeddings
// after the token types (model/absolute.h). The same post-LN layer as RoFormer's under the prefix
// bert.; no E -> H projection.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "hf/family.h"
#include "model/options.h"

namespace roformer::hf {

namespace {

class Bert final : public Family {
 public:
  const char* model_type() const override { return "bert"; }
  const char* architecture() const override { return "BertForMaskedLM"; }
  const char* title() const override { return "BERT"; }
  const char* description() const override {
    return "A BERT encoder (learned absolute position embeddings; `model.position: absolute`)";
  }
  const char* what() const override { return "learned absolute positions"; }
  config::Position position() const override { return config::Position::kAbsolute; }
  bool claims(const config::ModelConfig& m) const override {
    return m.position == config::Position::kAbsolute && m.feed_forward == config::FeedForward::kMlp;
  }

  void check_expressible(const model::RoFormerOptions& options) const override {
    check_bert_layers(options, title());
    if (options.embedding_size() != options.model().hidden_size)
      throw Error(fmt::format("this model has learned absolute positions and a factorized embedding "
                              "(model.embedding_size {} != model.hidden_size {}); Hugging Face's BERT has no "
                              "embedding projection, so export is refused", options.embedding_size(),
                              options.model().hidden_size));
  }

  void write_config(const model::RoFormerOptions& options, nlohmann::json& config) const override {
    write_bert_config(options, config);
    config["position_embedding_type"] = "absolute";
    config["use_cache"] = false;
  }

  config::ModelConfig read_config(const core::JsonReader& config) const override {
    const std::string type = config.string("position_embedding_type", "absolute");
    if (type != "absolute")
      throw Error(fmt::format("{} has position_embedding_type \"{}\"; roformer's BERT-style models have learned "
                              "absolute positions only", config.origin(), type));
    return read_bert_config(config, position());
  }

 protected:
  std::vector<std::pair<std::string, std::string>> unused_parts() const override {
    return {{"bert.pooler.", "the pooler"}, {"cls.seq_relationship.", "the next-sentence head"}};
  }
  const char* prefix() const override { return "bert."; }
};

}  // namespace

const Family& bert_family() {
  static const Bert family;
  return family;
}

}  // namespace roformer::hf
