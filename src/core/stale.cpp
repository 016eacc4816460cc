// Left-overs of processes that are gone; see stale.h.
#include "core/stale.h"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "core/file.h"

namespace roformer::core {

void remove_dead_process_entries(const std::filesystem::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      std::error_code ignored;
      remove_tree(entry.path(), ignored);
    }
  }
}

}  // namespace roformer::core
