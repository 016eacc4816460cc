// `roformer train` from the command line to a Trainer: the config (given, or the checkpoint's), the
// run directory and its lock, the checkpoint to resume from (docs/training.md "Run directories")
// and the --init-from source, each worked out once and checked before anything is written.
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "checkpoint/files.h"
#include "checkpoint/resume_policy.h"
#include "checkpoint/run_dir.h"
#include "checkpoint/store.h"
#include "checkpoint/trainer_state.h"
#include "core/config.h"
#include "core/device.h"
#include "core/error.h"
#include "core/file.h"
#include "core/logging.h"
#include "dist/env.h"
#include "train/init_from.h"
#include "train/trainer.h"
#include "train/launch.h"

namespace roformer::train {
namespace files = checkpoint::files;
namespace fs = std::filesystem;

namespace {

// What the command line says before any checkpoint is read.
struct Launch {
  config::Config cfg;         // -c with --set (the checkpoint's config replaces it when there is no -c)
  std::string origin;         // where cfg came from, for the log
  std::string run_dir;
  std::optional<InitSource> init;
};

std::optional<InitSource> init_source(const TrainRequest& request) {
  if (request.init_from.empty()) return std::nullopt;
  if (!request.resume.empty())
    throw Error("--init-from starts a new run and --resume continues one: pass one of them (a run started with "
                "--init-from continues with --resume auto alone)");
  if (request.config_path.empty())
    throw Error("--init-from needs a config for the new run: -c CONFIG (its model section must match the weights)");
  return find_init_source(request.init_from);
}

// The run directory: --run-dir, else the config's, else (--resume PATH alone) the checkpoint's.
std::string run_dir_of(const TrainRequest& request, const config::Config& cfg) {
  std::string run_dir = request.run_dir;
  if (run_dir.empty() && !request.config_path.empty()) run_dir = cfg.train.run_dir;
  if (run_dir.empty() && request.resume == "auto")
    throw Error("--resume auto needs the run: pass --run-dir DIR (or -c CONFIG naming train.run_dir)");
  if (run_dir.empty() && checkpoint::verify_checkpoint(request.resume).ok)
    run_dir = config::parse_config(core::read_file((fs::path(request.resume) / files::kConfig).string()), {},
                                   request.resume + "/config.yaml").train.run_dir;
  return run_dir;
}

Launch read_request(const TrainRequest& request) {
  Launch l;
  if (!request.config_path.empty()) {
    l.cfg = config::load_config(request.config_path, request.overrides);
    l.origin = request.config_path;
    if (!request.run_dir.empty()) l.cfg.train.run_dir = request.run_dir;
    config::validate(l.cfg);  // before the run directory is created or locked
  }
  l.init = init_source(request);
  if (request.config_path.empty() && request.resume.empty())
    throw Error("roformer train needs a config: -c configs/tiny.yaml (or --resume with a run directory)");
  l.run_dir = run_dir_of(request, l.cfg);
  return l;
}

// Resuming: without -c the run continues with the checkpoint's config (and --set); with -c, the
// config may change only what the resume policy allows.
void adopt_checkpoint_config(const TrainRequest& request, const std::string& resume_dir, Launch& l) {
  const std::string path = (fs::path(resume_dir) / files::kConfig).string();
  config::Config saved = config::parse_config(core::read_file(path), {}, resume_dir + "/config.yaml");
  if (request.config_path.empty()) {
    l.cfg = config::parse_config(config::to_yaml(saved), request.overrides, resume_dir + "/config.yaml");
    l.origin = resume_dir + "/config.yaml";
  }
  // train.param_dtype auto compares as what it becomes on this run's device (a checkpoint's is resolved).
  const bool cuda = core::resolve_device(l.cfg.train.device, "train.device").is_cuda();
  config::resolve_param_dtype(l.cfg, cuda);
  config::resolve_param_dtype(saved, cuda);
  checkpoint::check_resume_changes(saved, l.cfg, resume_dir);  // refuses model or data changes
}

// A checkpoint past train.steps would otherwise end in a false "done".
void check_steps_left(const std::string& resume_dir, const config::Config& cfg) {
  const std::string state_path = (fs::path(resume_dir) / files::kTrainerState).string();
  const int64_t saved_step = checkpoint::parse_trainer_state(core::read_file(state_path), state_path).step;
  if (saved_step > cfg.train.steps)
    throw Error(fmt::format("checkpoint {} is at step {}, beyond train.steps = {}: there is nothing to train. "
                            "Raise train.steps above {} to continue (--set train.steps=N), or use the checkpoint "
                            "as it is (roformer eval / export)", resume_dir, saved_step, cfg.train.steps, saved_step));
}

}  // namespace

int run_training(const TrainRequest& request) {
  const int rank = dist::detect_dist_env().rank;
  const bool main_process = rank == 0;
  set_log_rank(rank);  // other ranks: warnings and errors only, from here on
  Launch l = read_request(request);
  // One process per run directory (rank 0 holds the lock for a data-parallel run), then the
  // checkpoint to start from.
  std::optional<checkpoint::RunDirLock> lock;
  if (main_process && !l.run_dir.empty()) {
    checkpoint::check_run_dir_is_ours(l.run_dir, request.config_path);
    lock.emplace(l.run_dir);
  }
  checkpoint::CheckpointChoice choice;
  choice.resume = request.resume;
  choice.overwrite = request.overwrite;
  choice.have_config = !request.config_path.empty();
  const checkpoint::CheckpointPlan plan = checkpoint::plan_checkpoint(l.run_dir, choice);
  if (!plan.resume.empty()) adopt_checkpoint_config(request, plan.resume, l);
  l.cfg.train.run_dir = l.run_dir;
  config::validate(l.cfg);
  if (!plan.resume.empty()) check_steps_left(plan.resume, l.cfg);
  setup_logging(l.cfg.logging.level);
  if (l.init) check_init_architecture(*l.init, l.cfg);
  if (main_process) checkpoint::carry_out(plan, l.run_dir);  // only rank 0 deletes or moves; every rank planned alike
  Trainer trainer(l.cfg, l.run_dir, plan.resume, l.origin);
  if (l.init) trainer.set_init_source(*l.init);
  return trainer.run();
}

}  // namespace roformer::train
