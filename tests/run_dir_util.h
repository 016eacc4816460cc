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

#include "train/checkpoint_store.h"

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

// RUN_DIR/checkpoints/step_000000NN
inline std::string checkpoint_dir(const std::string& run_dir, int64_t step) {
  return run_dir + "/checkpoints/" + roformer::train::checkpoint_name(step);
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
