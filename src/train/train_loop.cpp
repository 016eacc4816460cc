// TrainingRun::run: the loop that calls the TrainStep (train/step.h) and does what the Cadence says is
// due at each step: the progress bar, metrics records (to every sink: the console, metrics.jsonl,
// TensorBoard), evaluation, checkpoints, the stop at a signal, the summary at the end; and what ends
// a run early with an error saying how to go on (a non-finite step, a failed write).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "checkpoint/checkpointer.h"
#include "checkpoint/resume_policy.h"
#include "checkpoint/store.h"
#include "core/device.h"
#include "core/peak_memory.h"
#include "core/error.h"
#include "core/logging.h"
#include "dist/collectives.h"
#include "dist/process_group.h"
#include "eval/evaluate.h"
#include "model/flops.h"
#include "train/cadence.h"
#include "train/metrics_window.h"
#include "train/progress.h"
#include "train/signals.h"
#include "train/training_run.h"
#include "train/training_data.h"

namespace roformer::train {
namespace fs = std::filesystem;

// Data parallel: each rank evaluates every W-th batch of the fixed validation set and the sums are
// all-reduced, so the figures are those of the whole set (as a single process computes them, up to
// float64 rounding of the loss sum) in 1/W of the time.
void TrainingRun::run_eval() {
  const auto& batches = data_->eval_batches();
  if (batches.empty()) return;
  dist::ProcessGroup& group = placement_.group();
  metrics::EvalRecord r = eval::sum_over_ranks(
      group, eval::evaluate_mlm(step_->compute_model(), dist::rank_share(group, batches), placement_.device(),
                                config::autocast_precision(plan_.cfg)));
  r.step = step_->steps_done();
  last_eval_ = r;  // seconds: this rank's wall time
  if (!main_rank()) return;
  if (r.n_predicted == 0) {  // metrics over no predictions are no result: none is recorded
    spdlog::warn("eval step {}: no position was chosen for prediction in {} validation sequences (eval.mask_prob {}); "
                 "nothing to measure, no eval record written: raise eval.mask_prob or eval.max_sequences",
                 r.step, r.n_sequences, plan_.cfg.eval.mask_prob);
    return;
  }
  record(r);
}

// A non-finite loss or gradient norm ends the run without saving: weights that already gave one
// (or were blown up by a huge learning rate) would fail again on resume. The advice names a
// checkpoint from before the failure. last_synced: the last step whose values were read back.
void TrainingRun::check_finite(const StepResult& r, int64_t before, int64_t last_synced) const {
  if (r.finite || r.skipped) return;
  const int64_t step = before;
  if (r.nonfinite_earlier)  // set by an unsynced step after last_synced, which started from its state
    throw Error(fmt::format("non-finite loss or gradient norm between steps {} and {} (found at step {}; updates "
                            "stopped at the first one). {}", last_synced + 1, step + 1, step + 1,
                            checkpoint::nonfinite_resume_advice(checkpointer_->dir(), plan_.run_dir, last_synced - 1)));
  throw Error(fmt::format("non-finite loss ({}) or gradient norm ({}) at step {}. {}", r.loss, r.grad_norm, step + 1,
                          checkpoint::nonfinite_resume_advice(checkpointer_->dir(), plan_.run_dir, step - 1)));
}

// The logging step's record: the window's means (train/metrics_window.h), the step's batch figures,
// fp16's loss scale, MFU where the device's peak is known.
void TrainingRun::log_step(const StepResult& r, MetricsWindow& window) {
  const int64_t step = step_->steps_done();
  metrics::TrainRecord rec = window.close(step, plan_.cfg.train.steps, step_->learning_rate(step - 1));
  rec.loss = r.loss;
  rec.accuracy = r.accuracy;
  rec.grad_norm = r.grad_norm;
  rec.tokens_seen = step_->tokens_seen();
  rec.data_wait_s = r.timings.data;
  if (step_->scaler().dynamic()) rec.loss_scale = step_->scaler().scale();
  rec.mfu = model_flops_utilization(static_cast<double>(r.n_pred), rec.ms_per_step);
  rec.seq_len = phases_.now().max_seq_len;
  if (phases_.phased()) rec.phase = static_cast<int64_t>(phases_.current()) + 1;
  last_train_ = rec;
  if (main_rank()) record(rec);
}

void TrainingRun::record(const metrics::TrainRecord& record) { send(record); }
void TrainingRun::record(const metrics::EvalRecord& record) { send(record); }

template <class Record>
void TrainingRun::send(const Record& record) {
  for (metrics::MetricsSink* sink : sinks()) {
    try {
      sink->write(record);
    } catch (const Error& e) {
      stop_for_failed_write(e.what());
    }
  }
}

std::vector<metrics::MetricsSink*> TrainingRun::sinks() {
  if (!main_rank()) return {};
  std::vector<metrics::MetricsSink*> out = {console_.get(), &metrics_};
  if (tensorboard_) out.push_back(&*tensorboard_);
  return out;
}

void TrainingRun::stop_for_failed_write(const std::string& what) {
  const int64_t step = step_->steps_done();
  std::string kept;
  if (world_size() == 1) {  // a save is collective: with other ranks it would wait for them
    try {
      save_checkpoint("a failed write: " + what);
      kept = fmt::format("the {} steps trained were saved in {}", step,
                         (fs::path(checkpointer_->dir()) / checkpoint::checkpoint_name(step)).string());
    } catch (const std::exception& e) {
      kept = fmt::format("no checkpoint could be saved either ({}); earlier checkpoints are kept as they were", e.what());
    }
  } else {
    kept = "earlier checkpoints are kept as they were";
  }
  throw Error(fmt::format("{}: training stopped at step {} rather than go on without its record; {}. Free space (or "
                          "fix the cause), then continue with: roformer train --run-dir {} --resume auto",
                          what, step, kept, plan_.run_dir));
}

std::optional<double> TrainingRun::model_flops_utilization(double n_pred, double ms_per_step) const {
  const c10::Device& device = placement_.device();
  if (!device.is_cuda() || ms_per_step <= 0) return std::nullopt;
  const double peak_tflops = core::known_peak_tflops(core::device_name(device), plan_.cfg.train.precision);
  if (peak_tflops <= 0) return std::nullopt;
  const double flops = model::mlm_train_flops_per_step(step_->model()->options(), global_batch(),
                                                       phases_.now().max_seq_len, std::llround(n_pred));
  return model::model_flops_utilization(flops, ms_per_step / 1000.0, peak_tflops, world_size());
}

// A stop signal (SIGINT/SIGTERM): save and say how to resume. Distributed, r.stop is the ranks'
// agreed decision (a signal after the step's start waits a step). Returns whether the run stops.
bool TrainingRun::stop_if_asked(const StepResult& r) {
  if (!r.stop && !(world_size() == 1 && stop_requested())) return false;
  const std::string why = stop_signal() != 0 ? fmt::format("signal {}", stop_signal()) : "a signal to another rank";
  save_checkpoint(why);
  const std::string launch =
      world_size() > 1 ? fmt::format("launching the same {} processes with: roformer train", world_size())
                       : "roformer train";
  spdlog::info("stopped by {} at step {}/{}. Resume {}{} --run-dir {} --resume auto", why, step_->steps_done(),
               plan_.cfg.train.steps, world_size() > 1 ? "by " : "with: ", launch, plan_.run_dir);
  return true;
}

metrics::RunSummary TrainingRun::summary(const MetricsWindow& window) const {
  const SessionFigures& session = window.session();
  metrics::RunSummary s;
  s.step = step_->steps_done();
  s.session_steps = session.steps;
  s.wall_s = window.wall_s();
  s.tokens_per_s = session.seconds > 0 ? static_cast<double>(session.tokens) / session.seconds : 0;
  s.last_train = last_train_;
  if (last_eval_ && last_eval_->n_predicted > 0) s.last_eval = last_eval_;
  const core::PeakMemory memory = core::peak_memory(placement_.device());
  s.peak_memory_bytes = memory.bytes;
  s.peak_memory_kind = memory.kind;
  if (session.steps > 0 && phases_.figures().size() <= 1) {  // one shape: MFU of its mean step
    const double steps = static_cast<double>(session.steps);
    s.mfu = model_flops_utilization(static_cast<double>(session.n_pred) / steps, 1000.0 * session.seconds / steps);
  }
  if (phases_.phased()) s.phases = phases_.figures();
  return s;
}

// Rank 0 sends the summary (the console prints it, TensorBoard ends its HParams session).
void TrainingRun::finish(const MetricsWindow& window) {
  console_->clear();
  if (main_rank()) {
    const metrics::RunSummary s = summary(window);
    for (metrics::MetricsSink* sink : sinks()) sink->finish(s);
  }
  report_done();
}

void TrainingRun::report_done() const {
  const int64_t step = step_->steps_done(), tokens = step_->tokens_seen();
  if (last_eval_)
    spdlog::info("done: {} steps, {} tokens | validation MLM accuracy {:.4f} (loss {:.4f}, perplexity {:.2f})",
                 step, tokens, last_eval_->accuracy, last_eval_->loss, last_eval_->perplexity);
  else
    spdlog::info("done: {} steps, {} tokens ({})", step, tokens,
                 data_->eval_batches().empty()
                     ? "no validation data configured"
                     : "nothing left to train, so no evaluation ran; metrics.jsonl has the last one");
  spdlog::info("final checkpoint: {}", (fs::path(checkpointer_->dir()) / checkpoint::checkpoint_name(step)).string());
}

void TrainingRun::run() {
  const config::Config& cfg = plan_.cfg;
  const Cadence cadence = Cadence::from(cfg);
  console_ = std::make_unique<ConsoleSink>(main_rank() ? cfg.logging.progress : "plain", cadence.total);
  if (plan_.init) {
    spdlog::info("new run from the weights of {} {} (fresh optimizer and schedule)", plan_.init->kind, plan_.init->dir);
    run_eval();  // step 0: the starting model, the figures `roformer eval` gives the source
  }
  enter_phase_of_next_step();
  if (phases_.phased())
    spdlog::info("length phases (train.phases; sequences x tokens per step): {}",
                 phases_.describe(cfg.train.grad_accum * world_size()));
  spdlog::info("training {} steps from step {}{} | {}", cadence.total, step_->steps_done(),
               phases_.phased() ? fmt::format(" in length phase {} of {}", phases_.current() + 1, phases_.all().size())
                                : "",
               shape_description());
  install_stop_handlers();
  MetricsWindow window;
  int64_t last_synced = step_->steps_done();  // a non-finite value found later arose after this step
  while (step_->steps_done() < cadence.total) {
    enter_phase_of_next_step();
    const int64_t before = step_->steps_done();
    const auto t0 = std::chrono::steady_clock::now();
    // The same decision on every rank; a step during which a stop was requested syncs as well.
    const StepResult r = step_->run(*data_, cadence.syncs(before + 1));
    if (r.abandoned) {  // stopped inside the step: saved as of the last complete one
      console_->clear();
      spdlog::info("step {} was given up at the stop signal; it is trained again on resume", before + 1);
      stop_if_asked(r);
      return;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.finite && !r.skipped) console_->clear();
    check_finite(r, before, last_synced);
    if (r.skipped) spdlog::warn("step {}: non-finite fp16 gradient, step skipped, loss scale now {}", before + 1,
                                step_->scaler().scale());
    const int64_t step = step_->steps_done();
    if (r.synced) last_synced = step;
    window.add({seconds, r.tokens, r.n_pred, r.synced, r.loss, r.accuracy, r.grad_norm});
    phases_.count(step, r.tokens, seconds, global_batch());
    console_->update(window.live(step, cadence.total, step_->learning_rate(step - 1)));
    if (cadence.logs(step)) log_step(r, window);
    if (main_rank()) {
      if (const std::string failed = log_file_failure(); !failed.empty()) stop_for_failed_write(failed);
    }
    if (cadence.evaluates(step) || cadence.saves(step) || r.stop || stop_requested()) console_->clear();
    if (cadence.evaluates(step)) run_eval();
    if (cadence.saves(step)) save_checkpoint(step == cadence.total ? "end of training" : "periodic");
    if (stop_if_asked(r)) return;
  }
  finish(window);
}

}  // namespace roformer::train
