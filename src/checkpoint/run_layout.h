// The run directory's layout, named once for every reader and writer (the trainer, the
// checkpointer, resume and --overwrite, eval/export/inspect/--init-from):
//
//   RUN_DIR/
//     .lock                  RunDirLock (checkpoint/run_dir.h): its presence marks a run's directory
//     config.yaml            the resolved config of the run
//     train.log              the log (rank 0)
//     metrics.jsonl          one record per logging step and evaluation (train/metrics.h)
//     tensorboard/           the same records as TensorBoard event files (train/tensorboard_sink.h)
//     tokenizer/             the run's tokenizer: tokenizer.model, .vocab, the training record
//     data/                  prepared shards (unless data.prepared_dir names another place)
//     checkpoints/           step_N/ (checkpoint/files.h names their files), `latest`, abandoned-*/
//
// A checkpoint's own files are named in checkpoint/files.h; the shards' in data/.
#pragma once

#include <filesystem>
#include <string>
#include <utility>

#include "core/run_dir_names.h"
#include "data/tokenizer.h"

namespace roformer::checkpoint {

// Inside RUN_DIR/checkpoints: the file naming the newest complete checkpoint (checkpoint/store.h).
inline constexpr const char* kLatestFile = "latest";
// The name of the checkpoints folder in a run directory (a path that ends so is a run's).
inline constexpr const char* kCheckpointsDir = "checkpoints";

class RunLayout {
 public:
  explicit RunLayout(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }
  std::string lock() const { return at(core::kRunLockFile); }
  std::string config() const { return at("config.yaml"); }
  std::string train_log() const { return at("train.log"); }
  std::string metrics() const { return at("metrics.jsonl"); }
  std::string tensorboard() const { return at("tensorboard"); }
  std::string tokenizer_dir() const { return at("tokenizer"); }
  std::string tokenizer_model() const {
    return (std::filesystem::path(tokenizer_dir()) / data::kTokenizerModelFile).string();
  }
  std::string data() const { return at("data"); }
  std::string checkpoints() const { return at(kCheckpointsDir); }
  std::string latest() const { return (std::filesystem::path(dir_) / kCheckpointsDir / kLatestFile).string(); }

  // What a run writes into its directory, for the messages that refuse a directory of other files.
  static constexpr const char* kWrittenFiles = "config.yaml, train.log, metrics.jsonl, tensorboard/, tokenizer/, "
                                               "data/, checkpoints/";

 private:
  std::string at(const char* name) const { return (std::filesystem::path(dir_) / name).string(); }
  std::string dir_;
};

}  // namespace roformer::checkpoint
