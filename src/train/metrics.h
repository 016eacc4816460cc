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
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace roformer::train
