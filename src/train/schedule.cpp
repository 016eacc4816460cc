// Learning-rate schedules as pure functions of the step; see schedule.h.
#include "train/schedule.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace roformer::train {

void validate_schedule(const config::Config& c) {
  const config::ScheduleConfig& s = c.schedule;
  if (s.type != "wsd" && s.decay_fraction != config::ScheduleConfig().decay_fraction)
    config::invalid(fmt::format("schedule.decay_fraction = {} applies to schedule.type: wsd only (got {}); remove "
                                "it or set schedule.type: wsd", s.decay_fraction, s.type));
  if (s.min_lr > c.optimizer.lr)
    config::invalid(fmt::format("schedule.min_lr ({}) must be <= optimizer.lr ({})", s.min_lr, c.optimizer.lr));
}

namespace {

// The warmup a run of `total` steps runs: as configured, or half the run when it is longer.
int64_t fitted_warmup(int64_t warmup, int64_t total) { return warmup > total ? total / 2 : warmup; }

}  // namespace

LrSchedule::LrSchedule(const config::ScheduleConfig& schedule, double peak_lr, int64_t total_steps)
    : type_(schedule.type),
      warmup_(fitted_warmup(schedule.warmup_steps, total_steps)),
      peak_(peak_lr),
      min_(schedule.min_lr),
      total_(total_steps),
      configured_warmup_(schedule.warmup_steps),
      configured_decay_(std::llround(schedule.decay_fraction * static_cast<double>(total_steps))) {
  // The wsd decay takes the last round(decay_fraction x total) steps, at least one.
  const int64_t decay = type_ == "wsd" && total_ > 0 ? std::max<int64_t>(1, configured_decay_) : configured_decay_;
  decay_start_ = std::max<int64_t>(warmup_, total_steps - decay);
}

std::string LrSchedule::shortened() const {
  std::vector<std::string> what;
  if (warmup_ != configured_warmup_)
    what.push_back(fmt::format("schedule.warmup_steps {} clipped to {}", configured_warmup_, warmup_));
  if (type_ == "wsd" && total_ > 0 && configured_decay_ < 1)
    what.push_back(fmt::format("the wsd decay (schedule.decay_fraction of {} steps rounds to no step) given one step",
                               total_));
  if (what.empty()) return "";
  std::string listed;
  for (const auto& w : what) listed += (listed.empty() ? "" : "; ") + w;
  return fmt::format("train.steps {} is shorter than the schedule, which was shortened to fit the run: {} (the "
                     "learning rate of each step follows the shortened schedule; more train.steps, or a lower "
                     "schedule.warmup_steps, run it as configured)", total_, listed);
}

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
  // The last step at the peak (to rounding: warmup computes it as peak * W / W). A shortened schedule
  // says so itself (shortened()).
  if (!shortened().empty()) return "";
  if (type_ == "constant" || min_ >= peak_ || total_ <= 0 || lr(total_ - 1) < peak_ * (1 - 1e-9)) return "";
  // The decay runs from its start (the end of warmup; wsd: s0) to the last step, and goes below the
  // peak only with two or more steps there.
  // When the warmup reaches into the decay, a larger decay_fraction changes nothing.
  if (type_ == "wsd")
    return fmt::format("the learning rate never decays: the wsd decay gets {} of the {} train.steps (it starts at "
                       "step {}, schedule.warmup_steps {}); {}", total_ - decay_start_, total_, decay_start_, warmup_,
                       decay_start_ == warmup_ ? "lower schedule.warmup_steps or raise train.steps"
                                               : "raise schedule.decay_fraction or train.steps");
  return fmt::format("the learning rate never decays: train.steps {} ends {} schedule.warmup_steps {}, so the last "
                     "step still runs at the peak {}; lower schedule.warmup_steps (or raise train.steps) for the {} "
                     "decay to schedule.min_lr", total_, total_ > warmup_ ? "one step after" : "with", warmup_, peak_,
                     type_);
}

}  // namespace roformer::train
