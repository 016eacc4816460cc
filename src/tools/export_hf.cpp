// `roformer export --format hf`: weights, config, tokenizer and model card for transformers; see export_hf.h.
#include "tools/export_hf.h"


#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/file.h"
#include "core/publish.h"
#include "core/safetensors.h"
#include "core/utf8.h"
#include "checkpoint/loader.h"
#include "model/hf_names.h"
#include "tools/hf_tokenizer.h"
#include "checkpoint/store.h"
#include "train/init_from.h"
#include "train/metrics.h"
#include "checkpoint/files.h"

namespace roformer::tools {
namespace files = checkpoint::files;
namespace fs = std::filesystem;

namespace {
std::string hf_activation(config::Activation act) {
  switch (act) {
    case config::Activation::kGelu: return "gelu";                   // erf GELU
    case config::Activation::kGeluTanh: return "gelu_pytorch_tanh";  // tanh approximation
    case config::Activation::kRelu: return "relu";
  }
  return "?";
}

// A checkpoint (its manifest or trainer state), a run's checkpoints/ folder, or any folder inside it.
bool is_training_state(const fs::path& dir) {
  if (fs::exists(dir / files::kManifest) || fs::exists(dir / files::kTrainerState) || fs::exists(dir / "latest"))
    return true;
  for (fs::path p = fs::weakly_canonical(dir); !p.empty() && p != p.root_path(); p = p.parent_path())
    if (p.filename() == "checkpoints" && fs::exists(p / "latest")) return true;
  return false;
}

// Checked before the checkpoint is loaded, so a refused export costs nothing.
void check_export_dir(const std::string& out_dir, bool force) {
  const fs::path out(out_dir);
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec))
    throw Error(fmt::format("--out {} exists and is not a directory; choose a new directory", out_dir));
  if (is_training_state(out))
    throw Error(fmt::format("--out {} holds a checkpoint (or is inside a run's checkpoints/); an export would "
                            "replace its model.safetensors and damage it. Export into a new directory",
                            out_dir));
  if (fs::directory_iterator(out, ec) != fs::directory_iterator() && !force)
    throw Error(fmt::format("--out {} is not empty; export into a new or empty directory, or pass --force to "
                            "replace the export's files there", out_dir));
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "`" : ", `") + s + "`";
  return out.empty() ? "none" : out;
}

// The Hugging Face class a checkpoint exports to: RoFormerForMaskedLM for rotary positions,
// BertForMaskedLM for learned absolute ones (the same post-LN layer; BERT adds its position table to
// the embeddings and has no E->H projection), DebertaV2ForMaskedLM (its legacy MLM head, which is
// ours) for disentangled attention. Everything else is refused with the reason.
struct HfTarget {
  model::HfFamily family;
  std::string architecture;  // config.json "architectures"
  std::string model_type;    // config.json "model_type"
  std::string name;          // the model card's title
  std::string description;   // the model card's first words
};

// A DeBERTa-v2/v3 model of ours that DebertaV2ForMaskedLM computes exactly, or the reason it cannot.
HfTarget deberta_target(const config::ModelConfig& m, int64_t embedding_size) {
  if (m.enhanced_mask_decoder)
    throw Error("this model uses model.enhanced_mask_decoder: true; Hugging Face's DebertaV2ForMaskedLM has no "
                "enhanced mask decoder (its MLM head reads the encoder's last layer, which this model's head never "
                "did), so an export would load there and predict something else. Export is refused; keep using "
                "`roformer eval` and `fill-mask`, or train with model.enhanced_mask_decoder: false to export");
  if (embedding_size != m.hidden_size)
    throw Error(fmt::format("this model has disentangled attention and a factorized embedding (model.embedding_size "
                            "{} != model.hidden_size {}); Hugging Face's DebertaV2 projects the embedding before its "
                            "LayerNorm and without a bias, ours after it with one, so export is refused",
                            embedding_size, m.hidden_size));
  return {model::HfFamily::kDebertaV2, "DebertaV2ForMaskedLM", "deberta-v2", "DeBERTa-v2",
          "A DeBERTa-v2/v3-style encoder (disentangled attention over relative positions; `model.position: "
          "disentangled`)"};
}

