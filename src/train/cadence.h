// When the training loop acts: the one place that says whether a step is due for logging,
// evaluation or a checkpoint (every N steps and at the last step), and hence whether the step must
// read its values back to the host (a CUDA step between such steps runs without any host sync).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/config.h"
#include "train/length_phases.h"

namespace roformer::train {

struct Cadence {
  int64_t total = 0;       // train.steps
  int64_t log_every = 0;   // logging.every
  int64_t eval_every = 0;  // eval.every (0: at the end only)
  int64_t save_every = 0;  // checkpoint.every (0: at the end only)
  std::vector<int64_t> phase_ends;  // the last step of each length phase but the last (LengthPhases::boundaries)

  static Cadence from(const config::Config& c) {
    return {c.train.steps, c.logging.every, c.eval.every, c.checkpoint.every, LengthPhases(c).boundaries()};
  }
  // Every logging.every steps, the last step, and each length phase's last step: a record's window
  // (its means, tokens/s) never spans two phases.
  bool logs(int64_t step) const {
    return due(log_every, step) || std::find(phase_ends.begin(), phase_ends.end(), step) != phase_ends.end();
  }
  bool evaluates(int64_t step) const { return due(eval_every, step); }
  bool saves(int64_t step) const { return due(save_every, step); }
  // The step's loss, accuracy and gradient norm are read back: something is done with them.
  bool syncs(int64_t step) const { return logs(step) || evaluates(step) || saves(step); }

 private:
  bool due(int64_t every, int64_t step) const { return (every > 0 && step % every == 0) || step == total; }
};

}  // namespace roformer::train
