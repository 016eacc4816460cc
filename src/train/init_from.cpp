// --init-from: finding the source, checking the config against its architecture, taking its
// tokenizer and loading its weights (see init_from.h).
#include "train/init_from.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file.h"
#include "core/safetensors.h"
#include "data/tokenizer.h"
#include "model/hf_names.h"
#include "model/roformer.h"
#include "checkpoint/store.h"
#include "checkpoint/files.h"
#include "checkpoint/meta.h"

namespace roformer::train {
namespace files = checkpoint::files;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kExportKind = "Hugging Face export";
constexpr const char* kTokenTypes = "roformer.embeddings.token_type_embeddings.weight";

// A DebertaV2Config's disentangled-attention settings into ours (`roformer export` writes them all);
// what roformer does not compute is refused by name.
void deberta_settings(const json& j, const std::string& file, config::ModelConfig& m) {
  auto refuse = [&](const std::string& what) {
    throw Error(fmt::format("--init-from: {} has {}, which roformer's disentangled attention does not compute; "
                            "--init-from takes DebertaV2 exports of `roformer export`", file, what));
  };
  if (!j.value("relative_attention", false)) refuse("relative_attention false (no relative positions)");
  if (j.value("norm_rel_ebd", std::string("none")) != "layer_norm")
    refuse("norm_rel_ebd " + j.value("norm_rel_ebd", json("none")).dump() + " (roformer normalizes the relative "
           "embeddings: layer_norm)");
  if (!j.value("legacy", true)) refuse("legacy false (the lm_predictions head; roformer has the cls.predictions one)");
  if (j.value("conv_kernel_size", 0) > 0) refuse("conv_kernel_size > 0 (a convolution after the first layer)");
  if (j.value("embedding_size", m.hidden_size) != m.hidden_size) refuse("embedding_size != hidden_size");
  m.position = config::Position::kDisentangled;
  m.position_buckets = std::max<int64_t>(0, j.value("position_buckets", int64_t{-1}));             // HF: <= 0, none
  m.max_relative_positions = std::max<int64_t>(0, j.value("max_relative_positions", int64_t{-1}));  // HF: < 1, max_pos
  std::string terms;  // a list ["c2p", "p2c"], or the older "p2c|c2p" string
  if (j.contains("pos_att_type") && j.at("pos_att_type").is_array())
    for (const auto& t : j.at("pos_att_type")) terms += t.get<std::string>() + "|";
  else
    terms = j.value("pos_att_type", std::string());
  const bool c2p = terms.find("c2p") != std::string::npos, p2c = terms.find("p2c") != std::string::npos;
  if (!c2p && !p2c) refuse("pos_att_type without c2p or p2c (no relative term)");
  m.pos_att_type = c2p && p2c ? config::RelativeTerms::kBoth : c2p ? config::RelativeTerms::kC2P : config::RelativeTerms::kP2C;
  m.share_att_key = j.value("share_att_key", false);                  // DebertaV2's defaults
  m.position_biased_input = j.value("position_biased_input", true);
}

// config.json of `roformer export --format hf` (a RoFormerConfig, a BertConfig for a model with
// learned absolute positions, a DebertaV2Config for disentangled attention) -> our model section.
// Hugging Face's RoFormer, BERT and DeBERTa are post-LayerNorm softmax attention; RoFormer's rotary
// base is 10000, always; BERT has no E->H projection.
config::ModelConfig architecture_from_hf(const json& j, const std::string& file) {
  auto get = [&](const char* key) -> const json& {
    if (!j.contains(key))
      throw Error(fmt::format("--init-from: {} has no \"{}\"; it is not a config written by `roformer export "
                              "--format hf`", file, key));
    return j.at(key);
  };
  const json& type = get("model_type");
  if (type != "roformer" && type != "bert" && type != "deberta-v2")
    throw Error(fmt::format("--init-from: {} describes a {} model; --init-from takes RoFormer exports (and BERT "
                            "exports of models with learned absolute positions, DebertaV2 ones of disentangled "
                            "attention) only", file, type.dump()));
  const bool bert = type == "bert", deberta = type == "deberta-v2";
  if (bert && j.value("position_embedding_type", std::string("absolute")) != "absolute")
    throw Error(fmt::format("--init-from: {} has position_embedding_type {}; roformer's BERT-style models have "
                            "learned absolute positions only", file, j.at("position_embedding_type").dump()));
  config::ModelConfig m;
  m.vocab_size = get("vocab_size").get<int64_t>();
  m.hidden_size = get("hidden_size").get<int64_t>();
  m.num_layers = get("num_hidden_layers").get<int64_t>();
  m.num_heads = get("num_attention_heads").get<int64_t>();
  m.intermediate_size = get("intermediate_size").get<int64_t>();
  m.embedding_size = bert || deberta ? m.hidden_size : j.value("embedding_size", m.hidden_size);
  m.max_position_embeddings = get("max_position_embeddings").get<int64_t>();
  m.type_vocab_size = get("type_vocab_size").get<int64_t>();
  m.layer_norm_eps = get("layer_norm_eps").get<double>();
  m.rotary_value = type == "roformer" && j.value("rotary_value", false);
  m.position = bert ? config::Position::kAbsolute : config::Position::kRotary;
  if (deberta) deberta_settings(j, file, m);
  const std::string act = get("hidden_act").get<std::string>();
  if (act == "gelu") m.hidden_act = config::Activation::kGelu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_new") m.hidden_act = config::Activation::kGeluTanh;
  else if (act == "relu") m.hidden_act = config::Activation::kRelu;
  else throw Error(fmt::format("--init-from: {} has hidden_act \"{}\", which roformer does not implement (gelu, "
                               "gelu_pytorch_tanh, relu)", file, act));
  m.norm = config::Norm::kPost;
  m.attention = config::Attention::kSoftmax;
  m.rotary_base = 10000.0;
  return m;
}

// The export's spiece.model must be the one it was exported with (its record, from exports that
// write one): weights used with another tokenizer read other words for every id.
void check_export_tokenizer(const InitSource& s) {
  const fs::path record_path = fs::path(s.dir) / kExportRecordFile;
  std::error_code ec;
  if (!fs::exists(record_path, ec)) return;  // an export written before the record existed
  std::string recorded;
  try {
    recorded = json::parse(core::read_file(record_path.string(), "export record")).at("tokenizer_fingerprint").get<std::string>();
  } catch (const std::exception& e) {
    throw Error(fmt::format("--init-from: {} is damaged ({}); export the checkpoint again", record_path.string(),
                            e.what()));
  }
  const std::string actual = data::file_fingerprint(s.tokenizer_model);
  if (actual != recorded)
    throw Error(fmt::format("--init-from: {} is not the tokenizer these weights were exported with (fingerprint {}, "
                            "the export's record says {}): the weights only make sense with theirs; put the exported "
                            "spiece.model back, or export the checkpoint again", s.tokenizer_model, actual, recorded));
}

InitSource export_source(const fs::path& dir) {
  InitSource s;
  s.dir = dir.string();
  s.kind = kExportKind;
  s.weights = (dir / "model.safetensors").string();
  s.tokenizer_model = (dir / "spiece.model").string();
  if (!fs::exists(s.tokenizer_model))
    throw Error(fmt::format("--init-from: {} has no spiece.model, the SentencePiece model `roformer export` writes "
                            "next to the weights; the weights are only usable with the tokenizer they were trained "
                            "with", s.dir));
  const std::string file = (dir / "config.json").string();
  json j;
  try {
    std::ifstream in(file);
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(fmt::format("--init-from: {} is not valid JSON ({})", file, e.what()));
  }
  s.architecture = architecture_from_hf(j, file);
  s.vocab_size = s.architecture.vocab_size;
  check_export_tokenizer(s);
  const auto pieces = data::Tokenizer::load(s.tokenizer_model).vocab_size();
  if (pieces != s.vocab_size)
    throw Error(fmt::format("--init-from: {} says vocab_size {} but its spiece.model has {} pieces; the export is "
                            "inconsistent, export the checkpoint again", file, s.vocab_size, pieces));
  return s;
}

InitSource checkpoint_source(const std::string& path) {
  InitSource s;
  try {
    s.dir = checkpoint::resolve_checkpoint_dir(path);
  } catch (const Error& e) {
    throw Error(fmt::format("--init-from: {}; a directory written by `roformer export --format hf` works too",
                            e.what()));
  }
  const auto check = checkpoint::verify_checkpoint(s.dir);
  if (!check.ok)
    throw Error(fmt::format("--init-from: checkpoint {} is not usable: {}; an earlier checkpoint of the run may be "
                            "intact", s.dir, check.problem));
  s.kind = "checkpoint";
  s.weights = (fs::path(s.dir) / files::kModel).string();
  s.tokenizer_model = (fs::path(s.dir) / files::kTokenizer).string();
  s.architecture = checkpoint::read_checkpoint_meta(s.dir).config.model;
  s.vocab_size = data::Tokenizer::load(s.tokenizer_model).vocab_size();
  return s;
}

}  // namespace