HfTarget hf_target(const config::ModelConfig& m, int64_t embedding_size) {
  if (m.norm != config::Norm::kPost)
    throw Error("this model is pre-LayerNorm (model.norm: pre); Hugging Face's RoFormer, BERT and DeBERTa are "
                "post-LayerNorm only, so an export would load there and compute something else. Export is refused; "
                "keep using `roformer eval` and `fill-mask` for this model");
  if (m.attention != config::Attention::kSoftmax)
    throw Error("this model uses linear attention (model.attention: linear), which Hugging Face's RoFormer and BERT "
                "do not have; export is refused");
  if (m.position == config::Position::kNone)
    throw Error("this model uses model.position: none; Hugging Face's RoFormer has rotary positions, its BERT "
                "learned absolute ones and its DeBERTa relative ones, none runs without positions, so export is "
                "refused");
  if (m.position == config::Position::kDisentangled) return deberta_target(m, embedding_size);
  if (m.position == config::Position::kAbsolute) {
    if (embedding_size != m.hidden_size)
      throw Error(fmt::format("this model has learned absolute positions and a factorized embedding "
                              "(model.embedding_size {} != model.hidden_size {}); Hugging Face's BERT has no "
                              "embedding projection, so export is refused", embedding_size, m.hidden_size));
    return {model::HfFamily::kBert, "BertForMaskedLM", "bert", "BERT",
            "A BERT encoder (learned absolute position embeddings; `model.position: absolute`)"};
  }
  if (m.rotary_base != 10000.0)
    throw Error(fmt::format("this model uses model.rotary_base {}; Hugging Face's RoFormer hard-codes 10000, so "
                            "export is refused", m.rotary_base));
  return {model::HfFamily::kRoFormer, "RoFormerForMaskedLM", "roformer", "RoFormer",
          "A RoFormer encoder (rotary position embeddings)"};
}

// The model card's text; model_card fills the {names}.
const char* const kCard = R"md(---
library_name: transformers
pipeline_tag: fill-mask
tags: [{model_type}, fill-mask]
---

# {name} masked language model

{description} pretrained with masked language modelling by
`roformer`, exported with `roformer export --format hf` from `{dir}`.

## Load it

```python
from transformers import AutoTokenizer, {architecture}
tokenizer = AutoTokenizer.from_pretrained("{out}")
model = {architecture}.from_pretrained("{out}")
```

or `pipeline("fill-mask", model="{out}")("The [MASK] of the city.")`. The tokenizer
(`tokenizer.json`) is the SentencePiece model `spiece.model` converted for Hugging Face
`tokenizers`: it needs no package beyond `transformers`. To continue pretraining on your own text:
`roformer train -c CONFIG --init-from {out}`.

## Training

| | |
|---|---|
| steps | {steps} |
| tokens seen | {tokens} |
| training files | {train} |
| validation MLM accuracy (last evaluation) | {accuracy} |
| model | {layers} layers, hidden {hidden}, {heads} heads, feed-forward {ffn}, embedding {emb}, {params} parameters |
| tokenizer | SentencePiece {tok_type}, {vocab} pieces; [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 |
| masking | {mask_prob} of the tokens{wwm} |

## Config

The resolved `roformer` config of the run:

```yaml
{yaml}```
)md";

