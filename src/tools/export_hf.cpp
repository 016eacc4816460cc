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
#include "core/json_read.h"
#include "core/safetensors.h"
#include "core/utf8.h"
#include "checkpoint/loader.h"
#include "hf/family.h"
#include "model/tensor_names.h"
#include "tools/hf_tokenizer.h"
#include "checkpoint/store.h"
#include "metrics/jsonl.h"
#include "metrics/records.h"
#include "checkpoint/files.h"
#include "checkpoint/run_layout.h"

namespace roformer::tools {
namespace files = checkpoint::files;
namespace fs = std::filesystem;

namespace {
// A checkpoint (its manifest or trainer state), a run's checkpoints/ folder, or any folder inside it.
bool is_training_state(const fs::path& dir) {
  using checkpoint::kCheckpointsDir, checkpoint::kLatestFile;
  if (fs::exists(dir / files::kManifest) || fs::exists(dir / files::kTrainerState) || fs::exists(dir / kLatestFile))
    return true;
  for (fs::path p = fs::weakly_canonical(dir); !p.empty() && p != p.root_path(); p = p.parent_path())
    if (p.filename() == kCheckpointsDir && fs::exists(p / kLatestFile)) return true;
  return false;
}

// Checked before the checkpoint is loaded, so a refused export costs nothing.
void check_export_dir(const std::string& out_dir, bool force) {
  const fs::path out(out_dir);
  std::error_code ec;
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

// Files as a model card names them: their names only (a path of the training machine, relative to
// where the run started, means nothing on a Hub page; the config section keeps the paths).
std::string join_names(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const auto& p : paths) names.push_back(fs::path(p).filename().string());
  return join(names);
}

std::string percent(double fraction) { return fmt::format("{:g}%", 100.0 * fraction); }

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

or `pipeline("fill-mask", model="{out}")("The {mask} of the city.")`. {tokenizer_note} To continue
pretraining on your own text: `roformer train -c CONFIG --init-from {out}`.

## Training

| | |
|---|---|
| steps | {steps} |
| tokens seen | {tokens} |
| training files | {train} |
| training masked | {mask_pct} of the tokens{wwm} |
| validation MLM accuracy (last evaluation, {eval_mask_pct} of the tokens masked) | {accuracy} |
| model | {layers} layers, hidden {hidden}, {heads} heads, feed-forward {ffn}, embedding {emb}, {params} parameters |
| tokenizer | {tok_type}, {vocab} ids; special tokens {specials} |

## Config

The resolved `roformer` config of the run (file paths as the run was given them, on the machine
it trained on):

```yaml
{yaml}```
)md";

// README.md: what was trained, how far, how well, and the lines that load it.
std::string model_card(const checkpoint::LoadedCheckpoint& ck, const hf::Family& family, const std::string& out_dir,
                       bool converted) {
  const auto& c = ck.config;
  const auto& m = ck.model->options().model();
  // The config as the model has it: vocab_size 0 (the tokenizer's) and embedding_size 0 (the hidden
  // size) resolved.
  config::Config resolved = c;
  resolved.model.vocab_size = m.vocab_size;
  resolved.model.embedding_size = ck.model->options().embedding_size();
  const std::string metrics = (fs::path(ck.dir) / files::kMetrics).string();
  const auto record = metrics::last_metrics_record(metrics, metrics::EvalRecord::kType);
  std::string accuracy = "not measured (the run had no validation data)";
  if (!record.is_null()) {
    const metrics::EvalRecord eval = metrics::eval_record_from(core::JsonReader(
        record, metrics + " (its last \"eval\" record)", "fix or remove that line (it was edited by hand?)"));
    accuracy = fmt::format("**{:.4f}** (top-5 {:.4f}, loss {:.4f}, perplexity {:.2f}) at step {}, on {} masked tokens "
                           "of {}", eval.accuracy, eval.top5_accuracy, eval.loss, eval.perplexity, eval.step,
                           eval.n_predicted, join_names(c.data.valid_files));
  }
  return fmt::format(
      fmt::runtime(kCard), fmt::arg("model_type", family.model_type()), fmt::arg("name", family.title()),
      fmt::arg("description", family.description()), fmt::arg("architecture", family.architecture()),
      fmt::arg("dir", ck.dir), fmt::arg("out", out_dir), fmt::arg("steps", ck.state.step),
      fmt::arg("tokens", ck.state.tokens_seen), fmt::arg("train", join_names(c.data.train_files)),
      fmt::arg("accuracy", accuracy), fmt::arg("layers", m.num_layers), fmt::arg("hidden", m.hidden_size),
      fmt::arg("heads", m.num_heads), fmt::arg("ffn", m.intermediate_size),
      fmt::arg("emb", ck.model->options().embedding_size()),
      fmt::arg("params", ck.model->num_parameters()), fmt::arg("tok_type", ck.tokenizer->description()),
      fmt::arg("vocab", m.vocab_size), fmt::arg("specials", ck.tokenizer->special_tokens().describe()),
      fmt::arg("mask", ck.tokenizer->id_to_piece(ck.tokenizer->special_tokens().mask)),
      fmt::arg("tokenizer_note", converted ? "The tokenizer (`tokenizer.json`) is the SentencePiece model `spiece.model` "
                                             "converted for Hugging Face `tokenizers`: it needs no package beyond "
                                             "`transformers`."
                                           : "The tokenizer (`tokenizer.json`) is the one the model was trained with."),
      fmt::arg("mask_pct", percent(c.masking.mask_prob)), fmt::arg("eval_mask_pct", percent(c.eval.mask_prob)),
      fmt::arg("wwm", c.masking.whole_word ? ", whole words" : ""), fmt::arg("yaml", config::to_yaml(resolved)));
}
// model.safetensors: the tensors under the family's names, in its layout. save_pretrained stores
// each tied tensor once; from_pretrained re-ties the aliases.
std::vector<std::pair<std::string, torch::Tensor>> hf_tensors(const model::RoFormerForMaskedLMImpl& model,
                                                              const hf::Family& family) {
  // A model without biases (model.bias false) is written with zero ones where the family always has them.
  auto tensors = family.biases_always() ? model.with_zero_biases(model.hf_named_parameters())
                                        : model.hf_named_parameters();
  if (model.options().model().type_vocab_size == 0 && family.token_types_always()) {
    // No token types: the family always has the table, so write one all-zero row (adds nothing).
    tensors.emplace_back(model::names::kTokenTypeEmbeddings,
                         torch::zeros({1, model.options().embedding_size()}));
  }
  hf::NamedTensors unique;
  for (auto& [name, t] : tensors) {
    if (name == model::names::kDecoderWeight || name == model::names::kDecoderBias) continue;  // tied aliases
    unique.emplace_back(name, t.detach());
  }
  auto out = family.to_hf(unique, model.options().model());
  for (auto& [name, t] : out) t = t.contiguous();
  return out;
}

}  // namespace

