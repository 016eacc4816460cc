// ReadProgress: rate and ETA from the bytes of the input files read (see read_progress.h).
#include "data/read_progress.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace roformer::data {

ReadProgress::ReadProgress(std::string what, bool enabled, int64_t total_files, int64_t total_bytes)
    : what_(std::move(what)), enabled_(enabled), tty_(core::stderr_is_terminal()), total_files_(total_files),
      total_bytes_(total_bytes), start_(clock::now()), last_(start_) {}

void ReadProgress::update(int64_t files_done, int64_t bytes, int64_t tokens, bool final) {
  if (!enabled_) return;
  const auto now = clock::now();
  if (!final && std::chrono::duration<double>(now - last_).count() < (tty_ ? 0.25 : 10.0)) return;
  last_ = now;
  const double secs = std::max(1e-9, std::chrono::duration<double>(now - start_).count());
  const double frac = total_bytes_ > 0 ? std::min(1.0, static_cast<double>(bytes) / total_bytes_) : 1.0;
  const double eta = frac > 0 ? secs * (1 - frac) / frac : 0;
  std::string text = fmt::format("{:5.1f}% {}/{} files {:.1f}/{:.1f} MB {:.1f} MB/s", 100 * frac, files_done, total_files_,
                                 bytes / 1e6, total_bytes_ / 1e6, bytes / 1e6 / secs);
  if (tokens >= 0) text += fmt::format(" {:.2f}M tokens/s", tokens / 1e6 / secs);
  text += fmt::format(" ETA {:.0f}s", eta);
  if (tty_) {
    bar_.draw(frac, what_ + ": " + text + " ");
    if (final) bar_.end_line();
  } else {
    spdlog::info("{}: {}", what_, text);
  }
}

}  // namespace roformer::data
