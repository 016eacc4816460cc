// `roformer train` from the command line to a TrainingRun: the config (given, or the checkpoint's), the
// run directory and its lock, the checkpoint to resume from (docs/training.md "Run directories")
// and the --init-from source, each worked out once and checked before anything is written.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "checkpoint/files.h"
#include "checkpoint/meta.h"
#include "checkpoint/resume_policy.h"
#include "checkpoint/run_dir.h"
#include "checkpoint/run_layout.h"
#include "checkpoint/store.h"
#include "core/config.h"
#include "core/device.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/logging.h"
#include "core/safetensors.h"
#include "data/corpus.h"
#include "data/input_files.h"
#include "data/tokenizer.h"
#include "dist/env.h"
#include "train/init_from.h"
#include "train/launch.h"
#include "train/length_phases.h"
#include "train/run_config.h"
#include "train/schedule.h"
#include "train/training_run.h"

namespace roformer::train {
namespace files = checkpoint::files;
namespace fs = std::filesystem;

namespace {

// What the command line says, and the checkpoint --resume PATH names when it alone gives the run directory.
struct Launch {
  config::Config cfg;         // -c with --set (the checkpoint's config replaces it when there is no -c)
  std::string origin;         // where cfg came from, for the log
  std::string run_dir;
  std::optional<InitSource> init;
  std::optional<checkpoint::CheckpointMeta> named;  // --resume PATH without a run directory: PATH's config and state
};

std::optional<InitSource> init_source(const TrainRequest& request) {
  if (request.init_from.empty() && request.extend_positions)
    throw Error("--extend-positions extends the position table of the weights --init-from starts from: pass "
                "--init-from too, or leave --extend-positions out");
  if (request.init_from.empty()) return std::nullopt;
  if (!request.resume.empty())
    throw Error("--init-from starts a new run and --resume continues one: pass one of them (a run started with "
                "--init-from continues with --resume auto alone)");
  if (request.config_path.empty())
    throw Error("--init-from needs a config for the new run: -c CONFIG (its model section must match the weights)");
  return find_init_source(request.init_from);
}

// The run directory: --run-dir, else the config's, else (--resume PATH alone) the checkpoint's.
void find_run_dir(const TrainRequest& request, Launch& l) {
  l.run_dir = request.run_dir;
  if (l.run_dir.empty() && !request.config_path.empty()) l.run_dir = l.cfg.train.run_dir;
  if (l.run_dir.empty() && request.resume == "auto")
    throw Error("--resume auto needs the run: pass --run-dir DIR (or -c CONFIG naming train.run_dir)");
  if (l.run_dir.empty() && checkpoint::verify_checkpoint(request.resume).ok) {
    l.named = checkpoint::read_checkpoint_meta(request.resume);
    l.run_dir = l.named->config.train.run_dir;
  }
}

Launch read_request(const TrainRequest& request) {
  Launch l;
  if (!request.config_path.empty()) {
    l.cfg = load_run_config(request.config_path, request.overrides);  // validated, before the run directory is locked
    l.origin = request.config_path;
    if (!request.run_dir.empty()) l.cfg.train.run_dir = request.run_dir;
  }
  l.init = init_source(request);
  if (request.config_path.empty() && request.resume.empty())
    throw Error("roformer train needs a config: -c configs/tiny.yaml (or --resume with a run directory)");
  find_run_dir(request, l);
  return l;
}

// Resuming: without -c the run continues with the checkpoint's config (and --set); with -c, the
// config may change only what the resume policy allows.
void adopt_checkpoint_config(const TrainRequest& request, const checkpoint::CheckpointMeta& from, Launch& l) {
  const std::string origin = (fs::path(from.dir) / files::kConfig).string();
  config::Config saved = from.config;
  if (request.config_path.empty()) {
    l.cfg = parse_run_config(config::to_yaml(saved), request.overrides, origin);
    l.origin = origin;
  }
  // train.param_dtype auto compares as what it becomes on this run's device (a checkpoint's is resolved).
  const bool cuda = core::resolve_device(l.cfg.train.device, "train.device").is_cuda();
  config::resolve_param_dtype(l.cfg, cuda);
  config::resolve_param_dtype(saved, cuda);
  // refuses model or data changes; the first length phase's keys may change once no step uses them
  checkpoint::check_resume_changes(saved, l.cfg, from.dir, keys_unused_from(l.cfg, from.state.step));
}

// A resumed run with another train.steps (or schedule) goes on from the learning rate the new
// schedule gives at the resumed step: said with both rates when that is not where the run left it (a
// decayed WSD run given more steps climbs from min_lr back to the peak).
void warn_learning_rate_jump(const checkpoint::CheckpointMeta& from, const config::Config& cfg) {
  const config::Config& saved = from.config;
  const int64_t step = from.state.step;
  const LrSchedule old_schedule(saved.schedule, saved.optimizer.lr, saved.train.steps);
  const LrSchedule schedule(cfg.schedule, cfg.optimizer.lr, cfg.train.steps);
  const double now = schedule.lr(step);
  const double expected = old_schedule.lr(step);
  if (std::abs(now - expected) <= 1e-9 * std::max(cfg.optimizer.lr, saved.optimizer.lr)) return;
  const std::string cause = saved.train.steps != cfg.train.steps
                                ? fmt::format("train.steps {} -> {} reshapes the {} schedule", saved.train.steps,
                                              cfg.train.steps, cfg.schedule.type)
                                : std::string("the changed schedule.* / optimizer.lr settings reshape the schedule");
  spdlog::warn("resume: the learning rate jumps at step {}: {:.4g} under the new settings, where the run left it at "
               "{:.4g} and would have gone on at {:.4g} ({}{})", step, now, old_schedule.lr(std::max<int64_t>(0, step - 1)),
               expected, cause, cfg.schedule.type == "wsd" ? fmt::format("; the decay now starts at step {}", schedule.decay_start())
                                                           : std::string());
}

// The files of one config key listed as inputs, expanded (folders, patterns): missing ones are an
// error naming the key. Prepared directories are opened later, by the data.
void check_inputs_exist(const std::vector<std::string>& files, const std::string& key) {
  if (files.empty() || std::all_of(files.begin(), files.end(), [](const std::string& f) { return data::is_prepared_dir(f); }))
    return;
  try {
    data::expand_inputs(files);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", key, e.what()));
  }
}

// What the run reads, checked before anything is deleted or moved (--overwrite deletes the earlier
// run's checkpoints and metrics): a mistyped data file, a missing tokenizer or truncated --init-from
// weights then leave the run directory as it was. A resumed run continues with the tokenizer of its
// checkpoint; another one put in RUN_DIR/tokenizer is refused, not silently replaced.
void check_run_inputs(const Plan& plan, const checkpoint::CheckpointPlan& start) {
  const config::Config& cfg = plan.cfg;
  check_inputs_exist(cfg.data.train_files, "data.train_files");
  check_inputs_exist(cfg.data.valid_files, "data.valid_files");
  if (plan.resume) {
    const std::string own_dir = checkpoint::RunLayout(plan.run_dir).tokenizer_dir();
    std::error_code ec;
    for (const char* name : {data::kTokenizerJsonFile, data::kTokenizerModelFile}) {
      const std::string own = (fs::path(own_dir) / name).string();
      if (!fs::exists(own, ec)) continue;
      const std::string fingerprint = data::Tokenizer::load(own_dir).fingerprint();
      if (fingerprint != plan.resume->state.tokenizer_fingerprint)
        throw Error(fmt::format("{} is not the tokenizer checkpoint {} was trained with (fingerprint {}, the "
                                "checkpoint's {}); a run continues with its own tokenizer. Remove it (the resume puts "
                                "the checkpoint's back), or start a new run with --init-from {} in another --run-dir",
                                own, plan.resume->dir, fingerprint, plan.resume->state.tokenizer_fingerprint,
                                plan.resume->dir));
      break;
    }
    return;
  }
  if (!plan.init && !cfg.tokenizer.model.empty()) {
    try {
      const data::Tokenizer tok = data::Tokenizer::load(cfg.tokenizer.model);
      tok.check_mlm_roles();
      // The model's embedding has a row for every id of the tokenizer.
      const int64_t rows = cfg.model.vocab_size;
      if (rows != 0 && rows != tok.vocab_size())
        throw Error(fmt::format("tokenizer {} has {} ids but model.vocab_size is {}{}; set model.vocab_size: 0 to take "
                                "it from the tokenizer", tok.model_path(), tok.vocab_size(), rows,
                                rows < tok.vocab_size() ? ": ids beyond the model's embedding rows" : ""));
    } catch (const Error& e) {
      throw Error(fmt::format("tokenizer.model: {}", e.what()));
    }
  }
  if (!plan.init && cfg.tokenizer.model.empty()) check_inputs_exist(cfg.tokenizer.input, "tokenizer.input");
  if (plan.init && !start.deleted.empty()) core::load_safetensors(plan.init->weights);  // whole and readable
}

// A checkpoint past train.steps would otherwise end in a false "done".
void check_steps_left(const checkpoint::CheckpointMeta& from, const config::Config& cfg) {
  const std::string& resume_dir = from.dir;
  const int64_t saved_step = from.state.step;
  if (saved_step > cfg.train.steps)
    throw Error(fmt::format("checkpoint {} is at step {}, beyond train.steps = {}: there is nothing to train. "
                            "Raise train.steps above {} to continue (--set train.steps=N), or use the checkpoint "
                            "as it is (roformer eval / export)", resume_dir, saved_step, cfg.train.steps, saved_step));
}

// The plan of a `roformer train` run, worked out and checked before anything is written; the lock on
// the run directory is taken on the way and held by the caller for the run.
Plan plan_run(const TrainRequest& request, std::optional<checkpoint::RunDirLock>& lock) {
  Plan plan;
  plan.env = dist::detect_dist_env();
  plan.faults = core::Faults::from_environment();
  const bool main_process = plan.env.rank == 0;
  set_log_rank(plan.env.rank);  // other ranks: warnings and errors only, from here on
  Launch l = read_request(request);
  // One process per run directory (rank 0 holds the lock for a data-parallel run), then the
  // checkpoint to start from, its config and trainer state read once.
  if (main_process && !l.run_dir.empty()) {
    checkpoint::check_run_dir_is_ours(l.run_dir, request.config_path);
    lock.emplace(l.run_dir);
  }
  checkpoint::CheckpointChoice choice;
  choice.resume = request.resume;
  choice.overwrite = request.overwrite;
  choice.have_config = !request.config_path.empty();
  const checkpoint::CheckpointPlan start = checkpoint::plan_checkpoint(l.run_dir, choice);
  if (!start.resume.empty()) {
    plan.resume = l.named && l.named->dir == start.resume ? std::move(*l.named)
                                                          : checkpoint::read_checkpoint_meta(start.resume);
    const LengthPhases phases(plan.resume->config);  // the checkpoint's
    checkpoint::check_resumable(*plan.resume, [&](int64_t step) { return phases.phase_of(step); });
    adopt_checkpoint_config(request, *plan.resume, l);
  }
  l.cfg.train.run_dir = l.run_dir;
  validate_run_config(l.cfg);  // the config as the run will use it: the checkpoint's, --set, the run directory
  if (plan.resume) check_steps_left(*plan.resume, l.cfg);
  if (plan.resume) warn_learning_rate_jump(*plan.resume, l.cfg);
  setup_logging(l.cfg.logging.level);
  if (l.init) check_init_architecture(*l.init, l.cfg, request.extend_positions);
  plan.cfg = std::move(l.cfg);
  plan.config_origin = std::move(l.origin);
  plan.run_dir = std::move(l.run_dir);
  plan.init = std::move(l.init);
  check_run_inputs(plan, start);
  // Carried out by the run (rank 0) once the device is found and train.log is attached, so the log
  // says what was deleted or moved; every rank planned alike.
  plan.start = start;
  return plan;
}

}  // namespace

void run_training(const TrainRequest& request) {
  std::optional<checkpoint::RunDirLock> lock;
  TrainingRun run(plan_run(request, lock));
  run.run();
}

}  // namespace roformer::train
