// Where a run's records go: one interface that metrics.jsonl (metrics/jsonl.h), TensorBoard
// (train/tensorboard_sink.h) and the console (train/progress.h) implement. The run sends each
// record once, to every sink in turn (torchtitan's metrics processor and its loggers).
#pragma once

#include "metrics/records.h"

namespace roformer::metrics {

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // Throw roformer::Error naming the file when a write fails (the run stops, saying how to go on).
  virtual void write(const TrainRecord& record) = 0;
  virtual void write(const EvalRecord& record) = 0;
  // The run trained to its last step (not sent when a signal stops it).
  virtual void finish(const RunSummary& summary) = 0;
};

}  // namespace roformer::metrics
