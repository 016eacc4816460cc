// Learning-rate schedules as pure functions of the step; see schedule.h.
#include "train/schedule.h"

#include <algorithm>
#include <cmath>

namespace roformer::train {

LrSchedule::LrSchedule(const config::ScheduleConfig& schedule, double peak_lr, int64_t total_steps)
    : type_(schedule.type),
      warmup_(schedule.warmup_steps),
      peak_(peak_lr),
      min_(schedule.min_lr),
      total_(total_steps) {}

double LrSchedule::lr(int64_t step) const {
  if (step < warmup_) return peak_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if (type_ == "constant") return peak_;
  const int64_t span = std::max<int64_t>(1, total_ - warmup_ - 1);
  const double p = std::clamp(static_cast<double>(step - warmup_) / static_cast<double>(span), 0.0, 1.0);
  if (type_ == "cosine") return min_ + (peak_ - min_) * 0.5 * (1.0 + std::cos(M_PI * p));
  return min_ + (peak_ - min_) * (1.0 - p);
}

}  // namespace roformer::train
