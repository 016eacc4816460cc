#include "train/metrics.h"

#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/checkpoint_store.h"

namespace roformer::train {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path), out_(path, std::ios::app) {
  if (!out_) throw Error(fmt::format("cannot open metrics file '{}' for writing", path));
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

void truncate_metrics(const std::string& path, int64_t max_step) {
  std::ifstream in(path);
  if (!in) return;
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      auto record = nlohmann::json::parse(line);
      if (record.value("step", int64_t{0}) > max_step) continue;
    } catch (const std::exception&) {
      continue;  // a line cut short by a killed process
    }
    kept += line + "\n";
  }
  in.close();
  write_file_atomic(path, kept);
}

}  // namespace roformer::train
