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

// A command's output folder (--out of `prepare`, `export`, `tokenizer train`) held for as long as
// the command writes it: made when missing, and locked (an exclusive flock on the folder), so that a
// second command into the same folder is refused at once, naming the first one's process, instead of
// both finishing and the later silently replacing the earlier's files. Take it before checking what
// the folder holds. When it ends, a folder it made that is empty again (the command failed, its
// staging folder gone) is removed: nothing of anyone else's. Where the file system has no flock,
// nothing is locked.
class OutputDirClaim {
 public:
  // `flag` names the folder in messages (e.g. "--out"). Throws roformer::Error when another process
  // holds it or it cannot be made.
  OutputDirClaim(const std::filesystem::path& out, const std::string& flag);
  ~OutputDirClaim();
  OutputDirClaim(const OutputDirClaim&) = delete;
  OutputDirClaim& operator=(const OutputDirClaim&) = delete;

 private:
  std::filesystem::path out_;
  int fd_ = -1;
  bool created_ = false;
};

// The process that holds a flock on the file or folder open as `fd` (from /proc/locks), 0 when it
// cannot be told.
long flock_holder(int fd);

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
