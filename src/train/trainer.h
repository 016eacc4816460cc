// `roformer train`: the config-driven training run. Kept free of LibTorch includes so the CLI
// compiles quickly; everything lives in trainer.cpp.
#pragma once

#include <string>
#include <vector>

namespace roformer::train {

struct TrainRequest {
  std::string config_path;              // YAML; may be empty when resuming (the checkpoint's config is used)
  std::vector<std::string> overrides;   // section.key=value
  std::string run_dir;                  // overrides train.run_dir when non-empty
  std::string resume;                   // "" (fresh run), "auto" (newest valid checkpoint in the run dir) or a path
  bool overwrite = false;               // a fresh run may delete the run directory's checkpoints and metrics
  std::string init_from;                // a new run from these weights and tokenizer (train/init_from.h)
};

// Runs (or resumes) a training run to completion, or until SIGINT/SIGTERM (then saves and returns 0).
// Throws roformer::Error for user mistakes; returns the process exit code otherwise.
int run_training(const TrainRequest& request);

}  // namespace roformer::train
