// --init-from: finding the source, checking the config against its architecture, taking its
// tokenizer and loading its weights (see init_from.h).
#include "train/init_from.h"

#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/file.h"
#include "core/json_read.h"
#include "core/safetensors.h"
#include "data/tokenizer.h"
#include "hf/family.h"
#include "model/init_change.h"
#include "model/position.h"
#include "model/roformer.h"
#include "model/tensor_names.h"
#include "checkpoint/store.h"
#include "checkpoint/files.h"
#include "checkpoint/run_layout.h"
#include "checkpoint/meta.h"

namespace roformer::train {
namespace files = checkpoint::files;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kExportKind = "Hugging Face export";
constexpr const char* kTokenTypes = model::names::kTokenTypeEmbeddings;
constexpr std::string_view kPositionTable = "embeddings.position_embeddings.weight";  // absolute.cpp's table
constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kShardIndexFile = "model.safetensors.index.json";  // sharded weights: name -> shard

// The command that rewrites a Hugging Face directory as --init-from reads it (model.safetensors and a
// tokenizer.json), with transformers, into DIR-safetensors.
std::string conversion_command(const fs::path& dir) {
  std::string d = dir.string();
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return fmt::format("python -c \"import sys; from transformers import AutoModelForMaskedLM as M, AutoTokenizer as T; "
                     "[c.from_pretrained(sys.argv[1]).save_pretrained(sys.argv[2]) for c in (M, T)]\" '{}' '{}-safetensors'",
                     d, d);
}

// The weight files of `path`: model.safetensors itself (no names: all of its tensors), or each shard
// that model.safetensors.index.json names, with the tensors the index puts there; a shard missing
// from `dir` is an error.
std::map<std::string, std::vector<std::string>> weight_files(const std::string& path, const std::string& dir) {
  if (fs::path(path).filename() != kShardIndexFile) return {{path, {}}};
  const std::string origin = "--init-from: " + path, advice = "download the model again";
  const json index = core::parse_json(core::read_file(path, "shard index"), origin, advice);
  const core::JsonReader reader(index, origin, advice);
  const auto map = reader.object("weight_map");
  std::map<std::string, std::vector<std::string>> by_shard;  // shard path -> the tensors it holds
  for (const auto& [name, shard] : index.at("weight_map").items()) {
    if (!shard.is_string()) map.wrong(name, "the name of a shard file (a string)");
    const std::string shard_name = shard.get<std::string>();
    if (fs::path(shard_name).filename().string() != shard_name)
      map.wrong(name, "a shard file name next to the index (no folders)");
    const fs::path shard_path = fs::path(dir) / shard_name;
    std::error_code ec;
    if (!fs::exists(shard_path, ec))
      throw Error(fmt::format("--init-from: {} names the shard {}, which {} does not have; download the model again "
                              "(every shard the index names)", path, shard_name, dir));
    by_shard[shard_path.string()].push_back(name);
  }
  if (by_shard.empty()) reader.wrong("weight_map", "the tensors' shard files (an object, not empty)");
  return by_shard;
}

[[noreturn]] void not_in_shard(const std::string& index, const std::string& name, const std::string& shard) {
  throw Error(fmt::format("--init-from: {} puts tensor {} in {}, which does not hold it; the shards and their index do "
                          "not match: download the model again", index, name, shard));
}

// Every weight file's header checked as loading checks it, and every tensor the index names found in
// its shard, without reading the data: a damaged or lying file is refused before anything is written.
void check_weights(const std::string& path, const std::string& dir) {
  for (const auto& [file, names] : weight_files(path, dir)) {
    const auto shapes = core::safetensors_shapes(file);
    for (const auto& name : names)
      if (!shapes.count(name)) not_in_shard(path, name, file);
  }
}

// The tensors of model.safetensors, or of every shard that model.safetensors.index.json names (each
// tensor from the shard the index says).
std::map<std::string, torch::Tensor> load_weights(const std::string& path, const std::string& dir) {
  const auto files = weight_files(path, dir);
  if (files.begin()->second.empty()) return core::load_safetensors(path);  // one file, all of it
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& [file, names] : files) {
    auto loaded = core::load_safetensors(file);
    for (const auto& name : names) {
      auto it = loaded.find(name);
      if (it == loaded.end()) not_in_shard(path, name, file);
      tensors.emplace(name, std::move(it->second));
    }
  }
  return tensors;
}

