// Terminal progress: the live bar and the periodic log line; see progress.h.
#include "train/progress.h"

#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace roformer::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_rate(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

ProgressReporter::ProgressReporter(const std::string& mode) {
  bar_ = mode == "bar" || (mode == "auto" && core::stderr_is_terminal());
}

void ProgressReporter::update(const ProgressStats& s) {
  if (!bar_) return;
  const double frac = s.total > 0 ? static_cast<double>(s.step) / static_cast<double>(s.total) : 0.0;
  line_.draw(frac, fmt::format("{}/{} loss {:.4f} acc {:.3f} lr {:.2e} | {} tok/s {:.0f} ms/step ETA {}", s.step, s.total,
                               s.loss, s.accuracy, s.lr, format_rate(s.tokens_per_s), s.ms_per_step,
                               format_duration(s.eta_s)));
}

void ProgressReporter::clear() { line_.clear(); }

void ProgressReporter::log_line(const ProgressStats& s) {
  clear();
  spdlog::info("step {}/{} | loss {:.4f} | acc {:.4f} | lr {:.3e} | grad norm {:.3f} | {} tok/s | {:.0f} ms/step | ETA {}",
               s.step, s.total, s.loss, s.accuracy, s.lr, s.grad_norm, format_rate(s.tokens_per_s), s.ms_per_step,
               format_duration(s.eta_s));
}

}  // namespace roformer::train
