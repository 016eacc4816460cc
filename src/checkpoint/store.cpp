// Crash-safe checkpoint directories: atomic saves with a manifest, verification, listing, pruning;
// see checkpoint/store.h.
#include "checkpoint/store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/faults.h"
#include "core/file.h"
#include "core/json_read.h"
#include "core/hash.h"
#include "checkpoint/files.h"
#include "checkpoint/run_layout.h"

namespace roformer::checkpoint {
namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = files::kManifest;

bool parse_step_name(const std::string& name, int64_t* step) {
  if (name.rfind("step_", 0) != 0 || name.size() <= 5) return false;
  for (size_t i = 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  *step = std::stoll(name.substr(5));
  return true;
}

}  // namespace

std::string checkpoint_name(int64_t step) { return fmt::format("step_{:08d}", step); }

CheckpointWriter::CheckpointWriter(const std::string& checkpoints_dir, int64_t step)
    : checkpoints_dir_(checkpoints_dir), final_name_(checkpoint_name(step)) {
  std::error_code ec;
  fs::create_directories(checkpoints_dir_, ec);
  if (ec) throw Error(fmt::format("cannot create checkpoint directory '{}': {}", checkpoints_dir_, ec.message()));
  tmp_dir_ = (fs::path(checkpoints_dir_) / fmt::format(".tmp-{}-{}", final_name_, ::getpid())).string();
  core::remove_tree(tmp_dir_, ec);
  fs::create_directories(tmp_dir_, ec);
  if (ec) throw Error(fmt::format("cannot create '{}': {}", tmp_dir_, ec.message()));
}

CheckpointWriter::~CheckpointWriter() {
  if (!committed_) {
    std::error_code ec;
    core::remove_tree(tmp_dir_, ec);
  }
}

std::string CheckpointWriter::path(const std::string& name) const { return (fs::path(tmp_dir_) / name).string(); }

std::string CheckpointWriter::commit() {
  nlohmann::json files = nlohmann::json::object();
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(tmp_dir_))
    if (entry.is_regular_file()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const std::string p = path(name);
    core::sync_to_disk(p, false);
    files[name] = {{"size", fs::file_size(p)}, {"checksum", core::file_checksum(p)}};
  }
  nlohmann::json manifest = {{"format", "roformer-checkpoint"}, {"version", 1}, {"files", files}};
  core::write_file_checked(path(kManifest), manifest.dump(2) + "\n");
  core::sync_to_disk(path(kManifest), false);
  core::sync_to_disk(tmp_dir_, true);

  const fs::path final_dir = fs::path(checkpoints_dir_) / final_name_;
  std::error_code ec;
  if (fs::exists(final_dir)) core::remove_tree(final_dir, ec);  // a re-save of the same step
  fs::rename(tmp_dir_, final_dir, ec);
  if (ec) throw Error(fmt::format("cannot move checkpoint into place at '{}': {}", final_dir.string(), ec.message()));
  committed_ = true;
  core::sync_to_disk(checkpoints_dir_, true);
  core::write_file_atomic((fs::path(checkpoints_dir_) / kLatestFile).string(), final_name_ + "\n");
  return final_dir.string();
}

std::vector<ManifestEntry> parse_manifest(const std::string& text) {
  // No advice in the messages: verify_checkpoint's callers say what to do with a damaged checkpoint.
  const nlohmann::json manifest = core::parse_json(text, kManifest, "");
  const core::JsonReader files = core::JsonReader(manifest, kManifest, "").object("files");
  std::vector<ManifestEntry> entries;
  for (const auto& name : files.keys()) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos)
      throw Error(fmt::format("manifest.json lists '{}', which is not a file name inside the checkpoint", name));
    const core::JsonReader info = files.object(name);
    const int64_t size = info.count("size");  // bytes
    entries.push_back({name, static_cast<uint64_t>(size), info.string("checksum")});
  }
  return entries;
}