// The export's tokenizer must be the one it was exported with (its record, from exports that
// write one): weights used with another tokenizer read other words for every id. The record names
// the file (from 2026-11-28 on): that one is read, and its absence is said as such.
void check_export_tokenizer(InitSource& s) {
  const fs::path record_path = fs::path(s.dir) / checkpoint::kExportRecordFile;
  std::error_code ec;
  if (!fs::exists(record_path, ec)) return;  // an export written before the record existed
  const std::string origin = "--init-from: " + record_path.string(), advice = "export the checkpoint again";
  const json record = core::parse_json(core::read_file(record_path.string(), "export record"), origin, advice);
  const core::JsonReader reader(record, origin, advice);
  if (record.contains("tokenizer_file")) {
    const std::string name = reader.string("tokenizer_file");
    const fs::path file = fs::path(s.dir) / fs::path(name).filename();
    if (!fs::exists(file, ec))
      throw Error(fmt::format("--init-from: {} has no {}, the {} `roformer export` writes next to the weights (its {} "
                              "names it); the weights are only usable with the tokenizer they were trained with: put "
                              "it back, or export the checkpoint again", s.dir, name,
                              name == "spiece.model" ? "SentencePiece model" : "tokenizer",
                              checkpoint::kExportRecordFile));
    s.tokenizer_model = file.string();
  }
  const std::string recorded = reader.string("tokenizer_fingerprint");
  const std::string actual = data::Tokenizer::load(s.tokenizer_model).fingerprint();
  if (actual != recorded)
    throw Error(fmt::format("--init-from: {} is not the tokenizer these weights were exported with (fingerprint {}, "
                            "the export's record says {}): the weights only make sense with theirs; put the exported "
                            "{} back, or export the checkpoint again", s.tokenizer_model, actual, recorded,
                            fs::path(s.tokenizer_model).filename().string()));
}

InitSource export_source(const fs::path& dir) {
  InitSource s;
  s.dir = dir.string();
  s.kind = kExportKind;
  s.weights = (dir / kWeightsFile).string();
  if (!fs::exists(s.weights)) s.weights = (dir / kShardIndexFile).string();  // sharded (find_init_source)
  // A SentencePiece tokenizer is exported as spiece.model (and its tokenizer.json conversion), a
  // tokenizer.json one as tokenizer.json.
  s.tokenizer_model = (dir / "spiece.model").string();
  if (!fs::exists(s.tokenizer_model)) s.tokenizer_model = (dir / data::kTokenizerJsonFile).string();
  if (!fs::exists(s.tokenizer_model))
    throw Error(fmt::format("--init-from: {} has no tokenizer.json (or spiece.model), the tokenizer the weights were "
                            "trained with; a released model's tokenizer in other files (spm.model, vocab.txt, "
                            "merges.txt) is written as tokenizer.json by transformers: {}", s.dir,
                            conversion_command(dir)));
  const std::string file = (dir / "config.json").string();
  const json config = core::parse_json(core::read_file(file, "config.json"), "--init-from: " + file,
                                       "download the model or export the checkpoint again");
  const auto exported = hf::read_config_json(config, file);
  s.family = exported.family;
  s.architecture = exported.model;
  s.vocab_size = s.architecture.vocab_size;
  check_export_tokenizer(s);
  const auto pieces = data::Tokenizer::load(s.tokenizer_model).vocab_size();
  if (pieces > s.vocab_size)
    throw Error(fmt::format("--init-from: {} says vocab_size {} but its {} has {} ids; ids from {} on would read no "
                            "embedding row: put back the tokenizer the model came with (or export the checkpoint "
                            "again)", file, s.vocab_size, fs::path(s.tokenizer_model).filename().string(), pieces,
                            s.vocab_size));
  // Released models may pad the embedding beyond the tokenizer's ids (DeBERTa-v3: 128,100 rows for
  // 128,001 ids). No id reads those rows: the run's model has the tokenizer's, and load_init_weights
  // leaves the others out, saying so.
  s.vocab_size = pieces;
  s.architecture.vocab_size = pieces;
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
  s.tokenizer_model = data::Tokenizer::load(s.dir).model_path();
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
  if (fs::exists(dir / "config.json")) {
    if (fs::exists(dir / kWeightsFile) || fs::exists(dir / kShardIndexFile)) return export_source(dir);
    for (const char* pickle : {"pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack"})
      if (fs::exists(dir / pickle))
        throw Error(fmt::format("--init-from: {} holds its weights as {}, which roformer does not read (only "
                                "safetensors: a pickle can run code); convert the directory with transformers: {}",
                                path, pickle, conversion_command(dir)));
  }
  return checkpoint_source(path);
}

