// The families' table, what they share (config.json's common keys both ways, the common refusals)
// and the name mapping; see family.h.
#include "hf/family.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "model/options.h"

namespace roformer::hf {

namespace {

constexpr const char* kOurPrefix = "roformer.";  // our names are Hugging Face RoFormer's

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// `name` with its first `from` replaced by `to` (unchanged when it holds none).
std::string replaced(std::string name, const std::string& from, const std::string& to) {
  const auto at = name.find(from);
  if (at != std::string::npos) name.replace(at, from.size(), to);
  return name;
}

// "RoFormer, BERT and DeBERTa-v2": each family's `part`, for messages.
template <typename Part>
std::string listed(Part part) {
  std::string out;
  const auto& all = families();
  for (size_t i = 0; i < all.size(); ++i)
    out += (i == 0 ? "" : i + 1 == all.size() ? " and " : ", ") + part(*all[i]);
  return out;
}

std::string titles() {
  return listed([](const Family& f) { return std::string(f.title()); });
}

const Family* family_named(const std::string& model_type) {
  for (const Family* f : families())
    if (model_type == f->model_type()) return f;
  return nullptr;
}

const char* hf_activation(config::Activation act) {
  switch (act) {
    case config::Activation::kGelu: return "gelu";                   // erf GELU
    case config::Activation::kGeluTanh: return "gelu_pytorch_tanh";  // tanh approximation
    case config::Activation::kRelu: return "relu";
  }
  return "?";
}

config::Activation activation_from_hf(const core::JsonReader& j) {
  const std::string act = j.string("hidden_act");
  if (act == "gelu") return config::Activation::kGelu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") return config::Activation::kGeluTanh;  // the same values
  if (act == "relu") return config::Activation::kRelu;
  throw Error(fmt::format("{} has hidden_act \"{}\", which roformer does not implement (gelu, gelu_pytorch_tanh, "
                          "relu)", j.origin(), act));
}

}  // namespace

const std::vector<const Family*>& families() {
  static const std::vector<const Family*> all = {&roformer_family(), &bert_family(), &deberta_v2_family()};
  return all;
}

void Family::check_expressible(const model::RoFormerOptions&) const {}

std::string Family::to_hf_name(const std::string& ours) const {
  if (!starts_with(ours, kOurPrefix)) return ours;
  std::string out = prefix() + ours.substr(std::string(kOurPrefix).size());
  for (const auto& [our_part, their_part] : renamed_parts()) out = replaced(out, our_part, their_part);
  return out;
}

std::string Family::from_hf_name(const std::string& theirs) const {
  if (!starts_with(theirs, prefix())) return theirs;
  std::string out = kOurPrefix + theirs.substr(std::string(prefix()).size());
  for (const auto& [our_part, their_part] : renamed_parts()) out = replaced(out, their_part, our_part);
  return out;
}

const Family& export_family(const model::RoFormerOptions& options) {
  const auto& m = options.model();
  if (m.norm != config::Norm::kPost)
    throw Error(fmt::format("this model is pre-LayerNorm (model.norm: pre); Hugging Face's {} are post-LayerNorm "
                            "only, so an export would load there and compute something else. Export is refused; "
                            "keep using `roformer eval` and `fill-mask` for this model", titles()));
  if (m.attention != config::Attention::kSoftmax)
    throw Error(fmt::format("this model uses linear attention (model.attention: linear), which Hugging Face's {} do "
                            "not have; export is refused", titles()));
  for (const Family* f : families()) {
    if (f->position() != m.position) continue;
    f->check_expressible(options);
    return *f;
  }
  throw Error(fmt::format("this model uses model.position: {}, which none of Hugging Face's families computes ({}), "
                          "so export is refused", config::to_string(m.position), listed([](const Family& f) {
                            return fmt::format("{} has {}", f.title(), f.positions_phrase());
                          })));
}

nlohmann::json config_json(const Family& family, const model::RoFormerOptions& options) {
  const auto& m = options.model();
  nlohmann::json config = {
      {"architectures", {family.architecture()}},
      {"model_type", family.model_type()},
      {"vocab_size", m.vocab_size},
      {"hidden_size", m.hidden_size},
      {"num_hidden_layers", m.num_layers},
      {"num_attention_heads", m.num_heads},
      {"intermediate_size", m.intermediate_size},
      {"hidden_act", hf_activation(m.hidden_act)},
      {"hidden_dropout_prob", m.hidden_dropout},
      {"attention_probs_dropout_prob", m.attention_dropout},
      {"max_position_embeddings", m.max_position_embeddings},
      {"type_vocab_size", std::max<int64_t>(1, m.type_vocab_size)},  // token_types_always
      {"initializer_range", m.initializer_range},
      {"layer_norm_eps", m.layer_norm_eps},
      {"pad_token_id", options.pad_token_id()},
      {"tie_word_embeddings", true}};
  // Ours, not the family's (Hugging Face keeps it as an attribute and ignores it): the model has no
  // biases and the export's zero ones stand for them, which --init-from drops again.
  if (!m.bias) config[kNoBiasKey] = false;
  family.write_config(options, config);
  return config;
}

ExportedModel read_config_json(const nlohmann::json& config, const std::string& file) {
  const core::JsonReader j(config, "--init-from: " + file,
                           "--init-from takes the config.json `roformer export --format hf` writes; export the "
                           "checkpoint again");
  const std::string type = j.string("model_type");
  const Family* family = family_named(type);
  if (!family)
    throw Error(fmt::format("--init-from: {} describes a \"{}\" model; --init-from takes the families roformer exports "
                            "to: {}", file, type, listed([](const Family& f) {
                              return fmt::format("{} ({}, {})", f.model_type(), f.architecture(), f.positions_phrase());
                            })));
  config::ModelConfig m;
  m.vocab_size = j.integer("vocab_size");
  m.hidden_size = j.integer("hidden_size");
  m.num_layers = j.integer("num_hidden_layers");
  m.num_heads = j.integer("num_attention_heads");
  m.intermediate_size = j.integer("intermediate_size");
  m.embedding_size = m.hidden_size;  // a family with an embedding projection reads its own
  m.max_position_embeddings = j.integer("max_position_embeddings");
  m.type_vocab_size = j.integer("type_vocab_size");
  m.layer_norm_eps = j.number("layer_norm_eps");
  m.hidden_act = activation_from_hf(j);
  m.bias = j.boolean(kNoBiasKey, true);
  // Hugging Face's families are post-LayerNorm softmax attention; RoFormer's rotary base is 10000, always.
  m.norm = config::Norm::kPost;
  m.attention = config::Attention::kSoftmax;
  m.rotary_base = 10000.0;
  m.position = family->position();
  family->read_config(j, m);
  return {family, m};
}

}  // namespace roformer::hf
