// The training loop's accumulators between two logging steps: throughput over every step of the
// window, loss and accuracy averaged over the steps whose values were read back (every step on the
// CPU, the logging step itself on CUDA), the last values read back (for the live bar), and an
// exponential mean of the step time for the ETA.
#pragma once

#include <cstdint>

#include "train/progress.h"

namespace roformer::train {

// The values of one finished step that the window needs (StepResult lives with LibTorch).
struct StepFigures {
  double seconds = 0;  // wall time of the whole step
  int64_t tokens = 0;
  bool synced = false;  // loss, accuracy and grad_norm were read back
  double loss = 0, accuracy = 0, grad_norm = 0;
};

class MetricsWindow {
 public:
  void add(const StepFigures& s);
  // The live figures after `step` of `total`: the last values read back, the window's throughput.
  ProgressStats live(int64_t step, int64_t total, double lr) const;
  // The logging step's figures (loss and accuracy: the window's means), then a fresh window.
  ProgressStats close(int64_t step, int64_t total, double lr);

 private:
  double seconds_ = 0, loss_sum_ = 0, accuracy_sum_ = 0;
  int64_t tokens_ = 0, steps_ = 0, synced_ = 0;
  double last_loss_ = 0, last_accuracy_ = 0, last_grad_norm_ = 0;
  double ema_step_s_ = 0;  // kept across windows
};

}  // namespace roformer::train
