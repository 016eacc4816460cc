// roformer: masked-language-model pretraining of RoFormer encoders.
//
// Thin entry point: builds the CLI from the registered subcommands, runs the chosen one, and turns
// user errors (roformer::Error) into one log line and a non-zero exit, without a stack trace.
#include <c10/util/Exception.h>
#include <unistd.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "app/commands.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/spelling.h"

namespace {

// What a command printed must reach its reader: a full device or a closed pipe behind stdout is a
// failed command (exit 1), not a silent success. Flushes and reports the first failed write.
int check_stdout(int code) {
  std::cout.flush();
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;  // retries what is buffered: errno says why it fails
  int err = errno;
  if (!flush_failed && std::cout && !std::ferror(stdout)) return code;
  // An earlier write failed (std::endl flushes at once) and its errno is gone: one more byte says why.
  if (err == 0 && ::write(STDOUT_FILENO, "\n", 1) < 0) err = errno;
  spdlog::error("cannot write the command's output to standard output: {}; nothing printed can be trusted, so "
                "run it again with the output going where there is room",
                err == ENOSPC ? "no space left on the device" : err ? std::strerror(err) : "a write failed (a full device or a closed reader)");
  return 1;
}

// A mistyped command word (`roformer trian`, `roformer tokenizer trian`): CLI11 would only say that
// a subcommand is required, or that an argument was not expected. Follows the command words of argv
// down the tree and names the first unknown one with the nearest known command. Words after the
// first option, and a command's own positional arguments, are left to CLI11.
void check_command_words(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path = "roformer";
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    const auto subs = at->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return;
    std::vector<std::string> names;
    for (const CLI::App* sub : subs) names.push_back(sub->get_name());
    if (const auto known = std::find(names.begin(), names.end(), argv[i]); known != names.end()) {
      at = subs[static_cast<size_t>(known - names.begin())];
      path += " " + *known;
      continue;
    }
    if (!at->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty()) return;
    throw roformer::Error(fmt::format("unknown command '{} {}'; did you mean '{} {}'? (`{} --help` lists the commands)",
                                      path, argv[i], path, roformer::core::nearest(argv[i], names), path));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) write() raises SIGXFSZ, which would kill the process without a
  // word; ignored, the write fails with EFBIG and the error is reported like a full disk.
  std::signal(SIGXFSZ, SIG_IGN);
  // Output into a file or pipe is held until exit (up to 1 MiB), so a failed write is met by the
  // final flush, which can say why (check_stdout); a terminal keeps its line buffering.
  static char stdout_buffer[1 << 20];
  if (!::isatty(STDOUT_FILENO)) std::setvbuf(stdout, stdout_buffer, _IOFBF, sizeof stdout_buffer);
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
    check_command_words(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); a usage error is a user error like any other: exit 1,
    // not CLI11's own codes (105, 106, ...).
    return app.exit(e) == 0 ? check_stdout(0) : 1;
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
  } catch (const std::bad_alloc&) {
    // The system refused memory (too little RAM, or a limit such as ulimit -v): the environment's
    // answer, like a full disk, not a fault in the program.
    spdlog::error("out of memory: the system refused an allocation (too little free RAM, or a memory limit such as "
                  "ulimit -v); free memory or raise the limit, or ask for less at once (train.batch_size, "
                  "data.num_workers, prepare --threads)");
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the system refuses (too long, not permitted, no space, a file where a folder should be):
    // the environment's answer about a path, which the user can act on.
    const auto& c = e.code();
    const std::string path = e.path1().empty() ? std::string() : " '" + e.path1().string() + "'";
    spdlog::error("cannot use the path{}: {}{}", path,
                  c == std::errc::filename_too_long ? "the name is longer than the system allows (shorten it)"
                  : c == std::errc::no_space_on_device ? "no space left on the device (free some, or choose another place)"
                                                       : c.message(),
                  c == std::errc::filename_too_long || c == std::errc::no_space_on_device ? "" : " (check the path and its permissions)");
    return 1;
  } catch (const std::system_error& e) {
    const auto& c = e.code();
    // Resources the system would not give (threads): too many asked for, or a tight limit.
    if (c == std::errc::resource_unavailable_try_again) {
      spdlog::error("the system refused a resource ({}): lower data.num_workers, prepare --threads or train.num_threads, "
                    "or raise the process limits (ulimit -u)", e.what());
      return 1;
    }
    // A failed write of printed output (fmt::print throws): a full device or a closed reader.
    if (c == std::errc::no_space_on_device || c == std::errc::broken_pipe || c == std::errc::io_error) {
      spdlog::error("cannot write the command's output: {}", c == std::errc::no_space_on_device
                                                                 ? "no space left on the device"
                                                                 : c.message());
      return 1;
    }
    spdlog::error("internal error: {}", e.what());
    return 2;
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    return 2;
  }
  return check_stdout(0);
}
