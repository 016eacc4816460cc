// `roformer train` as the command line asks for it. Kept free of LibTorch includes so the CLI
// compiles quickly; launch.cpp works the request out, the TrainingRun (training_run.h) runs it.
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
  bool extend_positions = false;        // --init-from: copy-extend a learned position table (train/init_from.h)
};

// Runs (or resumes) a training run to completion, or until SIGINT/SIGTERM (then saves); throws
// roformer::Error for what stops a run (a user mistake, a failed write, a non-finite loss).
void run_training(const TrainRequest& request);

}  // namespace roformer::train
