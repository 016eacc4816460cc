// Reading what a training run left in its run directory, for the tests of `roformer train`.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>

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

}  // namespace roformer::test
