// The run directory's layout, named once for every reader and writer (the trainer, the
// checkpointer, resume and --overwrite, eval/export/inspect/--init-from):
//
//   RUN_DIR/
//     .lock                  RunDirLock (checkpoint/run_dir.h): its presence marks a run's directory
//     config.yaml            the resolved config of the run
//     train.log              the log (rank 0)
//     metrics.jsonl          one record per logging step and evaluation (metrics/jsonl.h)
//     events.out.tfevents.*  the same records as TensorBoard event files (train/tensorboard_sink.h),
//                            in the run directory itself, so that `tensorboard --logdir runs/` names
//                            each run by its folder (a run begun before 2026-11-28 keeps tensorboard/)
//     tokenizer/             the run's tokenizer: tokenizer.model, .vocab, the training record
//     data/                  prepared shards (unless data.prepared_dir names another place)
//     checkpoints/           step_N/ (checkpoint/files.h names their files), `latest`, abandoned-*/
//
// An exported directory (`roformer export`) holds the Hugging Face files and roformer_export.json,
// what --init-from reads of its source. A checkpoint's own files are named in checkpoint/files.h; the
// shards' in data/.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/file.h"
#include "core/run_dir_names.h"
#include "data/tokenizer.h"

namespace roformer::checkpoint {

// Inside RUN_DIR/checkpoints: the file naming the newest complete checkpoint (checkpoint/store.h).
inline constexpr const char* kLatestFile = "latest";
// The name of the checkpoints folder in a run directory (a path that ends so is a run's).
inline constexpr const char* kCheckpointsDir = "checkpoints";
// Inside RUN_DIR/checkpoints: abandoned-<step>-<time>/, a checkpoint set aside by a resume from an
// older one (checkpoint/run_dir.h).
inline constexpr const char* kAbandonedPrefix = "abandoned-";
// In an exported directory: the record `roformer export` writes beside the weights (checkpoint, step,
// the fingerprint of its spiece.model), so that --init-from (train/init_from.h) refuses an export
// whose tokenizer was swapped afterwards.
inline constexpr const char* kExportRecordFile = "roformer_export.json";

class RunLayout {
 public:
  explicit RunLayout(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }
  std::string lock() const { return at(core::kRunLockFile); }
  std::string config() const { return at("config.yaml"); }
  std::string train_log() const { return at("train.log"); }
  std::string metrics() const { return at("metrics.jsonl"); }
  // The folder of the run's TensorBoard event files: the run directory, or tensorboard/ inside it
  // where that folder exists (a run begun by a roformer before 2026-11-28, whose event files stay
  // together there).
  std::string tensorboard() const {
    std::error_code ec;
    const std::string earlier = at("tensorboard");
    return std::filesystem::is_directory(earlier, ec) ? earlier : dir_;
  }
  // The TensorBoard event files in tensorboard/ (names, sorted: TensorBoard's reading order); none
  // when the folder does not exist.
  std::vector<std::string> event_files() const {
    return core::list_files_starting_with(tensorboard(), core::kEventFilePrefix);
  }
  std::string tokenizer_dir() const { return at("tokenizer"); }
  std::string tokenizer_model() const {
    return (std::filesystem::path(tokenizer_dir()) / data::kTokenizerModelFile).string();
  }
  std::string data() const { return at("data"); }
  std::string checkpoints() const { return at(kCheckpointsDir); }
  std::string latest() const { return (std::filesystem::path(dir_) / kCheckpointsDir / kLatestFile).string(); }

  // What a run writes into its directory, for the messages that refuse a directory of other files.
  static constexpr const char* kWrittenFiles = "config.yaml, train.log, metrics.jsonl, TensorBoard event files, "
                                               "tokenizer/, data/, checkpoints/";

 private:
  std::string at(const char* name) const { return (std::filesystem::path(dir_) / name).string(); }
  std::string dir_;
};

}  // namespace roformer::checkpoint
