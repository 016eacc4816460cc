// The training run's data: data.train_files / data.valid_files resolved to a prepared corpus.
//
// A single prepared directory is opened as it is. Text and JSONL files are encoded once into the
// run's cache (data.prepared_dir, or RUN_DIR/data) next to a signature of their paths, sizes and
// modification times and the tokenizer fingerprint, and re-encoded when the signature changes or
// the cached copy is damaged. Every error names the config key (data.train_files or
// data.valid_files) as well as the file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/tokenizer.h"

namespace roformer::train {

struct PreparedDataRequest {
  std::vector<std::string> files;  // the config's list
  std::string name;                // "train" or "valid": the key is data.<name>_files
  std::string cache_dir;           // data.prepared_dir, or RUN_DIR/data
  std::string jsonl_field = "text";
  bool resuming = false;           // continuing from a checkpoint: changed training text breaks exactness
};

std::shared_ptr<const data::PreparedCorpus> open_prepared_data(const PreparedDataRequest& request,
                                                               const data::Tokenizer& tokenizer);

}  // namespace roformer::train