CheckpointCheck verify_checkpoint(const std::string& dir) {
  CheckpointCheck result;
  const fs::path manifest_path = fs::path(dir) / kManifest;
  if (!fs::is_directory(dir)) {
    result.problem = "not a directory";
    return result;
  }
  if (!fs::exists(manifest_path)) {
    result.problem = "no manifest.json (the save did not complete)";
    return result;
  }
  std::vector<ManifestEntry> entries;
  try {
    entries = parse_manifest(core::read_file(manifest_path.string(), "manifest"));
  } catch (const Error& e) {
    result.problem = e.what();
    return result;
  }
  // Every save writes these (checkpointer.cpp): a manifest without one of them (an empty list, a
  // hand-edited one) vouches for nothing the resume needs.
  const auto listed = [&](const std::string& name) {
    return std::any_of(entries.begin(), entries.end(), [&](const ManifestEntry& e) { return e.name == name; });
  };
  for (const char* required : {files::kModel, files::kOptimizer, files::kTrainerState, files::kConfig})
    if (!listed(required)) {
      result.problem = fmt::format("manifest.json does not list {}, which every checkpoint holds (damaged or edited)",
                                   required);
      return result;
    }
  if (std::none_of(std::begin(files::kTokenizerFiles), std::end(files::kTokenizerFiles), listed)) {
    result.problem = "manifest.json lists no tokenizer (tokenizer.model or tokenizer.json), which every checkpoint "
                     "holds (damaged or edited)";
    return result;
  }
  for (const auto& entry : entries) {
    const fs::path p = fs::path(dir) / entry.name;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) {
      result.problem = fmt::format("{} is missing", entry.name);
      return result;
    }
    const auto size = fs::file_size(p, ec);
    if (size != entry.size) {
      result.problem = fmt::format("{} has {} bytes, the manifest says {} (truncated?)", entry.name, size, entry.size);
      return result;
    }
    if (core::file_checksum(p.string()) != entry.checksum) {
      result.problem = fmt::format("{} does not match its checksum (corrupted)", entry.name);
      return result;
    }
  }
  result.ok = true;
  return result;
}

