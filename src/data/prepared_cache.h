// The prepared-data cache of a run: data.train_files / data.valid_files resolved to a prepared corpus.
//
// Prepared directories are opened as they are (several: read as one corpus, in the listed order).
// Input files (text, JSONL, Parquet, compressed; folders and glob patterns expanded as in
// input_files.h) are encoded once into the run's cache (data.prepared_dir, or RUN_DIR/data) next to a
// signature of the expanded files' paths, sizes and modification times, the text field and the
// tokenizer fingerprint, and re-encoded when the signature changes or the cached copy is damaged.
// Every error names the config key (data.train_files or data.valid_files) as well as the file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/tokenizer.h"

namespace roformer::data {

struct PreparedDataRequest {
  std::vector<std::string> files;  // the config's list
  std::string name;                // "train" or "valid": the key is data.<name>_files
  std::string cache_dir;           // data.prepared_dir, or RUN_DIR/data
  std::string text_field = "text"; // data.text_field
  bool resuming = false;           // continuing from a checkpoint: changed training text breaks exactness
};

// The corpus of request.files: the listed prepared directories, or the run's cached copy of the
// input files (prepared first when missing, changed or damaged). Throws roformer::Error naming the key.
std::shared_ptr<const PreparedCorpus> open_prepared_data(const PreparedDataRequest& request, const Tokenizer& tokenizer);

}  // namespace roformer::data
