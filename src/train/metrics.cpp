// metrics.jsonl: one JSON record per line, flushed as written; see metrics.h.
#include "train/metrics.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/files.h"
#include "core/error.h"
#include "core/file.h"
#include "checkpoint/store.h"

namespace roformer::train {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path), out_(path, std::ios::app) {
  if (!out_) throw Error(fmt::format("cannot open metrics file '{}' for writing", path));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  whole_ = ec ? 0 : static_cast<uint64_t>(size);
}

nlohmann::json last_metrics_record(const std::string& path, const std::string& type) {
  std::ifstream in(path);
  nlohmann::json last;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto rec = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const auto it = rec.is_object() ? rec.find("type") : rec.end();
    if (it != rec.end() && it->is_string() && *it == type) last = std::move(rec);
  }
  return last;
}

void MetricsWriter::resume_from(const std::string& checkpoint_dir) {
  out_.close();
  core::write_file_atomic(path_, core::read_file((std::filesystem::path(checkpoint_dir) / checkpoint::files::kMetrics).string()));
  *this = MetricsWriter(path_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  errno = 0;
  const std::string line = record.dump() + '\n';
  out_ << line;
  out_.flush();
  if (out_) {
    whole_ += line.size();
  } else {
    const int err = errno;
    out_.close();
    std::error_code ec;  // the file keeps whole records only: a record cut short is taken back
    std::filesystem::resize_file(path_, whole_, ec);
    throw Error(fmt::format("cannot write '{}': {}", path_,
                            err == ENOSPC ? "no space left on the device" : err ? std::strerror(err) : "a write failed"));
  }
}

}  // namespace roformer::train
