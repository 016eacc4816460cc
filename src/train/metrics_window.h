// The training loop's accumulators between two logging steps: throughput over every step of the
// window, loss and accuracy averaged over the steps whose values were read back (every step on the
// CPU, the logging step itself on CUDA), the last values read back (for the live bar), and an
// exponential mean of the step time for the ETA; and, over the whole session, the steps, tokens,
// predicted positions and step time the run's summary reports.
#pragma once

#include <chrono>
#include <cstdint>

#include "metrics/records.h"
#include "train/progress.h"

namespace roformer::train {

// The values of one finished step that the window needs (StepResult lives with LibTorch).
struct StepFigures {
  double seconds = 0;  // wall time of the whole step
  int64_t tokens = 0;
  int64_t n_pred = 0;
  bool synced = false;  // loss, accuracy and grad_norm were read back
  double loss = 0, accuracy = 0, grad_norm = 0;
};

// This process's steps so far (all windows).
struct SessionFigures {
  int64_t steps = 0, tokens = 0, n_pred = 0;
  double seconds = 0;  // the steps' wall time (evaluations and saves not included)
};

class MetricsWindow {
 public:
  void add(const StepFigures& s);
  // The live figures after `step` of `total`: the last values read back, the window's throughput.
  ProgressStats live(int64_t step, int64_t total, double lr) const;
  // The logging step's window figures (step, the means of loss and accuracy over window_steps
  // steps, lr, throughput, ETA); the batch figures are the caller's. Then a fresh window.
  metrics::TrainRecord close(int64_t step, int64_t total, double lr);
  const SessionFigures& session() const { return session_; }
  // Wall time since the window was made (the loop's start): steps, evaluations and saves.
  double wall_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count(); }

 private:
  double seconds_ = 0, loss_sum_ = 0, accuracy_sum_ = 0;
  int64_t tokens_ = 0, steps_ = 0, synced_ = 0;
  double last_loss_ = 0, last_accuracy_ = 0;
  double ema_step_s_ = 0;  // kept across windows
  SessionFigures session_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace roformer::train
