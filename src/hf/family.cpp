// The families' table, the choice of a family (by what the model is), what the BERT-like families
// share (config.json's common keys both ways, their refusals) and the name mapping; see family.h.
#include "hf/family.h"

#include <torch/torch.h>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "model/options.h"

namespace roformer::hf {

namespace {

constexpr const char* kOurPrefix = "roformer.";  // our names are Hugging Face RoFormer's

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

const Family* family_named(const std::string& model_type) {
  for (const Family* f : families())
    if (model_type == f->model_type()) return f;
  return nullptr;
}

}  // namespace

const std::vector<const Family*>& families() {
  static const std::vector<const Family*> all = {&roformer_family(), &bert_family(), &roberta_family(),
                                                 &deberta_v2_family(), &modernbert_family()};
  return all;
}

std::string Family::outer_mapped(const std::string& name, bool to_theirs) const {
  for (const auto& p : outer_names()) {
    if (to_theirs && p.read_only) continue;
    const std::string& from = to_theirs ? p.ours : p.theirs;
    if (starts_with(name, from)) return (to_theirs ? p.theirs : p.ours) + name.substr(from.size());
  }
  return "";
}

std::string Family::to_hf_name(const std::string& ours) const {
  if (std::string outer = outer_mapped(ours, true); !outer.empty()) return outer;
  if (!starts_with(ours, kOurPrefix)) return ours;
  std::string out = prefix() + ours.substr(std::string(kOurPrefix).size());
  for (const auto& [our_part, their_part] : renamed_parts()) out = replaced(out, our_part, their_part);
  return out;
}

std::string Family::from_hf_name(const std::string& theirs) const {
  if (std::string outer = outer_mapped(theirs, false); !outer.empty()) return outer;
  if (!starts_with(theirs, prefix())) return theirs;
  std::string out = kOurPrefix + theirs.substr(std::string(prefix()).size());
  for (const auto& [our_part, their_part] : renamed_parts()) out = replaced(out, their_part, our_part);
  return out;
}

NamedTensors Family::to_hf(const NamedTensors& ours, const config::ModelConfig&) const {
  NamedTensors out;
  for (const auto& [name, t] : ours) out.emplace_back(to_hf_name(name), t);
  return out;
}

std::map<std::string, torch::Tensor> Family::from_hf(std::map<std::string, torch::Tensor> theirs,
                                                     const config::ModelConfig&) const {
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, t] : theirs) out.emplace(from_hf_name(name), std::move(t));
  return out;
}

const Family& export_family(const model::RoFormerOptions& options) {
  const auto& m = options.model();
  if (m.attention != config::Attention::kSoftmax)
    throw Error(fmt::format("this model uses linear attention (model.attention: linear), which Hugging Face's {} do "
                            "not have; export is refused",
                            listed([](const Family& f) { return std::string(f.title()); })));
  if (m.family != "auto") {
    const Family* named = family_named(m.family);
    if (!named)  // the config table's choices are the families' model types
      throw Error(fmt::format("model.family: {} names no Hugging Face family roformer exports to ({}); set "
                              "model.family: auto", m.family,
                              listed([](const Family& f) { return std::string(f.model_type()); })));
    if (!named->claims(m))
      throw Error(fmt::format("model.family: {} exports as {}, which has {}, but this model has model.position: {} "
                              "and model.feed_forward: {}; set model.family: auto to export as the family of its "
                              "architecture", m.family, named->title(), named->what(), config::to_string(m.position),
                              config::to_string(m.feed_forward)));
    named->check_expressible(options);
    return *named;
  }
  for (const Family* f : families()) {
    if (!f->chosen_by_architecture() || !f->claims(m)) continue;
    f->check_expressible(options);
    return *f;
  }
  throw Error(fmt::format("this model uses model.position: {} with model.feed_forward: {}, which none of Hugging "
                          "Face's families computes ({}), so export is refused",
                          config::to_string(m.position), config::to_string(m.feed_forward),
                          listed([](const Family& f) { return fmt::format("{} has {}", f.title(), f.what()); })));
}

nlohmann::json config_json(const Family& family, const model::RoFormerOptions& options) {
  nlohmann::json config = {{"architectures", {family.architecture()}}, {"model_type", family.model_type()}};
  family.write_config(options, config);
  return config;
}

ExportedModel read_config_json(const nlohmann::json& config, const std::string& file, const std::string& command) {
  const core::JsonReader j(config, command + ": " + file,
                           "give the config.json of a Hugging Face model directory as save_pretrained, a Hub download "
                           "or `roformer export --format hf` leaves it (download or export it again)");
  const std::string type = j.string("model_type");
  const Family* family = family_named(type);
  if (!family)
    throw Error(fmt::format("{}: {} describes a \"{}\" model; {} takes the families roformer computes: {}", command,
                            file, type, command, listed([](const Family& f) {
                              return fmt::format("{} ({}, {})", f.model_type(), f.architecture(), f.what());
                            })));
  return {family, family->read_config(j)};
}

// ---- The BERT-like families' share ----------------------------------------------------------------

void check_bert_layers(const model::RoFormerOptions& options, const char* title) {
  const auto& m = options.model();
  if (m.norm != config::Norm::kPost)
    throw Error(fmt::format("this model is pre-LayerNorm (model.norm: pre); Hugging Face's {} is post-LayerNorm "
                            "only, so an export would load there and compute something else. Export is refused; "
                            "keep using `roformer eval` and `fill-mask` for this model (Hugging Face's pre-LayerNorm "
                            "family, ModernBERT, has model.feed_forward: glu)", title));
  if (m.local_attention > 0)
    throw Error(fmt::format("this model attends locally (model.local_attention {}); Hugging Face's {} attends "
                            "globally in every layer, so export is refused", m.local_attention, title));
}

const char* hf_activation(config::Activation act) {
  switch (act) {
    case config::Activation::kGelu: return "gelu";                   // erf GELU
    case config::Activation::kGeluTanh: return "gelu_pytorch_tanh";  // tanh approximation
    case config::Activation::kRelu: return "relu";
  }
  return "?";
}

config::Activation activation_from_hf(const core::JsonReader& j, const std::string& key) {
  const std::string act = j.string(key);
  if (act == "gelu") return config::Activation::kGelu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") return config::Activation::kGeluTanh;  // the same values
  if (act == "relu") return config::Activation::kRelu;
  throw Error(fmt::format("{} has {} \"{}\", which roformer does not implement (gelu, gelu_pytorch_tanh, relu)",
                          j.origin(), key, act));
}

void write_bert_config(const model::RoFormerOptions& options, nlohmann::json& config) {
  const auto& m = options.model();
  config.update({{"vocab_size", m.vocab_size},
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
                 {"tie_word_embeddings", true}});
  // Ours, not the family's (Hugging Face keeps it as an attribute and ignores it): the model has no
  // biases and the export's zero ones stand for them, which --init-from drops again.
  if (!m.bias) config[kNoBiasKey] = false;
}

config::ModelConfig read_bert_config(const core::JsonReader& j, config::Position position) {
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
  m.hidden_act = activation_from_hf(j, "hidden_act");
  m.bias = j.boolean(kNoBiasKey, true);
  // These families are post-LayerNorm softmax attention; RoFormer's rotary base is 10000, always.
  m.norm = config::Norm::kPost;
  m.attention = config::Attention::kSoftmax;
  m.rotary_base = 10000.0;
  m.position = position;
  return m;
}

}  // namespace roformer::hf
