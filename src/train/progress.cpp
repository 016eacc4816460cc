// The console: the live bar, the log lines and the run's summary; see progress.h.
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

ConsoleSink::ConsoleSink(const std::string& mode, int64_t total)
    : bar_(mode == "bar" || (mode == "auto" && core::stderr_is_terminal())),
      total_(total),
      start_(std::chrono::steady_clock::now()) {}

double ConsoleSink::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ConsoleSink::update(const ProgressStats& s) {
  if (!bar_) return;
  const double frac = s.total > 0 ? static_cast<double>(s.step) / static_cast<double>(s.total) : 0.0;
  line_.draw(frac, fmt::format("{}/{} batch loss {:.4f} acc {:.3f} lr {:.2e} | {} tok/s {:.0f} ms/step | {} elapsed "
                               "ETA {}", s.step, s.total, s.batch_loss, s.batch_accuracy, s.lr,
                               format_rate(s.tokens_per_s), s.ms_per_step, format_duration(elapsed_s()),
                               format_duration(s.eta_s)));
}

void ConsoleSink::clear() { line_.clear(); }

void ConsoleSink::write(const metrics::TrainRecord& r) {
  clear();
  const std::string phase = r.phase ? fmt::format(" | phase {} (seq {})", *r.phase, r.seq_len)
                                    : std::string();
  spdlog::info("step {}/{} | mean of {} step{}: loss {:.4f} acc {:.4f} | lr {:.3e} | grad norm {:.3f} | {} tok/s | "
               "{:.0f} ms/step{} | {} elapsed | ETA {}", r.step, total_, r.window_steps, r.window_steps == 1 ? "" : "s",
               r.loss_avg, r.accuracy_avg.value_or(r.accuracy), r.lr, r.grad_norm, format_rate(r.tokens_per_s),
               r.ms_per_step, phase, format_duration(elapsed_s()), format_duration(r.eta_s));
}

void ConsoleSink::write(const metrics::EvalRecord& r) {
  clear();
  spdlog::info("eval step {} | MLM accuracy {:.4f} | top-5 {:.4f} | loss {:.4f} | perplexity {:.2f} | {} predicted "
               "tokens in {} sequences | {:.1f}s",
               r.step, r.accuracy, r.top5_accuracy, r.loss, r.perplexity, r.n_predicted, r.n_sequences, r.seconds);
}

// Three lines: time and throughput; the final figures (the last logging window's means, the last
// evaluation); memory and, on CUDA with a known peak, MFU.
void ConsoleSink::finish(const metrics::RunSummary& s) {
  clear();
  spdlog::info("summary: {} steps, {} of them in this session, in {} wall time | {} tok/s mean over the steps",
               s.step, s.session_steps, format_duration(s.wall_s), format_rate(s.tokens_per_s));
  const std::string train =
      s.last_train ? fmt::format("final train loss {:.4f} acc {:.4f} (mean of {} step{} to step {})",
                                 s.last_train->loss_avg, s.last_train->accuracy_avg.value_or(s.last_train->accuracy),
                                 s.last_train->window_steps, s.last_train->window_steps == 1 ? "" : "s",
                                 s.last_train->step)
                   : std::string("no logging step in this session");
  const std::string valid = s.last_eval ? fmt::format("validation loss {:.4f} acc {:.4f} (step {})", s.last_eval->loss,
                                                      s.last_eval->accuracy, s.last_eval->step)
                                        : std::string("no evaluation in this session");
  spdlog::info("summary: {} | {}", train, valid);
  for (const auto& p : s.phases)
    spdlog::info("summary: phase {} (steps {}-{}, {} x {} tokens per step): {} tok/s over {} step{}", p.phase,
                 p.first_step, p.last_step, p.global_batch, p.seq_len,
                 format_rate(p.seconds > 0 ? static_cast<double>(p.tokens) / p.seconds : 0.0), p.steps,
                 p.steps == 1 ? "" : "s");
  spdlog::info("summary: peak memory {:.1f} MiB ({}){}", static_cast<double>(s.peak_memory_bytes) / 1048576.0,
               s.peak_memory_kind, s.mfu ? fmt::format(" | MFU {:.1f}%", 100.0 * *s.mfu) : std::string());
}

}  // namespace roformer::train
