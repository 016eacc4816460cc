// Reading what `roformer` commands leave behind, for the integration tests: run directories
// (metrics, checkpoints) and the JSON record a command prints.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "checkpoint/store.h"
#include "core/hash.h"
#include "test_util.h"

namespace roformer::test {

// step -> record of RUN_DIR/metrics.jsonl, for one record type ("train" or "eval").
inline std::map<int64_t, nlohmann::json> read_metrics(const std::string& run_dir, const std::string& type = "train") {
  std::map<int64_t, nlohmann::json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) {
      auto r = nlohmann::json::parse(line);
      if (r["type"] == type) out[r["step"].get<int64_t>()] = r;
    }
  return out;
}

// The tiny CPU run of the run-directory tests (a dozen steps take a second or two): one layer of
// hidden 32, a 120-piece tokenizer trained on `train_file`, 12 steps of 4 sequences of 32 tokens, a
// checkpoint every 3 steps (10 kept) and a log line every 3. Tests change it with --set.
inline std::string tiny_run_yaml(const std::string& train_file) {
  return "model:\n  hidden_size: 32\n  num_layers: 1\n  num_heads: 2\n  intermediate_size: 64\n"
         "  max_position_embeddings: 64\ntokenizer:\n  vocab_size: 120\n"
         "data:\n  train_files: [" + train_file + "]\n  max_seq_len: 32\n  num_workers: 1\n"
         "schedule:\n  warmup_steps: 2\ntrain:\n  steps: 12\n  batch_size: 4\n  precision: fp32\n"
         "  device: cpu\n  num_threads: 1\ncheckpoint:\n  every: 3\n  keep_last: 10\n"
         "logging:\n  every: 3\n  progress: plain\n";
}

// A folder holding a synthetic train.txt and the tiny run's config (c.yaml), for tests that run
// `roformer train` into run directories below it.
class TinyRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(tmp_.str("train.txt"), synthetic_corpus(40, 4, 1));
    config_ = tmp_.str("c.yaml");
    write_file(config_, tiny_run_yaml(tmp_.str("train.txt")));
  }
  // `roformer train` of the tiny config into tmp_/run, with `extra` arguments.
  CommandResult train(const std::string& run, const std::string& extra = "") {
    return run_roformer("train -c " + config_ + " --run-dir " + tmp_.str(run) + " " + extra);
  }
  TempDir tmp_;
  std::string config_;
};

// RUN_DIR/checkpoints/step_000000NN
inline std::string checkpoint_dir(const std::string& run_dir, int64_t step) {
  return run_dir + "/checkpoints/" + roformer::checkpoint::checkpoint_name(step);
}

// Replaces FILE of the checkpoint DIR with `text` and its manifest entry to match, as a careful
// hand-edit would: the checkpoint still verifies.
inline void rewrite_checkpoint_file(const std::string& dir, const std::string& file, const std::string& text) {
  const std::string path = dir + "/" + file;
  write_file(path, text);
  auto manifest = nlohmann::json::parse(read_file(dir + "/manifest.json"));
  manifest["files"][file] = {{"size", text.size()}, {"checksum", roformer::core::file_checksum(path)}};
  write_file(dir + "/manifest.json", manifest.dump(2));
}

// The last line of a command's output that is a JSON object (logs go to stderr, merged there).
inline nlohmann::json last_json(const std::string& output) {
  std::istringstream lines(output);
  std::string line, found;
  while (std::getline(lines, line))
    if (!line.empty() && line[0] == '{') found = line;
  EXPECT_FALSE(found.empty()) << output;
  return found.empty() ? nlohmann::json() : nlohmann::json::parse(found);
}

}  // namespace roformer::test
