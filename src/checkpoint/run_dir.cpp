// Run-directory lock and the choice of the checkpoint a run starts from; see run_dir.h.
#include "checkpoint/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/file.h"
#include "checkpoint/run_layout.h"
#include "checkpoint/store.h"
#include "core/utf8.h"

namespace roformer::checkpoint {
namespace fs = std::filesystem;

namespace {

std::string read_small(int fd) {
  char buf[64] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

bool process_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

std::string names_of(const std::vector<std::string>& dirs) {
  std::string out;
  for (const auto& d : dirs) out += (out.empty() ? "" : ", ") + fs::path(d).filename().string();
  return out;
}

// The checkpoints after `chosen` in its directory (higher step; the names are zero-padded).
std::vector<std::string> checkpoints_after(const std::string& chosen) {
  const std::string name = fs::path(chosen).filename().string();
  std::vector<std::string> later;
  for (const auto& c : list_checkpoints(fs::path(chosen).parent_path().string()))
    if (fs::path(c).filename().string() > name) later.push_back(c);
  return later;
}

// Whether `chosen` (canonical; `given` as the user wrote it) is a checkpoint of the run directory's
// own checkpoints/. One the run set aside (checkpoints/abandoned-*/) is refused naming it, and so is
// another run's while this one holds checkpoints (`existing`).
bool is_own_checkpoint(const fs::path& chosen, const std::string& given, const std::string& run_dir,
                       const std::vector<std::string>& existing) {
  const std::string ckpt_dir = RunLayout(run_dir).checkpoints();
  std::error_code ec;
  if (fs::exists(ckpt_dir) && fs::equivalent(chosen.parent_path(), ckpt_dir, ec)) return true;
  const bool set_aside = fs::exists(ckpt_dir) && fs::equivalent(chosen.parent_path().parent_path(), ckpt_dir, ec) &&
                         chosen.parent_path().filename().string().rfind(kAbandonedPrefix, 0) == 0;
  if (set_aside)
    throw Error(fmt::format("--resume {} is a checkpoint this run set aside in {} when it resumed from an earlier "
                            "step (its history was left there); it is not resumed in place, over the run's current "
                            "checkpoints. Continue that history in a new directory: roformer train --run-dir NEW_DIR "
                            "--resume {}", given, chosen.parent_path().string(), given));
  if (!existing.empty())
    throw Error(fmt::format("--resume {} is a checkpoint of another run directory, and '{}' holds checkpoints of its "
                            "own (newest {}): continue from it into an empty --run-dir, or resume this directory's "
                            "run with --resume auto", given, run_dir, existing.back()));
  return false;
}

// `dir` absolute and normal, without a trailing separator ("runs/x/" is /cwd/runs/x).
fs::path absolute_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

// Opens (creating) the lock file `path` of `run_dir`. The lock is ours, a plain file: a symbolic link
// at its name is never followed (the process id would be written into the file it names, as the
// checkpoints' links are never followed either): the link itself is removed, its target untouched.
int open_lock_file(const std::string& path, const std::string& run_dir) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd >= 0) {
      struct stat st {};
      if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return fd;
      ::close(fd);
      throw Error(fmt::format("the lock file '{}' of run directory '{}' is not a plain file; remove it (roformer "
                              "makes its own) or use another --run-dir", path, run_dir));
    }
    if (errno != ELOOP)
      throw Error(fmt::format("cannot open the lock file '{}': {}", path, std::strerror(errno)));
    std::error_code ec;
    const std::string target = fs::read_symlink(path, ec).string();
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw Error(fmt::format("the lock file '{}' is a symbolic link (to '{}'), which roformer never follows, and it "
                              "cannot be removed: {}; remove it yourself", path, target, std::strerror(errno)));
    spdlog::warn("the lock file '{}' was a symbolic link (to '{}'): removed the link, never followed it ('{}' is "
                 "untouched); the lock is a plain file of the run directory", path, target, target);
  }
  throw Error(fmt::format("the lock file '{}' keeps being replaced by a symbolic link; remove it and use another "
                          "--run-dir", path));
}

}  // namespace