InitSource find_init_source(const std::string& path) {
  if (!fs::exists(path))
    throw Error(fmt::format("--init-from '{}' does not exist; pass a directory written by `roformer export --format "
                            "hf`, a checkpoint (RUN_DIR/checkpoints/step_N) or a run directory", path));
  const fs::path dir(path);
  if (fs::exists(dir / "config.json") && fs::exists(dir / "model.safetensors")) return export_source(dir);
  return checkpoint_source(path);
}

void check_init_architecture(const InitSource& source, const config::Config& config) {
  // A source recording a model that cannot be (0 layers, a head size that does not divide): its
  // values are no advice for the config.
  try {
    config::validate_model(source.architecture);
  } catch (const Error& e) {
    throw Error(fmt::format("--init-from {}: the model it records is not a valid one ({}); the {} is damaged or was "
                            "edited: start from another export or checkpoint", source.dir, e.what(), source.kind));
  }
  // The model sections compared key by key (config::diff, in the table's order), except what a new
  // run chooses for itself: dropout, the initializer, recomputation, and the vocabulary (below).
  const std::set<std::string> new_runs_choice = {"model.vocab_size", "model.hidden_dropout", "model.attention_dropout",
                                                 "model.initializer_range", "model.gradient_checkpointing"};
  config::Config ours, theirs;
  ours.model = config.model;
  theirs.model = source.architecture;
  for (auto* c : {&ours, &theirs}) {
    c->model.embedding_size = config::effective_embedding_size(c->model);  // 0 means H
    if (c->model.position == config::Position::kDisentangled)  // 0 means max_position_embeddings
      c->model.max_relative_positions = config::effective_max_relative_positions(c->model);
  }
  for (const auto& change : config::diff(ours, theirs)) {
    const auto& [key, a, b] = change;
    if (new_runs_choice.count(key)) continue;
    // An export of a model without token types holds one all-zero row (Hugging Face always has the
    // table); load_init_weights checks that it is zero.
    if (key == "model.type_vocab_size" && source.kind == kExportKind && a == "0" && b == "1") continue;
    throw Error(fmt::format("--init-from {}: {} is {} in the config but the weights were trained with {}; set {}: {} "
                            "(the architecture comes with the weights)", source.dir, key, a, b, key, b));
  }
  const int64_t vocab = config.model.vocab_size;
  if (vocab != 0 && vocab != source.vocab_size)
    throw Error(fmt::format("--init-from {}: model.vocab_size is {} in the config but the weights have {} rows; set "
                            "model.vocab_size: 0 (taken from the tokenizer that comes with the weights)",
                            source.dir, vocab, source.vocab_size));
}

