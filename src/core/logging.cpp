#include "core/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/error.h"

namespace roformer {

void setup_logging(const std::string& level) {
  auto logger = spdlog::get("roformer");
  if (!logger) {
    logger = spdlog::stderr_color_mt("roformer");
    spdlog::set_default_logger(logger);
  }
  logger->set_pattern("%^[%Y-%m-%d %H:%M:%S] [%l]%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
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
