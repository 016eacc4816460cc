// Temporary folders removed on every exit path; see temp_dir_guard.h.
#include "core/temp_dir_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <system_error>

#include "core/file.h"

namespace roformer::core {

namespace {

char g_dir[4096];  // the guarded folder, for the handler (empty: none)
struct sigaction g_previous_int, g_previous_term;

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
  if (g_dir[0] != '\0') {
    const int fd = ::open(g_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) remove_below(fd, 0);
    ::rmdir(g_dir);
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
  if (s.size() < sizeof g_dir) {
    std::memcpy(g_dir, s.c_str(), s.size() + 1);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &g_previous_int);
    ::sigaction(SIGTERM, &sa, &g_previous_term);
  }
}

TempDirGuard::~TempDirGuard() {
  if (g_dir[0] != '\0') {
    ::sigaction(SIGINT, &g_previous_int, nullptr);
    ::sigaction(SIGTERM, &g_previous_term, nullptr);
    g_dir[0] = '\0';
  }
  std::error_code ec;
  remove_tree(dir_, ec);
}

}  // namespace roformer::core
