// Replacing a command's earlier output folder contents with new files, so that a failure or a stop
// signal never leaves a mix of old and new: every file is written into a staging folder first, and
// only renames and removals move it into place, with stop signals held back meanwhile. Used by
// `prepare` (a prepared corpus), `tokenizer train` (a tokenizer) and `export` (a Hugging Face export).
#pragma once

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "core/temp_dir_guard.h"

namespace roformer::core {

// While it lives, SIGINT, SIGTERM and SIGHUP are held back, whichever thread they reach: the first
// one that arrives is acted on when it ends, as it would have been then (the handler installed
// before, or the default action: the process dies of the signal). For a few renames only.
class StopSignalsHeld {
 public:
  StopSignalsHeld();
  ~StopSignalsHeld();
  StopSignalsHeld(const StopSignalsHeld&) = delete;
  StopSignalsHeld& operator=(const StopSignalsHeld&) = delete;

 private:
  struct sigaction previous_[3];
};

// A folder OUT/<prefix><pid> for this process's new files. Made fresh; the staging folders of
// processes that are gone (killed outright) are removed first; this one goes away on every exit
// path, a stop signal included (TempDirGuard).
class StagingDir {
 public:
  StagingDir(const std::filesystem::path& out, const std::string& prefix);
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  const std::filesystem::path& path() const { return guard_.path(); }
  std::filesystem::path operator/(const std::string& name) const { return guard_.path() / name; }

  // Moves the staged files into OUT, stop signals held (StopSignalsHeld): removes `old` in order
  // (list first the file whose presence marks OUT complete, so that it never looks complete with a
  // mix), then renames `names` in order (the marker last). Throws std::filesystem::filesystem_error
  // when the system refuses a removal or rename (OUT then has no marker, so it does not look complete).
  void publish(const std::vector<std::filesystem::path>& old, const std::vector<std::string>& names);

 private:
  std::filesystem::path out_;
  TempDirGuard guard_;
};

}  // namespace roformer::core
