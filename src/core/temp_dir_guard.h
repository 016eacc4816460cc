// A temporary folder that goes away on every exit path, a stop signal included: the destructor
// removes it, and while a guard lives SIGINT, SIGTERM and SIGHUP remove it (with async-signal-safe system
// calls only) before the process dies of the signal as it would have. For commands that need
// scratch space (eval's prepared copy of raw text) and for staging folders (core/publish.h); up to
// kMaxGuards at a time (eval's folder and the staging folder of the prepare inside it), made and
// ended on one thread.
#pragma once

#include <filesystem>
#include <string>

namespace roformer::core {

class TempDirGuard {
 public:
  static constexpr int kMaxGuards = 4;
  explicit TempDirGuard(std::filesystem::path dir);  // `dir` need not exist yet
  ~TempDirGuard();
  TempDirGuard(const TempDirGuard&) = delete;
  TempDirGuard& operator=(const TempDirGuard&) = delete;
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
  char* slot_ = nullptr;  // its slot in the signal handler's table; null when the path did not fit
};

// A fresh folder TMPDIR/<prefix><pid>-<n> for a command's scratch files, guarded as above. The
// folders of that prefix left by processes that are gone (killed outright) are removed first. Throws
// roformer::Error naming TMPDIR when the folder cannot be made there (read-only, full, missing),
// with `what` (e.g. "eval's copy of the data") saying what it was for.
class ScratchDir {
 public:
  ScratchDir(const std::string& prefix, const std::string& what);
  const std::filesystem::path& path() const { return guard_.path(); }
  // The system's reason as an error naming TMPDIR, for a write into the folder that failed.
  [[noreturn]] void fail(const std::string& reason) const;

 private:
  std::string what_;
  TempDirGuard guard_;
};

}  // namespace roformer::core
