// Staging folders and the held-back stop signals of a publish; see publish.h.
#include "core/publish.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/faults.h"
#include "core/file.h"
#include "core/stale.h"

namespace roformer::core {

namespace {

constexpr int kHeldSignals[3] = {SIGINT, SIGTERM, SIGHUP};
volatile sig_atomic_t g_held_signal = 0;  // the first signal that arrived while held, 0 if none

extern "C" void hold_signal(int sig) {
  if (g_held_signal == 0) g_held_signal = sig;
}

}  // namespace

StopSignalsHeld::StopSignalsHeld() {
  g_held_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = hold_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) ::sigaction(kHeldSignals[i], &sa, &previous_[i]);
}

StopSignalsHeld::~StopSignalsHeld() {
  for (int i = 0; i < 3; ++i) ::sigaction(kHeldSignals[i], &previous_[i], nullptr);
  if (const int sig = g_held_signal) {
    g_held_signal = 0;
    ::raise(sig);  // acted on now, by what was installed before
  }
}

namespace {

std::filesystem::path fresh_staging(const std::filesystem::path& out, const std::string& prefix) {
  remove_dead_process_entries(out, prefix);
  const std::filesystem::path dir = out / (prefix + std::to_string(::getpid()));
  remove_tree(dir.string());
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

StagingDir::StagingDir(const std::filesystem::path& out, const std::string& prefix)
    : out_(out), guard_(fresh_staging(out, prefix)) {}

void StagingDir::publish(const std::vector<std::filesystem::path>& old, const std::vector<std::string>& names) {
  const int64_t delay_ms = Faults::from_environment().publish_delay_ms;
  StopSignalsHeld held;
  for (const auto& path : old) std::filesystem::remove(path);
  // A test's stop signal lands here, between the removal of the old files and the renames.
  if (delay_ms > 0) {
    spdlog::info("publish: waiting {} ms between removing the old files and renaming the new ones "
                 "(ROFORMER_FAULT_PUBLISH_DELAY_MS)", delay_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  }
  for (const auto& name : names) std::filesystem::rename(path() / name, out_ / name);
}

}  // namespace roformer::core