void export_hf(const std::string& checkpoint, const std::string& out_dir, bool force) {
  if (fs::exists(out_dir) && !fs::is_directory(out_dir))
    throw Error(fmt::format("--out {} exists and is not a directory; choose a new directory", out_dir));
  const core::OutputDirClaim claim(out_dir, "--out");  // one export into it at a time
  check_export_dir(out_dir, force);
  auto ck = checkpoint::load_checkpoint(checkpoint, torch::Device(torch::kCPU));
  const hf::Family& family = hf::export_family(ck.model->options());
  const auto& m = ck.model->options().model();
  HfTokenizerOptions tok_options;
  tok_options.model_max_length = m.max_position_embeddings;
  tok_options.type_vocab_size = std::max<int64_t>(1, m.type_vocab_size);
  // Built before anything is written: a tokenizer that cannot be converted refuses the export. A
  // SentencePiece tokenizer is converted (and written as spiece.model too); a tokenizer.json is
  // written as it is. The bytes are the loaded tokenizer's: the checkpoint may be pruned meanwhile.
  const auto tokenizer_files = ck.tokenizer->files();
  const bool converted = tokenizer_files.front().first == data::kTokenizerModelFile;
  const std::string tokenizer = converted ? hf_tokenizer_json(ck.tokenizer->model_path(), tok_options).dump(2) + "\n"
                                          : tokenizer_files.front().second;
  const nlohmann::json config = hf::config_json(family, ck.model->options());
  const auto unique = hf_tensors(*ck.model, family);

  // Every file is written into a staging folder inside out_dir and renamed into place only when all
  // are complete (core/publish.h): a failed or interrupted export (a full disk, a stop signal) leaves
  // no partial export, and an earlier export replaced with --force stays whole until then; its
  // config.json, which makes a folder loadable, goes first and comes back last. A folder the export
  // created is removed on failure (the claim).
  {
    core::StagingDir staging(out_dir, ".export-staging-");
    core::save_safetensors((staging / "model.safetensors").string(), unique, {{"format", "pt"}});
    if (converted) core::write_file_checked((staging / "spiece.model").string(), tokenizer_files.front().second);
    // What `train --init-from` checks the export against: the tokenizer file it reads (spiece.model,
    // or a tokenizer.json as it came), missing or swapped afterwards, is refused.
    const nlohmann::json record = {{"format", "roformer-export"},
                                   {"checkpoint", core::utf8_or_escaped(ck.dir)},
                                   {"step", ck.state.step},
                                   {"tokenizer_file", converted ? "spiece.model" : data::kTokenizerJsonFile},
                                   {"tokenizer_fingerprint", ck.tokenizer->fingerprint()}};
    core::write_file_checked((staging / checkpoint::kExportRecordFile).string(), record.dump(2) + "\n");
    write_hf_tokenizer(tokenizer, *ck.tokenizer, staging.path().string(), tok_options);
    core::write_file_checked((staging / "README.md").string(), model_card(ck, family, out_dir, converted));
    core::write_file_checked((staging / "config.json").string(), config.dump(2) + "\n");
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(staging.path()))
      if (entry.path().filename() != "config.json") names.push_back(entry.path().filename().string());
    names.push_back("config.json");
    staging.publish({fs::path(out_dir) / "config.json"}, names);
  }
  spdlog::info("exported {} (step {}) as {} to {}: config.json, model.safetensors ({} tensors), {}tokenizer.json ({} "
               "ids, {}), tokenizer_config.json, special_tokens_map.json, README.md, {}", ck.dir, ck.state.step,
               family.architecture(), out_dir, unique.size(), converted ? "spiece.model, " : "", m.vocab_size,
               ck.tokenizer->description(), checkpoint::kExportRecordFile);
}

}  // namespace roformer::tools
