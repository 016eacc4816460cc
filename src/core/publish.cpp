// Staging folders and the held-back stop signals of a publish; see publish.h.
#include "core/publish.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "core/error.h"
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

long flock_holder(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return 0;
  // Lines such as "1: FLOCK  ADVISORY  WRITE 15415 fe:00:10952914 0 EOF" (pid, major:minor:inode).
  const std::string id = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev), st.st_ino);
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string number, kind, mode, access, where;
    long pid = 0;
    if (fields >> number >> kind >> mode >> access >> pid >> where && kind == "FLOCK" && where == id && pid > 0 &&
        pid != static_cast<long>(::getpid()))
      return pid;
  }
  return 0;
}

OutputDirClaim::OutputDirClaim(const std::filesystem::path& out, const std::string& flag) : out_(out) {
  std::error_code ec;
  created_ = std::filesystem::create_directories(out, ec);
  if (ec) throw Error(fmt::format("cannot create {} {}: {}", flag, out.string(), ec.message()));
  fd_ = ::open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw Error(fmt::format("cannot open {} {}: {}", flag, out.string(), std::strerror(errno)));
  int rc;
  while ((rc = ::flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
  }
  if (rc == 0 || errno != EWOULDBLOCK) return;  // locked, or no flock on this file system
  const long holder = flock_holder(fd_);
  ::close(fd_);
  fd_ = -1;
  created_ = false;  // the other process's folder now
  throw Error(fmt::format("{} {} is being written by another roformer process ({}); wait for it to end, or choose "
                          "another directory", flag, out.string(), holder > 0 ? fmt::format("pid {}", holder) : "pid unknown"));
}

OutputDirClaim::~OutputDirClaim() {
  if (fd_ < 0) return;
  std::error_code ec;
  if (created_) std::filesystem::remove(out_, ec);  // only when empty: the command wrote nothing there
  ::close(fd_);
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
