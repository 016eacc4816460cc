// Hugging Face RobertaForMaskedLM (RobertaConfig): BERT's post-LN layers and learned absolute
// positions, which begin after the pad id: token i of a sequence reads row padding_idx + 1 + i of
// the position table (create_position_ids_from_input_ids; a pad token, row padding_idx). Our table
// holds the rows a token reads, from position 0: --init-from leaves out the first padding_idx + 1
// rows (row padding_idx, a pad's, is zero and never trained; row 0 is never read) and an export
// writes them back as zeros, so the logits of every token but a pad's are Hugging Face's. Every
// released RoBERTa (roberta-base/large, XLM-R, CodeBERT, ...) pads with id 1, the only one taken.
//
// The same computation as BERT's, so the family is chosen by name (model.family: roberta, which
// `config from-hf` and --init-from of a RoBERTa directory carry), never by architecture.
// Names: roberta.<BERT's encoder names>; the head lm_head.{dense, layer_norm, bias}, its decoder
// tied to the word embedding. RobertaForMaskedLM has no pooler (a checkpoint's is left out).
#include <torch/torch.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "hf/family.h"
#include "model/options.h"

namespace roformer::hf {

namespace {

constexpr int64_t kPadId = 1;                // padding_idx of every released RoBERTa
constexpr int64_t kFirstRow = kPadId + 1;    // the row of position 0
constexpr const char* kOurTable = "roformer.embeddings.position_embeddings.weight";
constexpr const char* kTheirTable = "roberta.embeddings.position_embeddings.weight";

class Roberta final : public Family {
 public:
  const char* model_type() const override { return "roberta"; }
  const char* architecture() const override { return "RobertaForMaskedLM"; }
  const char* title() const override { return "RoBERTa"; }
  const char* description() const override {
    return "A RoBERTa encoder (learned absolute position embeddings from padding_idx + 1; `model.position: "
           "absolute`, `model.family: roberta`)";
  }
  const char* what() const override { return "learned absolute positions from padding_idx + 1"; }
  config::Position position() const override { return config::Position::kAbsolute; }
  bool claims(const config::ModelConfig& m) const override {
    return m.position == config::Position::kAbsolute && m.feed_forward == config::FeedForward::kMlp;
  }
  bool chosen_by_architecture() const override { return false; }

  void check_expressible(const model::RoFormerOptions& options) const override {
    check_bert_layers(options, title());
    const auto& m = options.model();
    if (options.embedding_size() != m.hidden_size)
      throw Error(fmt::format("this model has a factorized embedding (model.embedding_size {} != model.hidden_size "
                              "{}); Hugging Face's RoBERTa has no embedding projection, so export is refused",
                              options.embedding_size(), m.hidden_size));
    if (options.pad_token_id() != kPadId)
      throw Error(fmt::format("model.family: roberta exports RoBERTa, whose positions begin after the pad id {}, but "
                              "this model's tokenizer pads with id {}; set model.family: auto to export it as BERT",
                              kPadId, options.pad_token_id()));
  }

  void write_config(const model::RoFormerOptions& options, nlohmann::json& config) const override {
    write_bert_config(options, config);
    config["max_position_embeddings"] = options.model().max_position_embeddings + kFirstRow;
    config["position_embedding_type"] = "absolute";
    config["use_cache"] = false;
  }

  config::ModelConfig read_config(const core::JsonReader& config) const override {
    const std::string type = config.string("position_embedding_type", "absolute");
    if (type != "absolute")
      throw Error(fmt::format("{} has position_embedding_type \"{}\"; roformer's RoBERTa models have learned "
                              "absolute positions only", config.origin(), type));
    const int64_t pad = config.integer("pad_token_id", kPadId);
    if (pad != kPadId)
      throw Error(fmt::format("{} has pad_token_id {}; roformer takes RoBERTa models whose positions begin after pad "
                              "id {} (every released one)", config.origin(), pad, kPadId));
    auto m = read_bert_config(config, position());
    if (m.max_position_embeddings <= kFirstRow)
      config.wrong("max_position_embeddings",
                   fmt::format("an integer above {} (RoBERTa's first {} rows are the pad's and unused)", kFirstRow,
                               kFirstRow));
    m.max_position_embeddings -= kFirstRow;  // the rows a token reads
    m.family = model_type();
    return m;
  }

  std::vector<std::pair<std::string, std::string>> unused_parts() const override {
    return {{"roberta.pooler.", "the pooler"}, {"roberta.embeddings.position_ids", "the position-id buffer"}};
  }

  NamedTensors to_hf(const NamedTensors& ours, const config::ModelConfig&) const override {
    NamedTensors out;
    for (const auto& [name, t] : ours) {
      if (name == kOurTable)  // the pad's row and the unused one before it: zeros
        out.emplace_back(kTheirTable, torch::cat({torch::zeros({kFirstRow, t.size(1)}, t.options()), t}));
      else
        out.emplace_back(to_hf_name(name), t);
    }
    return out;
  }

  std::map<std::string, torch::Tensor> from_hf(std::map<std::string, torch::Tensor> theirs,
                                               const config::ModelConfig&) const override {
    std::map<std::string, torch::Tensor> out;
    for (auto& [name, t] : theirs) {
      // A table of another shape goes on as it is, to be reported as the size mismatch it is.
      if (name == kTheirTable && t.dim() == 2 && t.size(0) > kFirstRow)
        out.emplace(kOurTable, t.narrow(0, kFirstRow, t.size(0) - kFirstRow).contiguous());
      else
        out.emplace(from_hf_name(name), std::move(t));
    }
    return out;
  }

 protected:
  const char* prefix() const override { return "roberta."; }
  // The MLM head: RobertaLMHead's names.
  std::vector<NamePrefix> outer_names() const override {
    return {{"cls.predictions.transform.dense.", "lm_head.dense."},
            {"cls.predictions.transform.LayerNorm.", "lm_head.layer_norm."},
            {"cls.predictions.decoder.", "lm_head.decoder."},
            {"cls.predictions.bias", "lm_head.bias"}};
  }
};

}  // namespace

const Family& roberta_family() {
  static const Roberta family;
  return family;
}

}  // namespace roformer::hf
