// RUN_DIR/metrics.jsonl: one JSON record per logging step ("type": "train") and per evaluation
// ("type": "eval"), the records of metrics/records.h. Appended and flushed line by line, so a killed
// run loses at most one line.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "metrics/sink.h"

namespace roformer::metrics {

class JsonlSink : public MetricsSink {
 public:
  JsonlSink() = default;  // writes nothing (the ranks other than 0)
  explicit JsonlSink(const std::string& path);
  // Throw roformer::Error naming the file and the reason when the record could not be written.
  void write(const TrainRecord& record) override;
  void write(const EvalRecord& record) override;
  void finish(const RunSummary&) override {}
  // A resumed run: the file becomes the checkpoint's copy `saved` (the records up to its step), so
  // it continues as if the run had never stopped, and writing goes on at its end.
  void resume_from(const std::string& saved);
  const std::string& path() const { return path_; }

 private:
  void write_line(const nlohmann::json& record);

  std::string path_;
  std::ofstream out_;
  uint64_t whole_ = 0;  // bytes of the file that are whole records
};

// The last record of `type` (TrainRecord::kType or EvalRecord::kType) in a metrics.jsonl; null when
// the file is missing or holds none. Unparsable lines (one cut short by a killed run) are skipped.
nlohmann::json last_metrics_record(const std::string& path, const std::string& type);

}  // namespace roformer::metrics
