// What the user sees while training (the console, one of the run's metric sinks): a live one-line
// bar on a terminal, redrawn every step, with the figures of the last batch read back; a full log
// line per logging step with the logging window's means; a line per evaluation; and the summary at
// the end. Plain log lines only when stderr is not a terminal. The names say which figure is which:
// the bar's "batch loss" is one batch's, the log line's "mean of N steps" the window's.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/progress_bar.h"
#include "metrics/sink.h"

namespace roformer::train {

// The live bar's figures after a step: the last values read back (one batch), the window's
// throughput, the time left.
struct ProgressStats {
  int64_t step = 0;  // steps done
  int64_t total = 0;
  double batch_loss = 0;
  double batch_accuracy = 0;
  double lr = 0;
  double tokens_per_s = 0;
  double ms_per_step = 0;
  double eta_s = 0;
};

class ConsoleSink : public metrics::MetricsSink {
 public:
  // mode: auto | bar | plain. total: train.steps. Elapsed time counts from here.
  ConsoleSink(const std::string& mode, int64_t total);
  // Redraws the bar (bar mode only).
  void update(const ProgressStats& s);
  // Clears the bar so other log lines print cleanly.
  void clear();

  // Log lines (through the logger, so also in train.log); each clears the bar first.
  void write(const metrics::TrainRecord& record) override;
  void write(const metrics::EvalRecord& record) override;
  void finish(const metrics::RunSummary& summary) override;

 private:
  double elapsed_s() const;

  bool bar_ = false;  // draw the live bar (mode bar, or auto on a terminal)
  int64_t total_ = 0;
  std::chrono::steady_clock::time_point start_;
  core::TerminalBar line_{24};
};

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12s"
std::string format_rate(double per_second);    // "12.3k", "1.05M"

}  // namespace roformer::train
