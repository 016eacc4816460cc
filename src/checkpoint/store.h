// Crash-safe checkpoint directories.
//
//   RUN_DIR/checkpoints/
//     step_00001000/           a complete checkpoint: its files plus manifest.json (written last)
//     step_00002000/
//     latest                   text file naming the newest complete checkpoint, replaced atomically
//     .tmp-step_00003000-PID/  a save in progress (never read; removed by the next save)
//
// A save writes every file into a temporary directory, fsyncs them, writes manifest.json (size and
// checksum of every file), renames the directory into place and only then updates `latest`. A
// process killed at any point therefore leaves the previous checkpoint untouched, and a full disk
// fails the save with an error while the previous checkpoint stays intact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::checkpoint {

// One save in progress. Write files at path(name), then commit().
class CheckpointWriter {
 public:
  CheckpointWriter(const std::string& checkpoints_dir, int64_t step);
  ~CheckpointWriter();  // removes the temporary directory unless committed
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Where to write `name` (a plain file name) inside the temporary directory.
  std::string path(const std::string& name) const;
  // Seals the checkpoint: manifest, fsync, rename, `latest`. Returns the final directory.
  std::string commit();

 private:
  std::string checkpoints_dir_;
  std::string final_name_;
  std::string tmp_dir_;
  bool committed_ = false;
};

// "step_00001234".
std::string checkpoint_name(int64_t step);

// One file listed in a checkpoint's manifest.json.
struct ManifestEntry {
  std::string name;      // a plain file name inside the checkpoint directory
  uint64_t size = 0;
  std::string checksum;
};
// Parses manifest.json text; throws roformer::Error saying what is wrong (not JSON, no file list,
// a name that is not a plain file name, a size or checksum of the wrong type).
std::vector<ManifestEntry> parse_manifest(const std::string& text);

struct CheckpointCheck {
  bool ok = false;
  std::string problem;  // why it is not usable, when !ok
};
// Verifies a checkpoint directory against its manifest (presence, sizes and checksums).
CheckpointCheck verify_checkpoint(const std::string& dir);

// Complete-looking checkpoint directories (step_* with a manifest), oldest first.
std::vector<std::string> list_checkpoints(const std::string& checkpoints_dir);

// The newest checkpoint that verifies (and was saved at step <= max_step), for `--resume auto`; ""
// when there is none. Each skipped (incomplete or corrupt) checkpoint adds a line to `warnings`.
std::string find_latest_valid_checkpoint(const std::string& checkpoints_dir, std::vector<std::string>* warnings,
                                         int64_t max_step = INT64_MAX);

// `path` is a checkpoint directory (RUN/checkpoints/step_N) or a run directory (then its newest
// complete, intact checkpoint, with a warning for each newer one skipped). Throws roformer::Error
// when it is neither or does not exist.
std::string resolve_checkpoint_dir(const std::string& path);

// Deletes all but the newest `keep_last` complete checkpoints (never `keep`, the one just written,
// nor one a CheckpointReadLock holds: a later save prunes it), and temporary directories of
// processes that are no longer running.
void prune_checkpoints(const std::string& checkpoints_dir, int64_t keep_last, const std::string& keep = "");

// Held while a checkpoint's files are read (eval, export, fill-mask of a run that is training):
// a shared flock on the checkpoint's directory, which prune_checkpoints and --overwrite leave alone.
// An exclusive lock held by another process (a deletion under way) is waited for, with a log line,
// up to a bound (60 s; ROFORMER_FAULT_READ_LOCK_WAIT_MS), then refused naming the checkpoint. Throws
// roformer::Error when `dir` is gone, or was pruned while the lock was being taken; where the file
// system has no flock, the read goes on unlocked (the loader chooses again if its checkpoint goes).
class CheckpointReadLock {
 public:
  explicit CheckpointReadLock(const std::string& dir);
  ~CheckpointReadLock();
  CheckpointReadLock(const CheckpointReadLock&) = delete;
  CheckpointReadLock& operator=(const CheckpointReadLock&) = delete;

 private:
  int fd_ = -1;
};

// Exclusive locks on checkpoints about to be deleted (`train --overwrite`), taken on all of them
// before any goes and held until destroyed: throws roformer::Error naming the first one a reader
// holds (CheckpointReadLock), so nothing is deleted under a reader. `why` names the deleter.
class CheckpointsHeldForDeletion {
 public:
  CheckpointsHeldForDeletion(const std::vector<std::string>& dirs, const std::string& why);
  ~CheckpointsHeldForDeletion() { release(); }
  CheckpointsHeldForDeletion(const CheckpointsHeldForDeletion&) = delete;
  CheckpointsHeldForDeletion& operator=(const CheckpointsHeldForDeletion&) = delete;

 private:
  void release();
  std::vector<int> fds_;
};



}  // namespace roformer::checkpoint
