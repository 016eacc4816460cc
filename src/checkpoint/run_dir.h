// The run directory is the user's data: one training process at a time, and checkpoints that
// belong to one history.
//
//   RunDirLock           an exclusive lock (flock) on RUN_DIR/.lock holding the owner's process id:
//                        a second `roformer train` on the same directory stops at once naming it; a
//                        lock left by a process that died is taken over with a warning.
//   plan_checkpoint      what a run starts from, decided before anything is written (carry_out acts):
//     fresh run          refused when RUN_DIR/checkpoints holds checkpoints (resume it, --overwrite,
//                        or another directory); --overwrite deletes them, metrics.jsonl and the
//                        TensorBoard event files first (those two even without checkpoints);
//     --resume auto      the newest checkpoint that verifies; refused, naming each, when there are
//                        checkpoints but none verifies (nothing is overwritten);
//     --resume PATH      that checkpoint; one of another run directory only into an empty one.
//                        Checkpoints later than the chosen one belong to the history being left:
//                        they are moved to RUN_DIR/checkpoints/abandoned-<name>-<time>/, so every
//                        step_* left in checkpoints/ is of the current history and `--resume auto`
//                        and pruning (both by step) act on it alone.
#pragma once

#include <string>
#include <vector>

namespace roformer::checkpoint {

// A run writes config.yaml, train.log, metrics.jsonl, checkpoints/ and more into its directory, so
// the directory must be new, empty, or one a run created (it holds the lock file): a folder of the
// user's own files is refused, naming some of them, and so is a -c config that is the run's own
// config.yaml (the run rewrites that file with the resolved config). Throws roformer::Error.
void check_run_dir_is_ours(const std::string& run_dir, const std::string& config_path);

// What the first save needs, checked before the first step rather than found after hours of
// training: an existing checkpoints folder is a directory that takes a file (a missing one is made
// in the run directory, which takes config.yaml, at the first save). Throws roformer::Error.
void check_checkpoints_writable(const std::string& checkpoints_dir);

class RunDirLock {
 public:
  // Creates the run directory if needed and takes the lock; throws roformer::Error when another live
  // process holds it. RUN_DIR/.lock is a plain file: a symbolic link there is removed, never followed.
  explicit RunDirLock(const std::string& run_dir);
  // Releases the lock (and clears the process id). A run that wrote nothing but the lock (a start
  // refused after locking) removes the lock file, and the folders it made.
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  std::string run_dir_, path_;
  int fd_ = -1;
  std::string created_from_;  // the outermost folder the constructor made ("" when run_dir existed)
  bool created_lock_ = false;
};

struct CheckpointChoice {
  std::string resume;       // "" (fresh run), "auto" or a checkpoint path, as asked
  bool overwrite = false;   // --overwrite: a fresh run may delete the directory's checkpoints
  bool have_config = false; // -c was given (a fresh run is possible)
};

// What a run starts from, decided without touching anything (so a run refused later, for a config
// change say, has changed nothing); carry_out() then deletes or moves what the plan says.
struct CheckpointPlan {
  std::string resume;                // the checkpoint to resume from; "" for a fresh run
  bool overwrite = false;            // --overwrite: delete the earlier run's files (those below, metrics, events)
  std::vector<std::string> deleted;  // --overwrite: the earlier run's checkpoints
  std::vector<std::string> later;    // checkpoints after `resume`, moved aside
};
CheckpointPlan plan_checkpoint(const std::string& run_dir, const CheckpointChoice& choice);
// Logs one line of what it deleted or moved: call it once the run's log file is attached, so that
// train.log keeps the line too.
void carry_out(const CheckpointPlan& plan, const std::string& run_dir);

}  // namespace roformer::checkpoint
