// Hugging Face DebertaV2ForMaskedLM (DebertaV2Config): disentangled attention over relative
// positions (model/disentangled.h), its legacy MLM head (ours: dense, act, LayerNorm, tied decoder).
// The prefix deberta., and in attention.self query/key/value -> query_proj/key_proj/value_proj; the
// disentangled parts (pos_key_proj, pos_query_proj, encoder.rel_embeddings, encoder.LayerNorm) and
// the head (cls.predictions.*) carry its names already.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "hf/family.h"
#include "model/disentangled.h"
#include "model/options.h"

namespace roformer::hf {

namespace {

class DebertaV2 final : public Family {
 public:
  const char* model_type() const override { return "deberta-v2"; }
  const char* architecture() const override { return "DebertaV2ForMaskedLM"; }
  const char* title() const override { return "DeBERTa-v2"; }
  const char* description() const override {
    return "A DeBERTa-v2/v3-style encoder (disentangled attention over relative positions; `model.position: "
           "disentangled`)";
  }
  const char* what() const override { return "relative positions in disentangled attention"; }
  config::Position position() const override { return config::Position::kDisentangled; }
  bool claims(const config::ModelConfig& m) const override {
    return m.position == config::Position::kDisentangled && m.feed_forward == config::FeedForward::kMlp;
  }
  bool token_types_always() const override { return false; }  // DebertaV2 runs without (0), as v3 does

  void check_expressible(const model::RoFormerOptions& options) const override {
    check_bert_layers(options, title());
    const auto& m = options.model();
    if (m.enhanced_mask_decoder)
      throw Error("this model uses model.enhanced_mask_decoder: true; Hugging Face's DebertaV2ForMaskedLM has no "
                  "enhanced mask decoder (its MLM head reads the encoder's last layer, which this model's head never "
                  "did), so an export would load there and predict something else. Export is refused; keep using "
                  "`roformer eval` and `fill-mask`, or train with model.enhanced_mask_decoder: false to export");
    if (options.embedding_size() != m.hidden_size)
      throw Error(fmt::format("this model has disentangled attention and a factorized embedding (model.embedding_size "
                              "{} != model.hidden_size {}); Hugging Face's DebertaV2 projects the embedding before "
                              "its LayerNorm and without a bias, ours after it with one, so export is refused",
                              options.embedding_size(), m.hidden_size));
  }

  // Relative attention over the shared, LayerNorm'd relative table (norm_rel_ebd), the legacy head.
  void write_config(const model::RoFormerOptions& options, nlohmann::json& config) const override {
    const auto& m = options.model();
    write_bert_config(options, config);
    nlohmann::json terms = nlohmann::json::array();
    if (m.pos_att_type != config::RelativeTerms::kP2C) terms.push_back("c2p");
    if (m.pos_att_type != config::RelativeTerms::kC2P) terms.push_back("p2c");
    config["type_vocab_size"] = m.type_vocab_size;
    config["relative_attention"] = true;
    config["position_buckets"] = m.position_buckets;  // 0: exact distances (HF: buckets only when > 0)
    config["max_relative_positions"] = model::effective_max_relative_positions(m);
    config["pos_att_type"] = terms;
    config["share_att_key"] = m.share_att_key;
    config["position_biased_input"] = m.position_biased_input;
    config["norm_rel_ebd"] = "layer_norm";
    config["legacy"] = true;
  }

  // Every setting `roformer export` writes; what roformer does not compute is refused by name.
  config::ModelConfig read_config(const core::JsonReader& config) const override {
    auto m = read_bert_config(config, position());
    auto refuse = [&](const std::string& what) {
      throw Error(fmt::format("{} has {}, which roformer's disentangled attention does not compute; --init-from "
                              "takes DebertaV2 exports of `roformer export`", config.origin(), what));
    };
    if (!config.boolean("relative_attention", false)) refuse("relative_attention false (no relative positions)");
    const std::string norm = config.string("norm_rel_ebd", "none");
    if (norm != "layer_norm")
      refuse("norm_rel_ebd \"" + norm + "\" (roformer normalizes the relative embeddings: layer_norm)");
    if (config.integer("conv_kernel_size", 0) > 0) refuse("conv_kernel_size > 0 (a convolution after the first layer)");
    if (config.integer("embedding_size", m.hidden_size) != m.hidden_size) refuse("embedding_size != hidden_size");
    m.position_buckets = std::max<int64_t>(0, config.integer("position_buckets", -1));              // HF: <= 0, none
    m.max_relative_positions = std::max<int64_t>(0, config.integer("max_relative_positions", -1));  // HF: < 1, max_pos
    const std::string terms = relative_terms(config);
    const bool c2p = terms.find("c2p") != std::string::npos, p2c = terms.find("p2c") != std::string::npos;
    if (!c2p && !p2c) refuse("pos_att_type without c2p or p2c (no relative term)");
    m.pos_att_type = c2p && p2c ? config::RelativeTerms::kBoth : c2p ? config::RelativeTerms::kC2P
                                                                    : config::RelativeTerms::kP2C;
    m.share_att_key = config.boolean("share_att_key", false);  // DebertaV2's defaults
    m.position_biased_input = config.boolean("position_biased_input", true);
    return m;
  }

  // DeBERTa-v3's released checkpoints are replaced-token-detection discriminators: their head
  // (mask_predictions) is not an MLM head, and they may carry none (--init-from then starts a new one).
  std::vector<std::pair<std::string, std::string>> unused_parts() const override {
    return {{"mask_predictions.", "the replaced-token-detection head"},
            {"deberta.embeddings.position_ids", "the position-id buffer"}};
  }
  // A head saved with legacy false (lm_predictions.lm_head) is the same head as the legacy one
  // (cls.predictions), which an export writes.
 protected:
  const char* prefix() const override { return "deberta."; }
  // DisentangledSelfAttention calls the projections query_proj, key_proj, value_proj.
  std::vector<std::pair<std::string, std::string>> renamed_parts() const override {
    return {{".attention.self.query.", ".attention.self.query_proj."},
            {".attention.self.key.", ".attention.self.key_proj."},
            {".attention.self.value.", ".attention.self.value_proj."}};
  }
  // The MLM head of DebertaV2ForMaskedLM with legacy: false, read as the legacy one we write (BERT's
  // cls.predictions.*, which passes unchanged).
  std::vector<NamePrefix> outer_names() const override {
    return {{"cls.predictions.transform.dense.", "lm_predictions.lm_head.dense.", true},
            {"cls.predictions.transform.LayerNorm.", "lm_predictions.lm_head.LayerNorm.", true},
            {"cls.predictions.bias", "lm_predictions.lm_head.bias", true}};
  }

 private:
  // pos_att_type: a list ["c2p", "p2c"], or the older "p2c|c2p" string; "" when absent.
  static std::string relative_terms(const core::JsonReader& config) {
    if (!config.has("pos_att_type")) return "";
    if (config.at("pos_att_type").is_string()) return config.string("pos_att_type");
    if (!config.at("pos_att_type").is_array())
      config.wrong("pos_att_type", "a list of \"c2p\" and \"p2c\" (or a string \"c2p|p2c\")");
    std::string terms;
    for (const auto& t : config.strings("pos_att_type")) terms += t + "|";
    return terms;
  }
};

}  // namespace

const Family& deberta_v2_family() {
  static const DebertaV2 family;
  return family;
}

}  // namespace roformer::hf