std::string adopt_init_tokenizer(const InitSource& source, const config::Config& config, const std::string& run_dir) {
  const std::string fingerprint = data::file_fingerprint(source.tokenizer_model);
  if (!config.tokenizer.model.empty() && data::file_fingerprint(config.tokenizer.model) != fingerprint)
    throw Error(fmt::format("tokenizer.model is {} but --init-from {} comes with another tokenizer ({}); the weights "
                            "only make sense with theirs: remove tokenizer.model from the config",
                            config.tokenizer.model, source.dir, source.tokenizer_model));
  const fs::path path = fs::path(run_dir) / "tokenizer" / "tokenizer.model";
  if (fs::exists(path)) {
    if (data::file_fingerprint(path.string()) != fingerprint)
      throw Error(fmt::format("{} already holds another tokenizer (from an earlier run in {}); start the run from "
                              "--init-from in a new --run-dir", path.string(), run_dir));
    return path.string();
  }
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (!ec) fs::copy_file(source.tokenizer_model, path, ec);
  if (ec) throw Error(fmt::format("cannot copy the tokenizer of --init-from to {}: {}", path.string(), ec.message()));
  return path.string();
}

void load_init_weights(const InitSource& source, model::RoFormerForMaskedLMImpl& model) {
  auto tensors = core::load_safetensors(source.weights);
  const auto family = model::hf_family(source.architecture);
  if (source.kind == kExportKind && family) {
    // An export names the tensors as its Hugging Face class does (bert., deberta. and its *_proj).
    std::map<std::string, torch::Tensor> renamed;
    for (auto& [name, t] : tensors) renamed.emplace(model::from_hf_name(name, *family), std::move(t));
    tensors = std::move(renamed);
  }
  if (model.options().model().type_vocab_size == 0) {
    auto it = tensors.find(kTokenTypes);
    if (it != tensors.end() && it->second.size(0) == 1 && it->second.count_nonzero().item<int64_t>() == 0)
      tensors.erase(it);  // the all-zero row an export adds for a model without token types
  }
  const auto problems = model.hf_state_dict_problems(tensors);
  if (!problems.empty())
    throw Error(fmt::format("--init-from {}: {} (expected: the model the config builds; got: {}){}; the weights "
                            "and the config must describe the same model", source.dir, problems.front(),
                            source.weights,
                            problems.size() > 1 ? fmt::format(", and {} more problem(s)", problems.size() - 1) : ""));
  // Weights that are not finite would make the first step non-finite, blamed on the learning rate.
  for (const auto& [name, t] : tensors)
    if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>())
      throw Error(fmt::format("--init-from {}: tensor {} of {} holds NaN or infinite values: the source is damaged or "
                              "was saved from a diverged run; start from another checkpoint or export",
                              source.dir, name, source.weights));
  model.load_hf_state_dict(tensors);
}

}  // namespace roformer::train
