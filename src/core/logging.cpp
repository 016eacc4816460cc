// Console and run-log sinks through spdlog, with the per-rank level and prefix; see logging.h.
#include "core/logging.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include <spdlog/sinks/base_sink.h>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/error.h"

namespace roformer {

namespace {
int g_rank = 0;
std::string g_level = "info";

std::mutex g_failure_mu;
std::string g_failure;  // the first failed write to a log file

// A log file whose failed writes are recorded for the caller to act on (log_file_failure), instead
// of spdlog's error handler printing a line per message while the run goes on.
class CheckedFileSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit CheckedFileSink(const std::string& path) : path_(path), file_(path, /*truncate=*/false) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override { guarded([&] { file_.log(msg); }); }
  void flush_() override { guarded([&] { file_.flush(); }); }
  void set_pattern_(const std::string& pattern) override { file_.set_pattern(pattern); }

 private:
  template <class Fn>
  void guarded(Fn&& fn) {
    if (failed_) return;  // one failure is enough: the rest would be cut or lost alike
    try {
      fn();
    } catch (const spdlog::spdlog_ex& e) {
      failed_ = true;
      const int err = errno;
      std::lock_guard<std::mutex> lock(g_failure_mu);
      if (g_failure.empty())
        g_failure = "cannot write '" + path_ + "': " +
                    (err == ENOSPC ? std::string("no space left on the device") : err ? std::strerror(err) : e.what());
    }
  }
  std::string path_;
  spdlog::sinks::basic_file_sink_st file_;
  bool failed_ = false;
};

}  // namespace

std::string log_file_failure() {
  std::lock_guard<std::mutex> lock(g_failure_mu);
  return g_failure;
}

void setup_logging(const std::string& level) {
  auto logger = spdlog::get("roformer");
  if (!logger) {
    logger = spdlog::stderr_color_mt("roformer");
    spdlog::set_default_logger(logger);
  }
  g_level = level;
  auto lvl = spdlog::level::from_str(level);
  if (g_rank > 0) {
    logger->set_pattern("%^[%Y-%m-%d %H:%M:%S] [%l]%$ [rank " + std::to_string(g_rank) + "] %v");
    lvl = std::max(lvl, spdlog::level::warn);
  } else {
    logger->set_pattern("%^[%Y-%m-%d %H:%M:%S] [%l]%$ %v");
  }
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
}

void set_log_rank(int rank) {
  g_rank = rank;
  setup_logging(g_level);
}

void add_log_file(const std::string& path) {
  auto logger = spdlog::default_logger();
  try {
    auto sink = std::make_shared<CheckedFileSink>(path);
    sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    sink->set_level(spdlog::level::info);
    logger->sinks().push_back(sink);
  } catch (const spdlog::spdlog_ex& e) {
    throw Error("cannot open log file '" + path + "': " + e.what());
  }
}

}  // namespace roformer