void check_run_dir_is_ours(const std::string& run_dir, const std::string& config_path) {
  const fs::path dir(run_dir);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;  // created by the run
  if (!fs::is_directory(dir, ec))
    throw Error(fmt::format("--run-dir '{}' exists and is not a directory; choose a new directory", run_dir));
  const RunLayout layout(run_dir);
  if (fs::exists(fs::symlink_status(layout.lock(), ec))) {  // a run directory: its files are the runs'
    if (!config_path.empty() && fs::equivalent(config_path, layout.config(), ec))
      throw Error(fmt::format("-c {} is the run directory's own config.yaml, which the run rewrites with the resolved "
                              "config; copy it first (cp {} my-config.yaml) and pass the copy with -c",
                              config_path, config_path));
    return;
  }
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) names.push_back(entry.path().filename().string());
  if (ec) throw Error(fmt::format("cannot read --run-dir '{}': {}", run_dir, ec.message()));
  if (names.empty()) return;
  const std::string listed = core::listed_names(names);
  throw Error(fmt::format("--run-dir '{}' holds files no roformer run wrote ({}); a run writes {} there and must not "
                          "overwrite or mix with them: give a new or empty directory (e.g. --run-dir {})",
                          run_dir, listed, RunLayout::kWrittenFiles, (dir / "run").string()));
}

RunDirLock::RunDirLock(const std::string& run_dir) : run_dir_(run_dir), path_(RunLayout(run_dir).lock()) {
  std::error_code ec;
  // The outermost folder this makes (run_dir or one above it), removed again on a refused start.
  for (fs::path p = absolute_dir(run_dir); !p.empty() && !fs::exists(fs::symlink_status(p, ec)); p = p.parent_path()) {
    created_from_ = p.string();
    if (p == p.parent_path()) break;
  }
  fs::create_directories(run_dir, ec);
  if (ec) throw Error(fmt::format("cannot create run directory '{}': {}", run_dir, ec.message()));
  for (;;) {
    created_lock_ = !fs::exists(fs::symlink_status(path_, ec));
    fd_ = open_lock_file(path_, run_dir);
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const std::string holder = read_small(fd_);
      ::close(fd_);
      fd_ = -1;
      throw Error(fmt::format("run directory '{}' is in use by another roformer process (pid {}); wait for it to end, "
                              "stop it (Ctrl-C or kill {} saves a checkpoint), or use another --run-dir",
                              run_dir, holder.empty() ? "unknown" : holder, holder.empty() ? "it" : holder));
    }
    // Locked the file a refused start removed on its way out (below): lock the one at the path now.
    struct stat held {}, now {};
    if (::fstat(fd_, &held) == 0 && ::lstat(path_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  const std::string previous = read_small(fd_);
  if (!previous.empty()) {
    const long pid = std::strtol(previous.c_str(), nullptr, 10);
    if (pid != static_cast<long>(::getpid()))
      spdlog::warn("taking over the lock of run directory '{}': process {} {}", run_dir, previous,
                   process_alive(pid) ? "is recorded in it but no longer holds it"
                                      : "held it and ended without releasing it (killed?)");
  }
  const std::string mine = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, mine.data(), mine.size(), 0) != static_cast<ssize_t>(mine.size()))
    spdlog::warn("cannot record this process in '{}': {}", path_, std::strerror(errno));
}