namespace {

// Context extension: `key` differs from the weights (`ours` the config's value, `theirs` the weights'),
// and the position scheme computes it (taken, recorded in `source`), grows a learned table by copying
// rows (taken with `copy`), or has it laid out in what it learned. True when taken; false when the key
// is not the scheme's to change; throws for a change of the scheme's that needs another setting.
bool take_position_change(InitSource& source, const config::Config& config, const std::string& key,
                          const std::string& ours, const std::string& theirs, bool copy) {
  const model::InitChange how = model::init_change(config.model, key);
  if (how == model::InitChange::kComputed) {
    source.extended.push_back(fmt::format("{} {} -> {}", key, theirs, ours));
    return true;
  }
  if (how != model::InitChange::kCopiedRows) {
    if (key != "model.max_position_embeddings") return false;
    throw Error(fmt::format("--init-from {}: model.max_position_embeddings is {} in the config but the weights were "
                            "trained with {}; its model.position ({}) lays out what it learned for it: set "
                            "model.max_position_embeddings: {} (eval --seq-len runs longer sequences with what was "
                            "trained)", source.dir, ours, theirs, config::to_string(config.model.position), theirs));
  }
  const int64_t rows = source.architecture.max_position_embeddings;
  if (config.model.max_position_embeddings > rows && copy) {
    source.extended.push_back(fmt::format("{} {} -> {} (the learned table's new rows copied from its {} trained rows: "
                                          "row i takes row i mod {})", key, theirs, ours, rows, rows));
    source.copied_position_rows = rows;
    return true;
  }
  throw Error(fmt::format("--init-from {}: {} is {} in the config but the weights' learned position table has {} rows; "
                          "{}", source.dir, key, ours, theirs,
                          config.model.max_position_embeddings > rows
                              ? "to extend the context, add --extend-positions (the new rows start as copies of the "
                                "trained ones, then train at the new length), or set " + key + ": " + theirs
                              : "a learned table is not cut: set " + key + ": " + theirs +
                                    " (shorter sequences need no change)"));
}

}  // namespace

void check_init_architecture(InitSource& source, const config::Config& config, bool copy_positions) {
  // A source recording a model that cannot be (0 layers, a head size that does not divide): its
  // values are no advice for the config.
  try {
    model::validate_model_config(source.architecture);
  } catch (const Error& e) {
    throw Error(fmt::format("--init-from {}: the model it records is not a valid one ({}); the {} is damaged or was "
                            "edited: start from another export or checkpoint", source.dir, e.what(), source.kind));
  }
  // The model sections compared key by key (config::diff, in the table's order), except what a new
  // run chooses for itself: dropout, the initializer, recomputation, and the vocabulary (below).
  const std::set<std::string> new_runs_choice = {"model.vocab_size", "model.hidden_dropout", "model.attention_dropout",
                                                 "model.initializer_range", "model.gradient_checkpointing"};
  config::Config ours, theirs;
  ours.model = model::with_effective_sizes(config.model);  // a 0 that means another key's value
  theirs.model = model::with_effective_sizes(source.architecture);
  source.extended.clear();
  source.copied_position_rows = 0;
  const bool same_scheme = config.model.position == source.architecture.position;  // else model.position differs
  for (const auto& change : config::diff(ours, theirs)) {
    const auto& [key, a, b] = change;
    if (new_runs_choice.count(key)) continue;
    if (same_scheme && take_position_change(source, config, key, a, b, copy_positions)) continue;
    // An export of a model without token types holds one all-zero row (Hugging Face always has the
    // table); load_init_weights checks that it is zero.
    if (key == "model.type_vocab_size" && source.kind == kExportKind && a == "0" && b == "1") continue;
    throw Error(fmt::format("--init-from {}: {} is {} in the config but the weights were trained with {}; set {}: {} "
                            "(the architecture comes with the weights)", source.dir, key, a, b, key, b));
  }
  // A damaged or lying weight file (a header whose shapes do not match its bytes, a shard the index
  // names missing) is refused here, not after the run directory is made: headers only, the data is
  // read once, by load_init_weights.
  if (source.kind == kExportKind) check_weights(source.weights, source.dir);
  const int64_t vocab = config.model.vocab_size;
  if (vocab != 0 && vocab != source.vocab_size)
    throw Error(fmt::format("--init-from {}: model.vocab_size is {} in the config but the weights have {} rows; set "
                            "model.vocab_size: 0 (taken from the tokenizer that comes with the weights)",
                            source.dir, vocab, source.vocab_size));
}

