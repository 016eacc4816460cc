// metrics.jsonl: one JSON record per line, flushed as written; see metrics.h.
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

nlohmann::json last_metrics_record(const std::string& path, const std::string& type) {
  std::ifstream in(path);
  nlohmann::json last;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto rec = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (rec.is_object() && rec.value("type", "") == type) last = std::move(rec);
  }
  return last;
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

}  // namespace roformer::train
