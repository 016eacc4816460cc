// The loop's accumulators between logging steps; see metrics_window.h.
#include "train/metrics_window.h"

#include <algorithm>

namespace roformer::train {

void MetricsWindow::add(const StepFigures& s) {
  seconds_ += s.seconds;
  tokens_ += s.tokens;
  ++steps_;
  if (s.synced) {
    loss_sum_ += s.loss;
    accuracy_sum_ += s.accuracy;
    ++synced_;
    last_loss_ = s.loss, last_accuracy_ = s.accuracy;
  }
  ema_step_s_ = ema_step_s_ == 0 ? s.seconds : 0.9 * ema_step_s_ + 0.1 * s.seconds;
  ++session_.steps;
  session_.tokens += s.tokens;
  session_.n_pred += s.n_pred;
  session_.seconds += s.seconds;
}

ProgressStats MetricsWindow::live(int64_t step, int64_t total, double lr) const {
  ProgressStats ps;
  ps.step = step;
  ps.total = total;
  ps.batch_loss = last_loss_;  // unsynced CUDA steps show the last values read back
  ps.batch_accuracy = last_accuracy_;
  ps.lr = lr;
  ps.tokens_per_s = seconds_ > 0 ? static_cast<double>(tokens_) / seconds_ : 0;
  ps.ms_per_step = steps_ > 0 ? 1000.0 * seconds_ / static_cast<double>(steps_) : 0;
  ps.eta_s = ema_step_s_ * static_cast<double>(total - step);
  return ps;
}

metrics::TrainRecord MetricsWindow::close(int64_t step, int64_t total, double lr) {
  const ProgressStats ps = live(step, total, lr);
  metrics::TrainRecord r;
  r.step = step;
  r.window_steps = synced_;
  const double n = static_cast<double>(std::max<int64_t>(synced_, 1));
  r.loss_avg = loss_sum_ / n;
  r.accuracy_avg = accuracy_sum_ / n;
  r.lr = lr;
  r.tokens_per_s = ps.tokens_per_s;
  r.ms_per_step = ps.ms_per_step;
  r.eta_s = ps.eta_s;
  seconds_ = 0, loss_sum_ = 0, accuracy_sum_ = 0;
  tokens_ = 0, steps_ = 0, synced_ = 0;
  return r;
}

}  // namespace roformer::train
