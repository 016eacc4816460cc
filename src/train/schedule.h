// Learning-rate schedule: linear warmup from 0 to the peak, then linear or cosine decay to min_lr at
// the last step, warmup-stable-decay, or constant. A pure function of the step, so its "state" is
// the global step.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"

namespace roformer::train {

// The schedule's rules (train/run_config.h): min_lr at most the peak, and settings the chosen type
// would silently ignore. A run shorter than its schedule is not refused: LrSchedule shortens the
// schedule to fit (shortened()). Throws roformer::Error naming the key to change.
void validate_schedule(const config::Config& c);

class LrSchedule {
 public:
  LrSchedule(const config::ScheduleConfig& schedule, double peak_lr, int64_t total_steps);

  // Learning rate for optimizer step `step` (0-based: the first update uses lr(0)).
  //   warmup:  peak * (step + 1) / warmup_steps                       for step < warmup_steps
  //   decay:   p = (step - warmup) / (total - warmup - 1), in [0, 1]
  //            linear: min + (peak - min) * (1 - p)
  //            cosine: min + (peak - min) * (1 + cos(pi * p)) / 2
  //   wsd:     the peak until s0 = max(warmup, total - round(decay_fraction * total)), then linear
  //            from the peak at s0 to min at the last step (Hu et al. 2024, MiniCPM; Hägele et al.
  //            2024: a constant rate with a short cooldown matches cosine at any budget)
  //   constant: peak after warmup.
  // A run shorter than its schedule (a smoke run: train.steps 2 of a config warming up for 30) gets
  // the schedule shortened to fit: a warmup longer than the run takes half of it (the other half
  // decays), and a wsd decay that rounds to no step takes one.
  double lr(int64_t step) const;
  // The step the wsd decay starts at (s0 above).
  int64_t decay_start() const { return decay_start_; }
  // What was shortened to fit the run, naming the keys and the steps that would run the schedule as
  // configured; "" when nothing was. One warning at the start of a run (it replaces never_decays).
  std::string shortened() const;
  // Why the rate never decays within the run (the last step still runs at the peak, no stable period
  // or warmup left to decay from), naming the keys to change; "" when it decays or is not meant to
  // (constant, or min_lr equal to the peak).
  std::string never_decays() const;

 private:
  std::string type_;
  int64_t warmup_;
  double peak_;
  double min_;
  int64_t total_;
  int64_t decay_start_;  // wsd: s0
  int64_t configured_warmup_;
  int64_t configured_decay_;  // wsd: round(decay_fraction x total)
};

}  // namespace roformer::train
