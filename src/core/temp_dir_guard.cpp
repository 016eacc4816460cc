// Temporary folders removed on every exit path; see temp_dir_guard.h.
#include "core/temp_dir_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <system_error>

#include <fmt/format.h>

#include "core/error.h"
#include "core/file.h"
#include "core/stale.h"

namespace roformer::core {

namespace {

// The guarded folders, for the handler: a slot is in use while its path is not empty (written before
// and cleared after the handler may read it; guards are made and ended on one thread).
char g_dirs[TempDirGuard::kMaxGuards][4096];
int g_active = 0;  // guards alive: the handler is installed while there are any
struct sigaction g_previous_int, g_previous_term, g_previous_hup;

struct LinuxDirent64 {
  ino64_t d_ino;
  off64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// Removes everything below the open directory `fd`, then closes it: open, getdents64, unlinkat and
// close only (async-signal-safe system calls). Depth is bounded; what cannot be removed stays.
void remove_below(int fd, int depth) {
  alignas(8) char buf[4096];
  // Passes over the directory while they remove something (entries removed shift what getdents
  // returns), a few at most: an entry that cannot be removed must not keep the handler spinning.
  for (int pass = 0; pass < 4; ++pass) {
    bool removed = false;
    ::lseek(fd, 0, SEEK_SET);
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
        off += d->d_reclen;
        const char* name = d->d_name;
        if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
        if (d->d_type == DT_DIR && depth < 8) {
          const int sub = ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0) remove_below(sub, depth + 1);
          removed |= ::unlinkat(fd, name, AT_REMOVEDIR) == 0;
        } else {
          removed |= ::unlinkat(fd, name, 0) == 0;
        }
      }
    }
    if (!removed) break;
  }
  ::close(fd);
}

extern "C" void on_signal(int sig) {
  for (auto& dir : g_dirs) {
    if (dir[0] == '\0') continue;
    const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) remove_below(fd, 0);
    ::rmdir(dir);
  }
  // Die of the signal as without the guard (the exit status says so).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace

TempDirGuard::TempDirGuard(std::filesystem::path dir) : dir_(std::move(dir)) {
  const std::string s = dir_.string();
  for (auto& slot : g_dirs) {
    if (slot[0] != '\0' || s.size() >= sizeof slot) continue;
    std::memcpy(slot + 1, s.c_str() + 1, s.size());  // the first byte last: the slot is in use from then on
    slot[0] = s.empty() ? '\0' : s[0];
    slot_ = &slot[0];
    break;
  }
  if (!slot_ || g_active++ > 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &g_previous_int);
  ::sigaction(SIGTERM, &sa, &g_previous_term);
  ::sigaction(SIGHUP, &sa, &g_previous_hup);
}

TempDirGuard::~TempDirGuard() {
  if (slot_) {
    if (--g_active == 0) {
      ::sigaction(SIGINT, &g_previous_int, nullptr);
      ::sigaction(SIGTERM, &g_previous_term, nullptr);
      ::sigaction(SIGHUP, &g_previous_hup, nullptr);
    }
    slot_[0] = '\0';
  }
  std::error_code ec;
  remove_tree(dir_, ec);
}

namespace {

std::filesystem::path temp_root() {
  std::error_code ec;
  const auto root = std::filesystem::temp_directory_path(ec);
  if (ec) {
    const char* env = std::getenv("TMPDIR");
    throw Error(fmt::format("the temporary folder {} is not usable: {}; set TMPDIR to a writable folder", env ? env : "/tmp",
                            ec.message()));
  }
  return root;
}

std::filesystem::path fresh_scratch(const std::string& prefix) {
  const std::filesystem::path root = temp_root();
  remove_dead_process_entries(root, prefix);
  std::random_device rd;
  return root / fmt::format("{}{}-{}", prefix, ::getpid(), rd());
}

}  // namespace

ScratchDir::ScratchDir(const std::string& prefix, const std::string& what) : what_(what), guard_(fresh_scratch(prefix)) {
  std::error_code ec;
  std::filesystem::create_directories(guard_.path(), ec);
  if (ec) fail(ec.message());
}

void ScratchDir::fail(const std::string& reason) const {
  throw Error(fmt::format("cannot write {} into {} (TMPDIR, or /tmp when unset): {}; set TMPDIR to a writable folder "
                          "with room", what_, guard_.path().parent_path().string(), reason));
}

}  // namespace roformer::core
