// What the user sees while training: a live one-line bar on a terminal (redrawn every step) and a
// full log line every logging step; plain log lines only when stderr is not a terminal.
#pragma once

#include <cstdint>
#include <string>

#include "core/progress_bar.h"

namespace roformer::train {

struct ProgressStats {
  int64_t step = 0;  // steps done
  int64_t total = 0;
  double loss = 0;
  double accuracy = 0;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double ms_per_step = 0;
  double eta_s = 0;
};

class ProgressReporter {
 public:
  // mode: auto | bar | plain
  explicit ProgressReporter(const std::string& mode);
  // Redraws the bar (bar mode only).
  void update(const ProgressStats& s);
  // A full line through the logger; clears the bar first.
  void log_line(const ProgressStats& s);
  // Clears the bar so other log lines print cleanly.
  void clear();

 private:
  bool bar_ = false;       // draw the live bar (mode bar, or auto on a terminal)
  core::TerminalBar line_{24};
};

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12s"
std::string format_rate(double per_second);    // "12.3k", "1.05M"

}  // namespace roformer::train
