// roformer: masked-language-model pretraining of RoFormer encoders.
//
// Thin entry point: builds the CLI from the registered subcommands, runs the chosen one, and turns
// user errors (roformer::Error) into one log line and a non-zero exit, without a stack trace.
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdlib>
#include <exception>

#include "app/commands.h"
#include "core/error.h"
#include "core/logging.h"

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) write() raises SIGXFSZ, which would kill the process without a
  // word; ignored, the write fails with EFBIG and the error is reported like a full disk.
  std::signal(SIGXFSZ, SIG_IGN);
  roformer::setup_logging(std::getenv("ROFORMER_LOG_LEVEL") ? std::getenv("ROFORMER_LOG_LEVEL") : "info");
  CLI::App app{"roformer: masked-language-model pretraining of RoFormer encoders (LibTorch)"};
  app.set_version_flag("--version", std::string("roformer ") + ROFORMER_VERSION);
  app.require_subcommand(1);
  roformer::app::register_config_commands(app);
  roformer::app::register_train_commands(app);
  roformer::app::register_tool_commands(app);
  roformer::app::register_bench_commands(app);
  roformer::app::register_data_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); a usage error is a user error like any other: exit 1,
    // not CLI11's own codes (105, 106, ...).
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const roformer::Error& e) {
    spdlog::error("{}", e.what());
    return 1;
  } catch (const c10::OutOfMemoryError& e) {
    // The device is too small for the configured step: a setting to change, not an internal error.
    const std::string what = e.what_without_backtrace();
    spdlog::error("out of device memory ({}): lower train.batch_size (raise train.grad_accum to keep the global "
                  "batch), set model.gradient_checkpointing: true, or shorten data.max_seq_len",
                  what.substr(0, what.find('.')));
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    return 2;
  }
  return 0;
}
