// Progress of a pass over many input files (`roformer prepare`, `roformer tokenizer train`): a bar on
// a terminal (4 redraws a second), a log line every 10 s otherwise, and a final line at the end:
//   prepare: 41.2% 3/8 files 120.5/292.4 MB 12.3 MB/s 2.91M tokens/s ETA 14s
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/progress_bar.h"

namespace roformer::data {

class ReadProgress {
 public:
  // `what` starts each line; totals over all input files (bytes as stored on disk).
  ReadProgress(std::string what, bool enabled, int64_t total_files, int64_t total_bytes);
  // `files_done` files and `bytes` of the files read; `tokens` encoded (negative: not shown).
  void update(int64_t files_done, int64_t bytes, int64_t tokens, bool final = false);

 private:
  using clock = std::chrono::steady_clock;
  std::string what_;
  bool enabled_, tty_;
  int64_t total_files_, total_bytes_;
  clock::time_point start_, last_;
  core::TerminalBar bar_{30};
};

}  // namespace roformer::data