std::vector<std::string> list_checkpoints(const std::string& checkpoints_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(checkpoints_dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(checkpoints_dir, ec)) {
    int64_t step = 0;
    if (entry.is_directory() && parse_step_name(entry.path().filename().string(), &step))
      found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

std::string find_latest_valid_checkpoint(const std::string& checkpoints_dir, std::vector<std::string>* warnings,
                                         int64_t max_step) {
  auto all = list_checkpoints(checkpoints_dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    int64_t step = 0;
    if (parse_step_name(fs::path(*it).filename().string(), &step) && step > max_step) continue;
    auto check = verify_checkpoint(*it);
    if (check.ok) return *it;
    if (warnings) warnings->push_back(fmt::format("skipping checkpoint {}: {}", *it, check.problem));
  }
  return "";
}

std::string resolve_checkpoint_dir(const std::string& path) {
  if (!fs::exists(path))
    throw Error(fmt::format("checkpoint '{}' does not exist; pass a checkpoint directory "
                            "(RUN_DIR/checkpoints/step_N) or a run directory", path));
  if (fs::exists(fs::path(path) / files::kManifest) || fs::exists(fs::path(path) / files::kTrainerState)) return path;
  for (const auto& dir : {fs::path(RunLayout(path).checkpoints()), fs::path(path)}) {
    if (!list_checkpoints(dir.string()).empty()) {
      std::vector<std::string> warnings;
      auto found = find_latest_valid_checkpoint(dir.string(), &warnings);
      if (found.empty())
        throw Error(fmt::format("no complete, intact checkpoint under '{}': {}", path,
                                warnings.empty() ? "" : warnings.front()));
      // Never fall back silently: the figures would belong to another step than the user expects.
      for (const auto& w : warnings) spdlog::warn("{}", w);
      if (!warnings.empty())
        spdlog::warn("using the older checkpoint {}: the newest one is damaged (`roformer inspect {}` shows why)",
                     found, path);
      return found;
    }
  }
  throw Error(fmt::format("'{}' is neither a checkpoint (no manifest.json) nor a run directory with checkpoints", path));
}

void prune_checkpoints(const std::string& checkpoints_dir, int64_t keep_last, const std::string& keep) {
  std::error_code ec;
  auto all = list_checkpoints(checkpoints_dir);
  for (const auto& entry : fs::directory_iterator(checkpoints_dir, ec)) {
    const std::string name = entry.path().filename().string();
    // Temporary directories (.tmp-step_N-PID) left by killed processes; never a live process's save.
    if (name.rfind(".tmp-", 0) != 0 || !entry.is_directory()) continue;
    const long pid = std::strtol(name.substr(name.rfind('-') + 1).c_str(), nullptr, 10);
    if (pid > 0 && pid != static_cast<long>(::getpid()) && ::kill(static_cast<pid_t>(pid), 0) == 0) continue;
    core::remove_tree(entry.path(), ec);
  }
  const std::string keep_name = keep.empty() ? "" : fs::path(keep).filename().string();
  for (size_t i = 0; i + static_cast<size_t>(std::max<int64_t>(keep_last, 1)) < all.size(); ++i) {
    const fs::path victim(all[i]);
    if (victim.filename().string() == keep_name) continue;
    // A reader holds it (CheckpointReadLock): left for a later save to prune. The exclusive lock is
    // held until it is gone, so a reader that opened it meanwhile finds it renamed away.
    const int fd = ::open(victim.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      ::close(fd);
      continue;
    }
    // Renamed away first, in one step, then deleted: a reader of the run directory (eval, export)
    // sees a checkpoint whole or not at all, never one half deleted.
    const fs::path away = victim.parent_path() / fmt::format(".tmp-pruned-{}-{}", victim.filename().string(), ::getpid());
    std::error_code renamed;
    fs::rename(victim, away, renamed);
    core::remove_tree(renamed ? victim : away, ec);
    if (fd >= 0) ::close(fd);
  }
}

CheckpointReadLock::CheckpointReadLock(const std::string& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0)
    throw Error(fmt::format("checkpoint {} cannot be opened: {}", dir, std::strerror(errno)));
  // An exclusive lock is held while a checkpoint is deleted (a prune, --overwrite): a moment. One held
  // longer is another program's: waited for, said, and given up after a bound.
  const int64_t wait_ms = core::Faults::from_environment().read_lock_wait_ms;
  const auto start = std::chrono::steady_clock::now();
  bool said = false;
  int rc;
  while ((rc = ::flock(fd_, LOCK_SH | LOCK_NB)) != 0 && (errno == EINTR || errno == EWOULDBLOCK)) {
    if (errno == EINTR) continue;
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    if (waited.count() >= wait_ms) {
      ::close(fd_);
      fd_ = -1;
      throw Error(fmt::format("checkpoint {} stayed locked by another process for {:.0f} s (roformer holds such a lock "
                              "only while deleting a checkpoint): find the holder with `fuser -v {}`, then try again, "
                              "or name another checkpoint", dir, static_cast<double>(wait_ms) / 1000.0, dir));
    }
    if (!said)
      spdlog::info("checkpoint {} is locked by another process (a run pruning it or `train --overwrite` deleting it, "
                   "or another program): waiting up to {:.0f} s for it", dir, static_cast<double>(wait_ms) / 1000.0);
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (rc != 0) return;  // no flock here (ENOLCK, EINVAL): read unlocked
  // Opened just before a prune renamed it away: the path is gone or names another directory now.
  struct stat held {}, now {};
  if (::fstat(fd_, &held) != 0 || ::stat(dir.c_str(), &now) != 0 || held.st_ino != now.st_ino ||
      held.st_dev != now.st_dev) {
    ::close(fd_);
    fd_ = -1;
    throw Error(fmt::format("checkpoint {} was pruned while it was opened", dir));
  }
}

CheckpointReadLock::~CheckpointReadLock() {
  if (fd_ >= 0) ::close(fd_);
}

CheckpointsHeldForDeletion::CheckpointsHeldForDeletion(const std::vector<std::string>& dirs, const std::string& why) {
  for (const auto& dir : dirs) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;  // gone already
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      ::close(fd);
      release();
      throw Error(fmt::format("{} would delete checkpoint {} while another process reads it (roformer eval, export or "
                              "fill-mask): nothing was deleted; try again once it has finished", why, dir));
    }
    fds_.push_back(fd);
  }
}

void CheckpointsHeldForDeletion::release() {
  for (const int fd : fds_) ::close(fd);
  fds_.clear();
}

}  // namespace roformer::checkpoint