std::string adopt_init_tokenizer(const InitSource& source, const config::Config& config, const std::string& run_dir) {
  const data::Tokenizer theirs = data::Tokenizer::load(source.tokenizer_model);
  if (!config.tokenizer.model.empty() && data::Tokenizer::load(config.tokenizer.model).fingerprint() != theirs.fingerprint())
    throw Error(fmt::format("tokenizer.model is {} but --init-from {} comes with another tokenizer ({}); the weights "
                            "only make sense with theirs: remove tokenizer.model from the config",
                            config.tokenizer.model, source.dir, source.tokenizer_model));
  const fs::path dir = checkpoint::RunLayout(run_dir).tokenizer_dir();
  const fs::path path = dir / theirs.files().front().first;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (data::Tokenizer::load(path.string()).fingerprint() != theirs.fingerprint())
      throw Error(fmt::format("{} already holds another tokenizer (from an earlier run in {}); start the run from "
                              "--init-from in a new --run-dir", path.string(), run_dir));
    return path.string();
  }
  try {
    return theirs.save(dir.string());
  } catch (const Error& e) {
    throw Error(fmt::format("cannot copy the tokenizer of --init-from to {}: {}", dir.string(), e.what()));
  }
}

namespace {

// Context extension (check_init_architecture) applied to the loaded tensors. The buffers (the rotary
// sin/cos table) are computed from the config, whose base or length now differs from the weights':
// the model's own stand (the loader takes them as optional). A learned absolute table copy-extended:
// row i of the new table is row i mod N of the N trained, so every new row starts as a known position.
void extend_positions(const InitSource& source, const model::RoFormerForMaskedLMImpl& model,
                      std::map<std::string, torch::Tensor>& tensors) {
  if (source.extended.empty()) return;
  for (const auto& buffer : model.named_buffers(/*recurse=*/true)) tensors.erase(buffer.key());
  if (source.copied_position_rows == 0) return;
  const int64_t rows = model.options().model().max_position_embeddings;
  for (auto& [name, t] : tensors)
    if (name.size() >= kPositionTable.size() &&
        name.compare(name.size() - kPositionTable.size(), kPositionTable.size(), kPositionTable) == 0 &&
        t.dim() == 2 && t.size(0) == source.copied_position_rows)
      t = t.repeat({(rows + t.size(0) - 1) / t.size(0), 1}).narrow(0, 0, rows).contiguous();
}

// The parts of a released checkpoint that masked-language-model training does not compute
// (hf::Family::unused_parts: BertForPreTraining's pooler and next-sentence head): left out, said once.
void drop_unused_parts(const InitSource& source, std::map<std::string, torch::Tensor>& tensors) {
  std::vector<std::string> said;
  int64_t dropped = 0;
  for (const auto& [prefix, what] : source.family->unused_parts()) {
    int64_t n = 0;
    for (auto it = tensors.begin(); it != tensors.end();)
      it = it->first.rfind(prefix, 0) == 0 ? (++n, tensors.erase(it)) : std::next(it);
    if (n > 0) said.push_back(fmt::format("{} ({}*)", what, prefix));
    dropped += n;
  }
  if (dropped > 0)
    spdlog::info("--init-from {}: left out {} tensor(s) masked-language-model training does not use: {}", source.dir,
                 dropped, fmt::join(said, ", "));
}

// A released embedding padded beyond the tokenizer's ids (export_source): the rows no id reads, of the
// word embedding and the MLM head's output, left out, said once. The export then writes the ids' rows.
void drop_padded_rows(const InitSource& source, const model::RoFormerForMaskedLMImpl& model,
                      std::map<std::string, torch::Tensor>& tensors) {
  const int64_t ids = model.options().model().vocab_size;
  namespace names = model::names;
  const auto words = tensors.find(names::kWordEmbeddings);
  if (words == tensors.end() || words->second.dim() != 2 || words->second.size(0) <= ids) return;
  const int64_t rows = words->second.size(0);
  for (const char* name : {names::kWordEmbeddings, names::kHeadBias, names::kDecoderWeight, names::kDecoderBias}) {
    auto it = tensors.find(name);
    if (it != tensors.end() && it->second.dim() >= 1 && it->second.size(0) == rows)
      it->second = it->second.narrow(0, 0, ids).contiguous();
  }
  spdlog::info("--init-from {}: its embedding has {} rows for the tokenizer's {} ids (padded, as DeBERTa-v3's releases "
               "are); the {} rows no id reads are left out, and an export writes {}", source.dir, rows, ids,
               rows - ids, ids);
}

// A released checkpoint without an MLM head (DeBERTa-v3's discriminators, a bare encoder): the head a
// new run starts with, initialized as transformers does (model/roformer.cpp init_weights), said once.
// A head that is there in part is loaded as it is, and reported missing.
void start_missing_head(const InitSource& source, const model::RoFormerForMaskedLMImpl& model,
                        std::map<std::string, torch::Tensor>& tensors) {
  using model::names::kDecoder;
  using model::names::kHead;
  for (const auto& [name, t] : tensors)
    if (name.rfind(kHead, 0) == 0) return;
  std::vector<std::string> started;
  for (const auto& [name, t] : model.hf_named_parameters())
    if (name.rfind(kHead, 0) == 0 && name.rfind(kDecoder, 0) != 0) {  // the decoder: tied aliases
      tensors.emplace(name, t.detach().clone());
      started.push_back(name);
    }
  if (started.empty()) return;
  spdlog::info("--init-from {}: the weights carry no masked-language-model head ({}'s released checkpoints may not: "
               "DeBERTa-v3's are replaced-token-detection discriminators); a new one is initialized as transformers "
               "does ({} tensors: {})", source.dir, source.family->title(), started.size(), fmt::join(started, ", "));
}

}  // namespace

