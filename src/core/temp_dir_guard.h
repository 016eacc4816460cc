// A temporary folder that goes away on every exit path, a stop signal included: the destructor
// removes it, and while a guard lives SIGINT and SIGTERM remove it (with async-signal-safe system
// calls only) before the process dies of the signal as it would have. For commands that need
// scratch space (eval's prepared copy of raw text); one guard at a time.
#pragma once

#include <filesystem>

namespace roformer::core {

class TempDirGuard {
 public:
  explicit TempDirGuard(std::filesystem::path dir);  // `dir` need not exist yet
  ~TempDirGuard();
  TempDirGuard(const TempDirGuard&) = delete;
  TempDirGuard& operator=(const TempDirGuard&) = delete;
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace roformer::core
