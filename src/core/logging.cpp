// Console and run-log sinks through spdlog, with the per-rank level and prefix; see logging.h.
#include "core/logging.h"

#include <algorithm>
#include <string>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/error.h"

namespace roformer {

namespace {
int g_rank = 0;
std::string g_level = "info";
}  // namespace

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
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
    sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    sink->set_level(spdlog::level::info);
    logger->sinks().push_back(sink);
  } catch (const spdlog::spdlog_ex& e) {
    throw Error("cannot open log file '" + path + "': " + e.what());
  }
}

}  // namespace roformer
