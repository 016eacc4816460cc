// RUN_DIR/metrics.jsonl: one JSON record per logging step ("type": "train") and per evaluation
// ("type": "eval"). Appended and flushed line by line, so a killed run loses at most one line.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace roformer::train {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  explicit MetricsWriter(const std::string& path);
  // Throws roformer::Error naming the file and the reason when the record could not be written.
  void write(const nlohmann::json& record);
  // A resumed run: the file becomes the checkpoint's copy (the records up to its step), so it
  // continues as if the run had never stopped, and writing goes on at its end.
  void resume_from(const std::string& checkpoint_dir);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
  uint64_t whole_ = 0;  // bytes of the file that are whole records
};

// The last record of `type` ("train" or "eval") in a metrics.jsonl; null when the file is missing or
// holds none. Unparsable lines (one cut short by a killed run) are skipped.
nlohmann::json last_metrics_record(const std::string& path, const std::string& type);

}  // namespace roformer::train
