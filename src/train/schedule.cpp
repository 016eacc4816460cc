// Learning-rate schedules as pure functions of the step; see schedule.h.
#include "train/schedule.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace roformer::train {
namespace {

[[noreturn]] void invalid(const std::string& msg) { throw Error("invalid config: " + msg); }

}  // namespace

void validate_schedule(const config::Config& c) {
  const config::ScheduleConfig& s = c.schedule;
  if (s.warmup_steps > c.train.steps)
    invalid(fmt::format("schedule.warmup_steps ({}) must be <= train.steps ({})", s.warmup_steps,
                                c.train.steps));
  if (s.type != "wsd") {
    if (s.decay_fraction != config::ScheduleConfig().decay_fraction)
      invalid(fmt::format("schedule.decay_fraction = {} applies to schedule.type: wsd only (got {}); remove it "
                                  "or set schedule.type: wsd", s.decay_fraction, s.type));
  } else if (std::llround(s.decay_fraction * static_cast<double>(c.train.steps)) < 1) {
    // LrSchedule: the decay takes the last round(decay_fraction x steps) steps.
    invalid(fmt::format("schedule.decay_fraction {} of train.steps {} is {:.3g} steps: the learning rate would "
                                "never decay; raise schedule.decay_fraction to at least {:.3g} (or train.steps)",
                                s.decay_fraction, c.train.steps, s.decay_fraction * static_cast<double>(c.train.steps),
                                0.5 / static_cast<double>(c.train.steps)));
  }
  if (s.min_lr > c.optimizer.lr)
    invalid(fmt::format("schedule.min_lr ({}) must be <= optimizer.lr ({})", s.min_lr, c.optimizer.lr));
}

LrSchedule::LrSchedule(const config::ScheduleConfig& schedule, double peak_lr, int64_t total_steps)
    : type_(schedule.type),
      warmup_(schedule.warmup_steps),
      peak_(peak_lr),
      min_(schedule.min_lr),
      total_(total_steps),
      decay_start_(std::max<int64_t>(warmup_, total_steps - std::llround(schedule.decay_fraction * static_cast<double>(total_steps)))) {}

double LrSchedule::lr(int64_t step) const {
  if (step < warmup_) return peak_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if (type_ == "constant") return peak_;
  const int64_t start = type_ == "wsd" ? decay_start_ : warmup_;  // the decay runs from here to the last step
  if (step < start) return peak_;
  const int64_t span = std::max<int64_t>(1, total_ - start - 1);
  const double p = std::clamp(static_cast<double>(step - start) / static_cast<double>(span), 0.0, 1.0);
  if (type_ == "cosine") return min_ + (peak_ - min_) * 0.5 * (1.0 + std::cos(M_PI * p));
  return min_ + (peak_ - min_) * (1.0 - p);
}

std::string LrSchedule::never_decays() const {
  // The last step at the peak (to rounding: warmup computes it as peak * W / W).
  if (type_ == "constant" || min_ >= peak_ || total_ <= 0 || lr(total_ - 1) < peak_ * (1 - 1e-9)) return "";
  // The decay runs from its start (the end of warmup; wsd: s0) to the last step, and goes below the
  // peak only with two or more steps there.
  if (type_ == "wsd")
    return fmt::format("the learning rate never decays: the wsd decay gets {} of the {} train.steps (it starts at "
                       "step {}, schedule.warmup_steps {}); raise schedule.decay_fraction or train.steps",
                       total_ - decay_start_, total_, decay_start_, warmup_);
  return fmt::format("the learning rate never decays: train.steps {} ends {} schedule.warmup_steps {}, so the last "
                     "step still runs at the peak {}; lower schedule.warmup_steps (or raise train.steps) for the {} "
                     "decay to schedule.min_lr", total_, total_ > warmup_ ? "one step after" : "with", warmup_, peak_,
                     type_);
}

}  // namespace roformer::train
