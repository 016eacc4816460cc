// TrainingRun::run: the loop that calls the TrainStep (train/step.h) and does what the Cadence says is
// due at each step: the progress line, metrics records (metrics.jsonl, TensorBoard), evaluation,
// checkpoints, the stop at a signal; and what ends a run early with an error saying how to go on
// (a non-finite step, a failed write).
#include <chrono>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "checkpoint/checkpointer.h"
#include "checkpoint/resume_policy.h"
#include "checkpoint/store.h"
#include "core/device.h"
#include "core/error.h"
#include "core/logging.h"
#include "dist/collectives.h"
#include "dist/process_group.h"
#include "model/flops.h"
#include "train/cadence.h"
#include "train/metrics_window.h"
#include "train/progress.h"
#include "train/signals.h"
#include "train/training_run.h"
#include "train/training_data.h"

namespace roformer::train {
namespace fs = std::filesystem;
using nlohmann::json;

// Data parallel: each rank evaluates every W-th batch of the fixed validation set and the sums are
// all-reduced, so the figures are those of the whole set (as a single process computes them, up to
// float64 rounding of the loss sum) in 1/W of the time.
void TrainingRun::run_eval() {
  const auto& batches = data_->eval_batches();
  if (batches.empty()) return;
  dist::ProcessGroup& group = placement_.group();
  const EvalResult r = sum_over_ranks(group, evaluate_mlm(step_->compute_model(), dist::rank_share(group, batches),
                                                          placement_.device(), config::autocast_precision(plan_.cfg)));
  last_eval_ = r;  // seconds: this rank's wall time
  if (!main_rank()) return;
  const int64_t step = step_->steps_done();
  if (r.n_predicted == 0) {  // metrics over no predictions are no result: none is recorded
    spdlog::warn("eval step {}: no position was chosen for prediction in {} validation sequences (eval.mask_prob {}); "
                 "nothing to measure, no eval record written: raise eval.mask_prob or eval.max_sequences",
                 step, r.n_sequences, plan_.cfg.eval.mask_prob);
    return;
  }
  spdlog::info("eval step {} | MLM accuracy {:.4f} | top-5 {:.4f} | loss {:.4f} | perplexity {:.2f} | {} predicted "
               "tokens in {} sequences | {:.1f}s",
               step, r.accuracy, r.top5_accuracy, r.loss, r.perplexity, r.n_predicted, r.n_sequences, r.seconds);
  record({{"type", "eval"}, {"step", step}, {"loss", r.loss}, {"accuracy", r.accuracy},
          {"top5_accuracy", r.top5_accuracy}, {"perplexity", r.perplexity},
          {"n_predicted", r.n_predicted}, {"n_sequences", r.n_sequences}, {"seconds", r.seconds}});
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

// The logging step: the log line (window means) and the metrics record (fp16: the loss scale;
// MFU where the device's peak is known).
void TrainingRun::log_step(const StepResult& r, MetricsWindow& window, ProgressReporter& progress) {
  const int64_t step = step_->steps_done();
  const ProgressStats ps = window.close(step, plan_.cfg.train.steps, step_->learning_rate(step - 1));
  progress.log_line(ps);
  if (!main_rank()) return;
  json rec = {{"type", "train"}, {"step", step}, {"loss", r.loss}, {"loss_avg", ps.loss},
              {"accuracy", r.accuracy}, {"lr", ps.lr}, {"grad_norm", r.grad_norm},
              {"tokens_per_s", ps.tokens_per_s}, {"ms_per_step", ps.ms_per_step}, {"tokens_seen", step_->tokens_seen()},
              {"data_wait_s", r.timings.data}};
  if (step_->scaler().dynamic()) rec["loss_scale"] = step_->scaler().scale();
  if (const auto mfu = model_flops_utilization(r.n_pred, ps.ms_per_step)) rec["mfu"] = *mfu;
  record(rec);
}

void TrainingRun::record(const json& rec) {
  try {
    metrics_.write(rec);
  } catch (const Error& e) {
    stop_for_failed_write(e.what());
  }
  if (tensorboard_) tensorboard_->write(rec);
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

std::optional<double> TrainingRun::model_flops_utilization(int64_t n_pred, double ms_per_step) const {
  const c10::Device& device = placement_.device();
  if (!device.is_cuda() || ms_per_step <= 0) return std::nullopt;
  const double peak_tflops = core::known_peak_tflops(core::device_name(device), plan_.cfg.train.precision);
  if (peak_tflops <= 0) return std::nullopt;
  const double flops =
      model::mlm_train_flops_per_step(step_->model()->options(), global_batch(), plan_.cfg.data.max_seq_len, n_pred);
  return flops / (ms_per_step / 1000.0) / (peak_tflops * 1e12 * static_cast<double>(world_size()));
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
  if (plan_.init) {
    spdlog::info("new run from the weights of {} {} (fresh optimizer and schedule)", plan_.init->kind, plan_.init->dir);
    run_eval();  // step 0: the starting model, the figures `roformer eval` gives the source
  }
  const Cadence cadence = Cadence::from(cfg);
  spdlog::info("training {} steps from step {} | {} sequences x {} tokens per step ({} micro-batch(es){}) | {} "
               "training sequences per epoch",
               cadence.total, step_->steps_done(), global_batch(), cfg.data.max_seq_len, cfg.train.grad_accum,
               world_size() > 1 ? fmt::format(" of {} on each of {} ranks", cfg.train.batch_size, world_size()) : "",
               data_->sequences_per_epoch());
  install_stop_handlers();
  ProgressReporter progress(main_rank() ? cfg.logging.progress : "plain");  // other ranks: info lines are off
  MetricsWindow window;
  int64_t last_synced = step_->steps_done();  // a non-finite value found later arose after this step
  while (step_->steps_done() < cadence.total) {
    const int64_t before = step_->steps_done();
    const auto t0 = std::chrono::steady_clock::now();
    // The same decision on every rank; a step during which a stop was requested syncs as well.
    const StepResult r = step_->run(*data_, cadence.syncs(before + 1));
    if (r.abandoned) {  // stopped inside the step: saved as of the last complete one
      progress.clear();
      spdlog::info("step {} was given up at the stop signal; it is trained again on resume", before + 1);
      stop_if_asked(r);
      return;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.finite && !r.skipped) progress.clear();
    check_finite(r, before, last_synced);
    if (r.skipped) spdlog::warn("step {}: non-finite fp16 gradient, step skipped, loss scale now {}", before + 1,
                                step_->scaler().scale());
    const int64_t step = step_->steps_done();
    if (r.synced) last_synced = step;
    window.add({seconds, r.tokens, r.synced, r.loss, r.accuracy, r.grad_norm});
    progress.update(window.live(step, cadence.total, step_->learning_rate(step - 1)));
    if (cadence.logs(step)) log_step(r, window, progress);
    if (main_rank()) {
      if (const std::string failed = log_file_failure(); !failed.empty()) stop_for_failed_write(failed);
    }
    if (cadence.evaluates(step) || cadence.saves(step) || r.stop || stop_requested()) progress.clear();
    if (cadence.evaluates(step)) run_eval();
    if (cadence.saves(step)) save_checkpoint(step == cadence.total ? "end of training" : "periodic");
    if (stop_if_asked(r)) return;
  }
  progress.clear();
  if (tensorboard_) tensorboard_->finish(step_->steps_done());  // the HParams session ends
  report_done();
}

}  // namespace roformer::train