void load_init_weights(const InitSource& source, model::RoFormerForMaskedLMImpl& model) {
  auto tensors = load_weights(source.weights, source.dir);
  if (source.family) drop_unused_parts(source, tensors);
  // An export names and lays out the tensors as its Hugging Face family does (bert., deberta. and
  // its *_proj, ModernBERT's Wqkv).
  if (source.family) tensors = source.family->from_hf(std::move(tensors), source.architecture);
  extend_positions(source, model, tensors);
  if (source.family) drop_padded_rows(source, model, tensors);
  if (source.family) start_missing_head(source, model, tensors);
  if (model.options().model().type_vocab_size == 0) {
    auto it = tensors.find(kTokenTypes);
    if (it != tensors.end() && it->second.size(0) == 1 && it->second.count_nonzero().item<int64_t>() == 0)
      tensors.erase(it);  // the all-zero row an export adds for a model without token types
  }
  if (!model.options().model().bias) {
    // The zero biases an export writes for a model without biases (model.bias false): Hugging Face's
    // families always have them. Not zero, they were trained after the export (fine-tuned there).
    std::set<std::string> ours;
    for (const auto& [name, t] : model.hf_named_parameters()) ours.insert(name);
    for (auto it = tensors.begin(); it != tensors.end();) {
      const std::string& name = it->first;
      const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
      if (!bias || ours.count(name)) {
        ++it;
        continue;
      }
      if (it->second.count_nonzero().item<int64_t>() != 0)
        throw Error(fmt::format("--init-from {}: {} is not zero, but the model has no biases (\"{}\": false in its "
                                "config.json, model.bias: false): the weights were changed after the export. To start "
                                "from them with biases, remove \"{}\" from that config.json and set model.bias: true",
                                source.dir, source.family ? source.family->to_hf_name(name) : name, hf::kNoBiasKey,
                                hf::kNoBiasKey));
      it = tensors.erase(it);
    }
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
