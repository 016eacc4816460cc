// The tokenizer, prepared corpora, loader and evaluation batches of a run; see train/training_data.h.
#include "train/training_data.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "checkpoint/run_layout.h"
#include "core/error.h"
#include "core/file.h"
#include "data/prepared_cache.h"
#include "data/tokenizer_cache.h"
#include "train/length_phases.h"
#include "data/sentencepiece_tokenizer.h"

namespace roformer::train {
namespace fs = std::filesystem;

DataSetup DataSetup::of(const Plan& plan) {
  return {&plan.cfg, plan.run_dir, plan.env, plan.resume ? &*plan.resume : nullptr, plan.init ? &*plan.init : nullptr};
}

TrainingData::TrainingData(const DataSetup& setup, bool pin_memory, bool main_rank) {
  const config::Config& cfg = *setup.cfg;
  auto loader_opts = data::loader_options_from_config(cfg, cfg.train.batch_size);
  loader_opts.seed = cfg.train.seed;
  loader_opts.pin_memory = pin_memory;
  load_tokenizer(setup, main_rank);
  loader_opts.rank = setup.env.rank;  // each rank reads its rows of every global batch
  loader_opts.world_size = setup.env.world_size;
  loader_options_ = loader_opts;
  train_corpus_ = prepare(setup, cfg.data.train_files, "train");
  loader_ = std::make_unique<data::MlmLoader>(train_corpus_, loader_opts);
  if (!cfg.data.valid_files.empty()) {
    auto eval_opts = data::eval_loader_options(cfg, cfg.eval.batch_size);
    eval_opts.max_seq_len = eval_seq_len(cfg);  // eval.max_seq_len, or the length training ends with
    eval_opts.max_seq_len_key = cfg.eval.max_seq_len != 0 ? "eval.max_seq_len" : resolve_length_phases(cfg).back().seq_key;
    eval_opts.pin_memory = pin_memory;
    eval_batches_ = data::make_eval_batches(prepare(setup, cfg.data.valid_files, "valid"), eval_opts,
                                            cfg.eval.max_sequences, cfg.eval.batch_size, cfg.eval.seed);
  }
  if (main_rank && !setup.resume && !setup.init && cfg.tokenizer.model.empty()) say_how_to_reuse(setup);
}

// A new run trains its tokenizer (about 10 s on Brown) and prepares its data again, as this one did.
// Not cached behind the user's back: the keys that point a run at existing ones are said instead.
void TrainingData::say_how_to_reuse(const DataSetup& setup) const {
  const config::Config& cfg = *setup.cfg;
  const std::string cache =
      cfg.data.prepared_dir.empty() ? checkpoint::RunLayout(setup.dir).data() : cfg.data.prepared_dir;
  std::string sets = fmt::format("--set tokenizer.model={} --set data.train_files=[{}]", tokenizer_->model_path(),
                                 (fs::path(cache) / "train").string());
  if (!cfg.data.valid_files.empty()) sets += fmt::format(" --set data.valid_files=[{}]", (fs::path(cache) / "valid").string());
  spdlog::info("a new run can reuse this tokenizer and prepared data instead of training and preparing them again: {}",
               sets);
}

void TrainingData::reshape(int64_t max_seq_len, int64_t batch_size, const std::string& seq_key) {
  data::LoaderOptions options = loader_options_;
  options.max_seq_len = max_seq_len;
  options.batch_size = batch_size;
  options.max_seq_len_key = seq_key;
  loader_.reset();  // its workers stop before the next loader's start
  loader_ = std::make_unique<data::MlmLoader>(train_corpus_, options);
}

void TrainingData::save(checkpoint::TrainerState& state) const {
  const data::LoaderState position = loader_->state();
  state.loader_epoch = position.epoch;
  state.loader_position = position.position;
  state.tokenizer_fingerprint = tokenizer_->fingerprint();
}

void TrainingData::restore(const checkpoint::TrainerState& state) {
  data::LoaderState position;
  position.epoch = state.loader_epoch;
  position.position = state.loader_position;
  loader_->restore(position);
}

// The checkpoint carries its tokenizer, and a resumed run continues with exactly that one (copied
// into the run directory); --init-from brings the source's; otherwise tokenizer.model, or the run's own.
void TrainingData::load_tokenizer(const DataSetup& setup, bool main_rank) {
  std::string path;
  if (setup.resume) {
    const std::string& dir = setup.resume->dir;
    const data::Tokenizer saved = data::Tokenizer::load(dir);
    if (saved.fingerprint() != setup.resume->state.tokenizer_fingerprint)
      throw Error(fmt::format("the tokenizer in checkpoint {} does not match its recorded fingerprint; the "
                              "checkpoint is damaged", dir));
    const std::string own_dir = checkpoint::RunLayout(setup.dir).tokenizer_dir();
    path = (fs::path(own_dir) / saved.files().front().first).string();
    try {  // the run directory's copy, kept when it is that tokenizer (a damaged copy is written again)
      std::error_code ec;
      if (fs::exists(path, ec)) tokenizer_ = data::Tokenizer::load(own_dir);
    } catch (const Error&) {
    }
    if (!tokenizer_ || tokenizer_->fingerprint() != saved.fingerprint()) {
      saved.save(own_dir);
      tokenizer_ = data::Tokenizer::load(own_dir);
    }
    return;
  }
  path = setup.init ? adopt_init_tokenizer(*setup.init, *setup.cfg, setup.dir) : setup.cfg->tokenizer.model;
  if (path.empty()) path = train_run_tokenizer(*setup.cfg, setup.dir, main_rank);
  tokenizer_ = data::Tokenizer::load(path);
  tokenizer_->check_mlm_roles();
  spdlog::info("tokenizer {} ({}, {} ids, special {}, fingerprint {})", tokenizer_->model_path(),
               tokenizer_->description(), tokenizer_->vocab_size(), tokenizer_->special_tokens().describe(),
               tokenizer_->fingerprint());
}

// The run's own tokenizer, trained from the config's tokenizer.* settings: one left by an earlier
// run in this directory (failed, or replaced with --overwrite) is reused only when it was trained
// with the very same settings (its training.json), else trained again. Returns its path.
std::string TrainingData::train_run_tokenizer(const config::Config& cfg, const std::string& run_dir, bool main_rank) {
  const checkpoint::RunLayout layout(run_dir);
  const fs::path tok_dir = layout.tokenizer_dir();
  std::string path = layout.tokenizer_model();
  auto tok_options = data::tokenizer_options_from_config(cfg, tok_dir.string());
  tok_options.force = true;
  if (fs::exists(path)) {
    std::string recorded;
    try {
      recorded = core::read_file((tok_dir / data::kTokenizerSettingsFile).string(), "tokenizer settings");
    } catch (const Error&) {
    }
    if (recorded == data::training_settings(tok_options) || !main_rank) return path;  // rank 0 trained it just now
    spdlog::info("the tokenizer left in {} was trained with other tokenizer.* settings (or its record is missing): "
                 "training it again from the config's", tok_dir.string());
  }
  auto inputs = cfg.tokenizer.input.empty() ? cfg.data.train_files : cfg.tokenizer.input;
  if (std::any_of(inputs.begin(), inputs.end(), [](const std::string& f) { return data::is_prepared_dir(f); }))
    throw Error("data.train_files lists prepared directories, so the tokenizer cannot be trained from them: set "
                "tokenizer.model to the tokenizer it was prepared with (or tokenizer.input to text files)");
  if (inputs.empty())
    throw Error("no training text: set data.train_files (plain text or JSONL files), e.g. "
                "--set data.train_files=[../shared/data/brown/train.txt]");
  try {
    // One trained before from the same files and settings (in another run directory) is copied.
    const auto cache = data::tokenizer_cache_dir();
    const std::string key = cache ? data::tokenizer_cache_key(tok_options) : "";
    if (cache)
      if (const auto cached = data::restore_cached_tokenizer(*cache, key, tok_dir.string())) {
        spdlog::info("tokenizer: the one trained before from the same files and tokenizer.* settings, copied from the "
                     "tokenizer cache ({}; ROFORMER_TOKENIZER_CACHE=off trains it anew)", (*cache / key).string());
        return *cached;
      }
    const std::string trained = data::train_tokenizer(tok_options);
    if (cache) data::store_cached_tokenizer(*cache, key, tok_dir.string());
    return trained;
  } catch (const Error& e) {  // about an input file: name the key that listed it
    if (std::string(e.what()).find("tokenizer.") != std::string::npos) throw;
    throw Error(fmt::format("{}: {}", cfg.tokenizer.input.empty() ? "data.train_files" : "tokenizer.input", e.what()));
  }
}

std::shared_ptr<const data::PreparedCorpus> TrainingData::prepare(const DataSetup& setup,
                                                                  const std::vector<std::string>& files,
                                                                  const std::string& name) {
  data::PreparedDataRequest request;
  request.files = files;
  request.name = name;
  request.cache_dir =
      setup.cfg->data.prepared_dir.empty() ? checkpoint::RunLayout(setup.dir).data() : setup.cfg->data.prepared_dir;
  request.text_field = setup.cfg->data.text_field;
  request.resuming = setup.resume != nullptr;
  return data::open_prepared_data(request, *tokenizer_);
}

}  // namespace roformer::train
