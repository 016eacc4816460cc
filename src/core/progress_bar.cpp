// The terminal progress bar shared by `roformer prepare` and `roformer train`; see progress_bar.h.
#include "core/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace roformer::core {

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) != 0; }

void TerminalBar::draw(double fraction, const std::string& text) {
  const double frac = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(frac * width_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(static_cast<size_t>(width_), '.');
  // \r returns to the line start, \033[K erases what a longer previous line left behind.
  std::fprintf(stderr, "\r\033[K[%s] %s", bar.c_str(), text.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void TerminalBar::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

void TerminalBar::end_line() {
  if (!drawn_) return;
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace roformer::core
