// TFRecord framing and the event-file writer; see event_file.h.
#include "tensorboard/event_file.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/run_dir_names.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "tensorboard/summary.h"

namespace roformer::tensorboard {
namespace fs = std::filesystem;

namespace {

void append_le32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

// The <seconds> field of an event file name; -1 when the name has none.
int64_t name_seconds(const std::string& name) {
  const std::string rest = name.substr(std::string(core::kEventFilePrefix).size());
  char* end = nullptr;
  const long long s = std::strtoll(rest.c_str(), &end, 10);
  return end != rest.c_str() && (*end == '.' || *end == '\0') ? s : -1;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string host(buf);
  std::replace(host.begin(), host.end(), '/', '_');
  return host;
}

// Creates the directory, then the new file; the directory is named in the error.
core::AppendFile create_event_file(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create the TensorBoard directory '{}': {}", dir, ec.message()));
  const auto now = static_cast<int64_t>(wall_time_now());
  const std::string name = new_event_file_name(list_event_files(dir), now, host_name(), ::getpid());
  return core::AppendFile::create_new((fs::path(dir) / name).string(), "TensorBoard event file");
}

}  // namespace

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = core::crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  const uint64_t length = data.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xFFu));
  append_le32(out, masked_crc32c(out));
  out.append(data.data(), data.size());
  append_le32(out, masked_crc32c(data));
  return out;
}

std::vector<std::string> list_event_files(const std::string& dir) {
  return core::list_files_starting_with(dir, core::kEventFilePrefix);
}

std::string new_event_file_name(const std::vector<std::string>& existing, int64_t now_seconds,
                                const std::string& host, int64_t pid) {
  int64_t seconds = now_seconds;
  for (const auto& name : existing) seconds = std::max(seconds, name_seconds(name) + 1);
  return fmt::format("{}{:010d}.{}.{}", core::kEventFilePrefix, seconds, host, pid);
}

EventFileWriter::EventFileWriter(const std::string& dir) : file_(create_event_file(dir)) {
  add(file_version_event(wall_time_now()));
  flush();
}

EventFileWriter::~EventFileWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    spdlog::warn("{}", e.what());
  }
}

void EventFileWriter::add(const std::string& event) { pending_ += frame_record(event); }

void EventFileWriter::flush() {
  if (pending_.empty()) return;
  const std::string bytes = std::move(pending_);
  pending_.clear();
  file_.append(bytes);
}

void EventFileWriter::close() {
  flush();
  file_.close();
}

}  // namespace roformer::tensorboard
