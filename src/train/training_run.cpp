// The TrainingRun built whole from its Plan: device and process group (train/placement.h), run
// directory, data, the step (model, AdamW; train/step.h) and the starting point (--init-from weights
// or a checkpoint); then saving and resuming. What a checkpoint holds and how it is written and read
// is the checkpoint layer's (checkpoint/); each component saves and restores its own part of
// trainer_state.json. The run's loop is in train_loop.cpp.
#include "train/training_run.h"

#include <torch/torch.h>

#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "checkpoint/checkpointer.h"
#include "checkpoint/files.h"
#include "checkpoint/run_dir.h"
#include "checkpoint/run_layout.h"
#include "core/error.h"
#include "core/file.h"
#include "core/hash.h"
#include "core/logging.h"
#include "dist/agreement.h"
#include "dist/process_group.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/schedule.h"
#include "train/signals.h"
#include "train/training_data.h"

namespace roformer::train {
namespace fs = std::filesystem;

TrainingRun::TrainingRun(Plan plan)
    : plan_(std::move(plan)), phases_(plan_.cfg), placement_(plan_.cfg, plan_.env) {
  // The placement came first: a device that does not exist leaves no run directory behind.
  setup_run_dir();
  // A schedule that never decays is legal (a short check of the data, a bench), but rarely meant:
  // --init-from with a fresh config's warmup, say. Said once the log is attached, so train.log has it.
  if (main_rank()) {
    const LrSchedule schedule(plan_.cfg.schedule, plan_.cfg.optimizer.lr, plan_.cfg.train.steps);
    if (const std::string why = schedule.shortened(); !why.empty()) spdlog::warn("{}", why);
    if (const std::string why = schedule.never_decays(); !why.empty()) spdlog::warn("{}", why);
    if (const std::string why = phases_cut_short(plan_.cfg); !why.empty()) spdlog::warn("{}", why);
  }
  check_ranks_start_alike();
  setup_data();
  StepOptions step_options;
  step_options.faults = plan_.faults;
  step_options.pad_token_id = data_->tokenizer().special_tokens().pad;
  step_ = std::make_unique<TrainStep>(plan_.cfg, data_->vocab_size(), placement_, step_options);
  setup_starting_point();
}

TrainingRun::~TrainingRun() = default;

int64_t TrainingRun::global_batch() const {
  return phases_.now().batch_size * plan_.cfg.train.grad_accum * world_size();
}

std::string TrainingRun::shape_description() const {
  const config::Config& cfg = plan_.cfg;
  return fmt::format("{} sequences x {} tokens per step ({} micro-batch(es){}) | {} training sequences per epoch",
                     global_batch(), phases_.now().max_seq_len, cfg.train.grad_accum,
                     world_size() > 1 ? fmt::format(" of {} on each of {} ranks", phases_.now().batch_size, world_size())
                                      : "",
                     data_->sequences_per_epoch());
}

void TrainingRun::enter_phase_of_next_step() {
  if (!phases_.enter(step_->steps_done(), *data_)) return;
  const LengthPhase& p = phases_.now();
  spdlog::info("length phase {} of {} from step {} to {}: {}", phases_.current() + 1, phases_.all().size(),
               p.first_step + 1, p.end_step, shape_description());
}

// The run directory: the checkpointer of RUN/checkpoints, and (rank 0) train.log and config.yaml.
void TrainingRun::setup_run_dir() {
  const std::string& run_dir = plan_.run_dir;
  const checkpoint::RunLayout layout(run_dir);
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw Error(fmt::format("cannot create run directory '{}': {}", run_dir, ec.message()));
  checkpointer_ = std::make_unique<checkpoint::Checkpointer>(layout.checkpoints(), plan_.cfg.checkpoint.keep_last,
                                                             placement_.group(), plan_.env.rank, world_size(),
                                                             plan_.faults);
  if (main_rank()) {  // rank 0 owns train.log and config.yaml
    checkpoint::check_checkpoints_writable(checkpointer_->dir());
    add_log_file(layout.train_log());
    checkpoint::carry_out(plan_.start, run_dir);  // --overwrite, resume: what it deletes or moves is said in train.log too
    core::write_file_atomic(layout.config(), "# Resolved config of this run (from " + plan_.config_origin + ")\n" +
                                                 config::to_yaml(plan_.cfg));
  }
  spdlog::info("run directory {} | device {} | precision {}", run_dir, placement_.device().str(),
               config::to_string(plan_.cfg.train.precision));
}

// Data parallel: every rank must run the same command. The ranks compare a hash of their resolved
// config and checkpoint choice (an all-gather) before anything depends on them, so a rank started
// with other overrides, or one that sees another checkpoint (a run directory that is not shared),
// stops the run with a message naming it instead of training something else.
void TrainingRun::check_ranks_start_alike() {
  const std::string resume_dir = plan_.resume ? plan_.resume->dir : std::string();
  const std::string resolved = config::to_yaml(plan_.cfg) + "\nresume: " + resume_dir +
                               "\ninit-from: " + (plan_.init ? plan_.init->dir : std::string());
  core::Hasher h;
  h.update(resolved.data(), resolved.size());
  const auto differ =
      dist::ranks_differing_from_rank0(placement_.group(), h.digest(), "start-up check of the ranks' configs");
  if (!differ.empty())
    throw Error(fmt::format("rank(s) {} resolved another config or checkpoint than rank 0 (this rank resumes from "
                            "'{}'): every rank must run the same command (config, --set, --resume) on a run "
                            "directory all of them see",
                            dist::format_ranks(differ), resume_dir.empty() ? "nothing" : resume_dir));
}

// Rank 0 trains the tokenizer and prepares the data into the run directory; the other ranks then
// find them there.
void TrainingRun::setup_data() {
  const char* waiting = "waiting for rank 0 to prepare the tokenizer and data";
  if (!main_rank()) placement_.group().barrier(waiting);
  data_ = std::make_unique<TrainingData>(DataSetup::of(plan_), placement_.device().is_cuda(), main_rank());
  if (main_rank()) placement_.group().barrier(waiting);
}

// What a run starts from: the --init-from weights or the checkpoint (then every rank holds the same
// weights), its metrics so far and the TensorBoard writer.
void TrainingRun::setup_starting_point() {
  if (plan_.init) {
    if (main_rank())
      for (const auto& change : plan_.init->extended)
        spdlog::info("context extension from --init-from {}: {}", plan_.init->dir, change);
    load_init_weights(*plan_.init, *step_->model());
  }
  // Start identical, whatever each rank's init did.
  dist::broadcast_parameters(placement_.group(), step_->optimizer().params());
  step_->weights_loaded();  // bf16 parameters: the compute model takes the weights
  if (!main_rank()) torch::manual_seed(checkpoint::rank_seed(plan_.cfg.train.seed, plan_.env.rank, 0));  // own dropout stream
  const checkpoint::RunLayout layout(plan_.run_dir);
  if (main_rank()) metrics_ = metrics::JsonlSink(layout.metrics());
  if (plan_.resume)
    resume();
  else if (main_rank() && fs::exists(metrics_.path()) && fs::file_size(metrics_.path()) > 0)
    spdlog::warn("{} already holds records from an earlier run; new records are appended", metrics_.path());
  if (main_rank() && plan_.cfg.logging.tensorboard)  // after the checkpoint: a resumed session starts past its step
    tensorboard_.emplace(plan_.cfg, layout, plan_.resume ? std::optional<int64_t>(step_->steps_done()) : std::nullopt);
}

checkpoint::CheckpointContents TrainingRun::checkpoint_contents() {
  AdamW& optimizer = step_->optimizer();
  return {step_->model(), &optimizer.torch_optimizer(), &plan_.cfg, &data_->tokenizer(), metrics_.path(),
          optimizer.params()};
}

// Collective in a data-parallel run (Checkpointer::save): each component writes its part of the state.
void TrainingRun::save_checkpoint(const std::string& reason) {
  const SaveInProgress saving;  // a second stop signal now waits for the save
  checkpoint::TrainerState state;
  step_->save(state);
  phases_.save(state);
  data_->save(state);
  state.last_eval = last_eval_;
  state.world_size = world_size();
  state.global_batch_size = global_batch();
  state.num_parameters = step_->model()->num_parameters();
  state.reason = reason;
  state.roformer_version = ROFORMER_VERSION;
  checkpointer_->save(state, checkpoint_contents());
}

// Every rank reads the same checkpoint; each component takes its part of the trainer state back.
void TrainingRun::resume() {
  const checkpoint::CheckpointMeta& from = *plan_.resume;
  const checkpoint::TrainerState& state = from.state;
  checkpointer_->load(from, checkpoint_contents(), placement_.device(), plan_.cfg.train.seed);
  step_->restore(state);
  phases_.restore(state, *data_);  // the loader of the checkpoint's phase, then its position
  data_->restore(state);
  if (state.world_size != world_size())
    spdlog::info("resuming a checkpoint written by {} process(es) with {}: model, optimizer, step, learning-rate "
                 "schedule and the global data position carry over{}",
                 state.world_size, world_size(), world_size() > 1 ? "; ranks other than 0 start new dropout streams" : "");
  const int64_t saved_global_batch = state.global_batch_size.value_or(global_batch());
  if (saved_global_batch != global_batch() && main_rank())
    spdlog::warn("the global batch is now {} sequences per step (train.batch_size {} x train.grad_accum {} x {} "
                 "process(es)); the checkpoint was trained with {}. Keep batch_size x grad_accum x processes equal "
                 "to continue with the same batch", global_batch(), plan_.cfg.train.batch_size,
                 plan_.cfg.train.grad_accum, world_size(), saved_global_batch);
  spdlog::info("resumed from {} at step {} ({} tokens seen)", from.dir, step_->steps_done(), step_->tokens_seen());
  if (main_rank())  // the records up to the checkpoint's step
    metrics_.resume_from((fs::path(from.dir) / checkpoint::files::kMetrics).string());
  // The same path may still hold other bytes on another node.
  const auto agreement = dist::check_parameters_agree(placement_.group(), step_->optimizer().params());
  if (!agreement.agree)
    throw Error(fmt::format("after loading {}: {}. The ranks read different checkpoints: the run directory must "
                            "be on a filesystem every rank sees", from.dir, agreement.message()));
}

}  // namespace roformer::train