// README.md: what was trained, how far, how well, and the lines that load it.
std::string model_card(const checkpoint::LoadedCheckpoint& ck, const HfTarget& target, const std::string& out_dir,
                       const nlohmann::json& tokenizer) {
  const auto& c = ck.config;
  const auto& m = ck.model->options().model();
  const auto eval = train::last_metrics_record((fs::path(ck.dir) / files::kMetrics).string(), "eval");
  const std::string accuracy =
      eval.is_null() ? "not measured (the run had no validation data)"
                     : fmt::format("**{:.4f}** (top-5 {:.4f}, loss {:.4f}, perplexity {:.2f}) at step {}, on {} masked "
                                   "tokens of {}", eval.value("accuracy", 0.0), eval.value("top5_accuracy", 0.0),
                                   eval.value("loss", 0.0), eval.value("perplexity", 0.0), eval.value("step", 0),
                                   eval.value("n_predicted", 0), join(c.data.valid_files));
  return fmt::format(
      fmt::runtime(kCard), fmt::arg("model_type", target.model_type), fmt::arg("name", target.name),
      fmt::arg("description", target.description), fmt::arg("architecture", target.architecture),
      fmt::arg("dir", ck.dir), fmt::arg("out", out_dir), fmt::arg("steps", ck.state.step),
      fmt::arg("tokens", ck.state.tokens_seen), fmt::arg("train", join(c.data.train_files)),
      fmt::arg("accuracy", accuracy), fmt::arg("layers", m.num_layers), fmt::arg("hidden", m.hidden_size),
      fmt::arg("heads", m.num_heads), fmt::arg("ffn", m.intermediate_size),
      fmt::arg("emb", ck.model->options().embedding_size()),
      fmt::arg("params", ck.model->num_parameters()), fmt::arg("tok_type", tokenizer["model"]["type"].get<std::string>()),
      fmt::arg("vocab", m.vocab_size), fmt::arg("mask_prob", c.masking.mask_prob),
      fmt::arg("wwm", c.masking.whole_word ? ", whole words" : ""), fmt::arg("yaml", config::to_yaml(c)));
}
// config.json's DebertaV2Config settings of disentangled attention: relative attention over the
// shared, LayerNorm'd relative table (norm_rel_ebd), the legacy MLM head (ours: dense, act,
// LayerNorm, tied decoder).
void add_deberta_settings(nlohmann::json& config, const config::ModelConfig& m) {
  nlohmann::json terms = nlohmann::json::array();
  if (m.pos_att_type != config::RelativeTerms::kP2C) terms.push_back("c2p");
  if (m.pos_att_type != config::RelativeTerms::kC2P) terms.push_back("p2c");
  config["type_vocab_size"] = m.type_vocab_size;  // DebertaV2 runs without token types (0), as v3 does
  config["relative_attention"] = true;
  config["position_buckets"] = m.position_buckets;  // 0: exact distances (HF: buckets only when > 0)
  config["max_relative_positions"] = config::effective_max_relative_positions(m);
  config["pos_att_type"] = terms;
  config["share_att_key"] = m.share_att_key;
  config["position_biased_input"] = m.position_biased_input;
  config["norm_rel_ebd"] = "layer_norm";
  config["legacy"] = true;
}

// config.json: RoFormerConfig (BertConfig for absolute positions, DebertaV2Config for disentangled
// attention) of the model.
nlohmann::json hf_config(const model::RoFormerOptions& o, const HfTarget& target) {
  const auto& m = o.model();
  nlohmann::json config = {
      {"architectures", {target.architecture}},
      {"model_type", target.model_type},
      {"vocab_size", m.vocab_size},
      {"hidden_size", m.hidden_size},
      {"num_hidden_layers", m.num_layers},
      {"num_attention_heads", m.num_heads},
      {"intermediate_size", m.intermediate_size},
      {"hidden_act", hf_activation(m.hidden_act)},
      {"hidden_dropout_prob", m.hidden_dropout},
      {"attention_probs_dropout_prob", m.attention_dropout},
      {"max_position_embeddings", m.max_position_embeddings},
      {"type_vocab_size", std::max<int64_t>(1, m.type_vocab_size)},
      {"initializer_range", m.initializer_range},
      {"layer_norm_eps", m.layer_norm_eps},
      {"pad_token_id", o.pad_token_id()},
      {"tie_word_embeddings", true}};
  switch (target.family) {
    case model::HfFamily::kRoFormer:
      config["embedding_size"] = o.embedding_size();
      config["rotary_value"] = m.rotary_value;
      config["use_cache"] = false;
      break;
    case model::HfFamily::kBert:
      config["position_embedding_type"] = "absolute";
      config["use_cache"] = false;
      break;
    case model::HfFamily::kDebertaV2: add_deberta_settings(config, m); break;
  }
  return config;
}