RunDirLock::~RunDirLock() {
  if (fd_ < 0) return;
  [[maybe_unused]] const int cleared = ::ftruncate(fd_, 0);  // a clean exit leaves no process id behind
  // A start refused before it wrote anything leaves no directory (or lock file) of its own making
  // behind: nothing but the lock was written, so the next try finds things as they were.
  std::error_code ec;
  fs::directory_iterator it(run_dir_, ec), end;
  bool only_lock = !ec;
  for (; only_lock && it != end; it.increment(ec)) only_lock = !ec && it->path().filename() == core::kRunLockFile;
  if (only_lock && created_lock_) {
    ::unlink(path_.c_str());
    if (!created_from_.empty())  // the folders it made, innermost first, as long as they are empty
      for (fs::path p = absolute_dir(run_dir_); ::rmdir(p.c_str()) == 0 && p != created_from_;)
        p = p.parent_path();
  }
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

CheckpointPlan plan_checkpoint(const std::string& run_dir, const CheckpointChoice& c) {
  const std::string ckpt_dir = RunLayout(run_dir).checkpoints();
  const auto existing = list_checkpoints(ckpt_dir);
  CheckpointPlan plan;
  if (c.overwrite && !c.resume.empty())
    throw Error("--overwrite starts a new run in the directory; it cannot be combined with --resume");

  if (c.resume.empty()) {
    if (!existing.empty() && !c.overwrite)
      throw Error(fmt::format("run directory '{}' already holds {} checkpoint(s) (newest {}): continue that run with "
                              "--resume auto, start it over with --overwrite (deletes its checkpoints and metrics), or "
                              "use another --run-dir", run_dir, existing.size(), existing.back()));
    plan.overwrite = c.overwrite;
    if (c.overwrite) plan.deleted = existing;
    const CheckpointsHeldForDeletion unread(plan.deleted, "--overwrite");  // refused now, before anything is written
    return plan;
  }

  if (c.resume == "auto") {
    if (existing.empty()) {
      if (!c.have_config)
        throw Error(fmt::format("--resume auto: no complete checkpoint in {} and no -c CONFIG to start a new run",
                                ckpt_dir));
      spdlog::info("--resume auto: no checkpoint in {} yet; starting a new run", run_dir);
      return plan;
    }
    std::vector<std::string> warnings;
    plan.resume = find_latest_valid_checkpoint(ckpt_dir, &warnings);
    if (plan.resume.empty()) {
      std::string list;
      for (const auto& w : warnings) list += "\n  " + w;
      throw Error(fmt::format("--resume auto: none of the {} checkpoint(s) in {} verifies, so there is nothing to "
                              "continue (nothing was changed):{}\nResume one by path once repaired, or start over "
                              "with --overwrite", existing.size(), ckpt_dir, list));
    }
    for (const auto& w : warnings) spdlog::warn("{}", w);
    plan.later = checkpoints_after(plan.resume);
    return plan;
  }

  auto check = verify_checkpoint(c.resume);
  std::error_code dir_ec;
  const RunLayout named(c.resume);
  if (!check.ok && fs::is_directory(named.checkpoints(), dir_ec))  // a run directory, not a checkpoint
    throw Error(fmt::format("--resume {} is a run directory, not a checkpoint: continue it with --run-dir {} --resume "
                            "auto (its newest complete checkpoint), or name one, e.g. --resume {}",
                            c.resume, c.resume, (fs::path(named.checkpoints()) / "step_N").string()));
  if (!check.ok)
    throw Error(fmt::format("cannot resume from {}: {}. `roformer train --resume auto` picks the newest complete "
                            "checkpoint instead", c.resume, check.problem));
  const fs::path chosen = fs::canonical(c.resume);
  plan.resume = c.resume;
  if (is_own_checkpoint(chosen, c.resume, run_dir, existing)) plan.later = checkpoints_after(chosen.string());
  return plan;
}

namespace {

// --overwrite: the earlier run's checkpoints, `latest`, metrics.jsonl and TensorBoard event files, not
// what else the user keeps there (abandoned-*, notes); one line says what went, counted.
void delete_earlier_run(const CheckpointPlan& plan, const std::string& run_dir) {
  std::error_code ec;
  const CheckpointsHeldForDeletion held(plan.deleted, "--overwrite");  // no reader gets one half deleted
  for (const auto& c : plan.deleted) {
    core::remove_tree(c, ec);
    if (ec) throw Error(fmt::format("--overwrite: cannot delete '{}': {}", c, ec.message()));
  }
  const RunLayout layout(run_dir);
  fs::remove(layout.latest(), ec);
  int64_t records = -1;  // metrics.jsonl's lines; -1: there was none
  if (std::ifstream metrics(layout.metrics()); metrics) {
    records = 0;
    for (std::string line; std::getline(metrics, line);) records += line.empty() ? 0 : 1;
  }
  if (records >= 0 && !fs::remove(layout.metrics(), ec) && ec)
    throw Error(fmt::format("--overwrite: cannot delete '{}': {}", layout.metrics(), ec.message()));
  const fs::path events = layout.tensorboard();
  const auto event_files = layout.event_files();
  for (const auto& name : event_files) {
    fs::remove(events / name, ec);
    if (ec) throw Error(fmt::format("--overwrite: cannot delete '{}': {}", (events / name).string(), ec.message()));
  }
  std::vector<std::string> gone;
  if (!plan.deleted.empty()) gone.push_back(fmt::format("{} checkpoint(s) ({})", plan.deleted.size(), names_of(plan.deleted)));
  if (records >= 0)
    gone.push_back(fmt::format("{} ({} record(s))", fs::path(layout.metrics()).filename().string(), records));
  if (!event_files.empty()) gone.push_back(fmt::format("{} TensorBoard event file(s)", event_files.size()));
  if (gone.empty()) {
    spdlog::info("--overwrite: {} held no checkpoints, metrics or event files of an earlier run; nothing deleted",
                 run_dir);
    return;
  }
  std::string list;
  for (size_t i = 0; i < gone.size(); ++i) list += (i == 0 ? "" : i + 1 == gone.size() ? " and " : ", ") + gone[i];
  spdlog::warn("--overwrite: deleted {} of the earlier run in {}", list, run_dir);
}

}  // namespace

void carry_out(const CheckpointPlan& plan, const std::string& run_dir) {
  std::error_code ec;
  if (plan.overwrite) delete_earlier_run(plan, run_dir);
  if (plan.later.empty()) return;
  const fs::path dir = fs::path(plan.later.front()).parent_path();
  const std::string chosen_name = fs::canonical(plan.resume).filename().string();
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  const fs::path aside = dir / fmt::format("{}{}-{}", kAbandonedPrefix, chosen_name, now);
  fs::create_directories(aside, ec);
  for (const auto& c : plan.later) {
    fs::rename(c, aside / fs::path(c).filename(), ec);
    if (ec) throw Error(fmt::format("cannot move checkpoint {} aside into {}: {}", c, aside.string(), ec.message()));
  }
  core::write_file_atomic((dir / kLatestFile).string(), chosen_name + "\n");
  spdlog::warn("resuming from {}: the run's later checkpoints ({}) belong to a history this run does not continue, "
               "so they were moved to {} (delete them when no longer needed)",
               chosen_name, names_of(plan.later), aside.string());
}

void check_checkpoints_writable(const std::string& checkpoints_dir) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(checkpoints_dir, ec))) return;
  std::string why = fs::is_directory(checkpoints_dir, ec) ? "" : "it is not a directory";
  if (why.empty()) {
    const std::string probe = (fs::path(checkpoints_dir) / fmt::format(".write-check-{}", ::getpid())).string();
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, "x", 1) != 1) why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::unlink(probe.c_str());
  }
  if (!why.empty())
    throw Error(fmt::format("cannot write checkpoints into '{}': {}; make it a writable directory (or choose another "
                            "--run-dir) before training, not at the first save", checkpoints_dir, why));
}

}  // namespace roformer::checkpoint
