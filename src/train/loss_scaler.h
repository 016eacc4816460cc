// Loss scaling as the training step sees it. fp16 (train.precision: fp16) needs dynamic scaling:
// the loss is multiplied by scale() before backward and the gradients divided by it after, a step
// with a non-finite gradient is skipped and halves the scale (never below 1), and 2000 finite steps
// in a row double it. fp32 and bf16 have the range of fp32 and use a fixed factor of 1: nothing is
// scaled, nothing skipped, so the step has no precision branch of its own.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "checkpoint/trainer_state.h"

namespace roformer::train {

class LossScaler {
 public:
  static constexpr double kInitialScale = 65536.0;
  static constexpr int64_t kGrowthInterval = 2000;

  explicit LossScaler(bool dynamic) : dynamic_(dynamic) {}

  // Dynamic scaling finds overflow only in values read back: its steps must sync.
  bool dynamic() const { return dynamic_; }
  // The factor the loss is multiplied by (1 without dynamic scaling).
  double scale() const { return dynamic_ ? scale_ : 1.0; }
  // Divides the gradients by scale() in place (nothing without dynamic scaling).
  void unscale(const std::vector<torch::Tensor>& grads) const;
  // After a step whose gradients were read back: returns true when the step is to be skipped
  // (dynamic scaling and a non-finite gradient; the scale is halved), false when it is applied.
  bool update(bool finite);

  // Finite steps in a row since the scale last changed.
  int64_t good_steps() const { return good_steps_; }
  // Its part of a checkpoint's trainer_state.json: loss_scale and good_steps.
  void save(checkpoint::TrainerState& state) const {
    state.loss_scale = scale_;
    state.good_steps = good_steps_;
  }
  void restore(const checkpoint::TrainerState& state) {
    scale_ = state.loss_scale;
    good_steps_ = state.good_steps;
  }

 private:
  bool dynamic_;
  double scale_ = kInitialScale;
  int64_t good_steps_ = 0;
};

}  // namespace roformer::train