// model.safetensors: the tensors under the target's names (model/hf_names.h). save_pretrained
// stores each tied tensor once; from_pretrained re-ties the aliases.
std::vector<std::pair<std::string, torch::Tensor>> hf_tensors(const model::RoFormerForMaskedLMImpl& model,
                                                              const HfTarget& target) {
  auto tensors = model.hf_named_parameters();
  if (model.options().model().type_vocab_size == 0 && target.family != model::HfFamily::kDebertaV2) {
    // No token types: Hugging Face's RoFormer and BERT always have the table, so write one all-zero
    // row (adds nothing).
    tensors.emplace_back("roformer.embeddings.token_type_embeddings.weight",
                         torch::zeros({1, model.options().embedding_size()}));
  }
  std::vector<std::pair<std::string, torch::Tensor>> unique;
  for (auto& [name, t] : tensors) {
    if (name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias") continue;
    unique.emplace_back(model::to_hf_name(name, target.family), t.detach().contiguous());
  }
  return unique;
}

}  // namespace

void export_hf(const std::string& checkpoint, const std::string& out_dir, bool force) {
  check_export_dir(out_dir, force);
  auto ck = checkpoint::load_checkpoint(checkpoint, torch::Device(torch::kCPU));
  const auto target = hf_target(ck.config.model, ck.model->options().embedding_size());
  const auto& m = ck.model->options().model();
  HfTokenizerOptions tok_options;
  tok_options.model_max_length = m.max_position_embeddings;
  tok_options.type_vocab_size = std::max<int64_t>(1, m.type_vocab_size);
  // Built before anything is written: a tokenizer that cannot be converted refuses the export.
  const auto tokenizer = hf_tokenizer_json(ck.tokenizer->model_path(), tok_options);
  const std::string spiece = ck.tokenizer_model;  // the checkpoint may be pruned meanwhile
  const nlohmann::json config = hf_config(ck.model->options(), target);
  const auto unique = hf_tensors(*ck.model, target);

  // Every file is written into a staging folder inside out_dir and renamed into place only when all
  // are complete (core/publish.h): a failed or interrupted export (a full disk, a stop signal) leaves
  // no partial export, and an earlier export replaced with --force stays whole until then; its
  // config.json, which makes a folder loadable, goes first and comes back last. A folder the export
  // created is removed on failure.
  std::error_code ec;
  const bool created = !fs::exists(out_dir, ec);
  fs::create_directories(out_dir, ec);
  if (ec) throw Error(fmt::format("cannot create '{}': {}", out_dir, ec.message()));
  try {
    core::StagingDir staging(out_dir, ".export-staging-");
    core::save_safetensors((staging / "model.safetensors").string(), unique, {{"format", "pt"}});
    core::write_file_checked((staging / "spiece.model").string(), spiece);
    // What `train --init-from` checks the export against: a spiece.model swapped afterwards is refused.
    const nlohmann::json record = {{"format", "roformer-export"},
                                   {"checkpoint", core::utf8_or_escaped(ck.dir)},
                                   {"step", ck.state.step},
                                   {"tokenizer_fingerprint", ck.tokenizer->fingerprint()}};
    core::write_file_checked((staging / train::kExportRecordFile).string(), record.dump(2) + "\n");
    write_hf_tokenizer(tokenizer, staging.path().string(), tok_options);
    core::write_file_checked((staging / "README.md").string(), model_card(ck, target, out_dir, tokenizer));
    core::write_file_checked((staging / "config.json").string(), config.dump(2) + "\n");
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(staging.path()))
      if (entry.path().filename() != "config.json") names.push_back(entry.path().filename().string());
    names.push_back("config.json");
    staging.publish({fs::path(out_dir) / "config.json"}, names);
  } catch (...) {
    std::error_code cleanup;
    if (created) fs::remove(out_dir, cleanup);  // only if empty: nothing of anyone else's is removed
    throw;
  }
  spdlog::info("exported {} (step {}) as {} to {}: config.json, model.safetensors ({} tensors), spiece.model, "
               "tokenizer.json ({} pieces, {}), tokenizer_config.json, special_tokens_map.json, README.md, {}", ck.dir,
               ck.state.step, target.architecture, out_dir, unique.size(), m.vocab_size,
               tokenizer["model"]["type"].get<std::string>(), train::kExportRecordFile);
}

}  // namespace roformer::tools
