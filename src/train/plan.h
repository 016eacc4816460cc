// A training run worked out before anything is built: the config, the run directory, the
// checkpoint to resume from (its config and trainer state read once), the --init-from source and
// the launcher environment. `roformer train` makes one in launch.cpp; the TrainingRun takes it whole
// (TrainingRun(Plan)) and builds every component from it, so nothing is completed later by setters
// whose order matters; each takes its slice (TrainingData: DataSetup::of). How a step computes is not
// the plan's (train/step.h StepOptions, the kernel policy of model/kernel_policy.h).
#pragma once

#include <optional>
#include <string>

#include "checkpoint/meta.h"
#include "checkpoint/run_dir.h"
#include "core/config.h"
#include "core/faults.h"
#include "dist/env.h"
#include "train/init_from.h"

namespace roformer::train {

struct Plan {
  config::Config cfg;          // validated; train.param_dtype auto is resolved when the device is
  std::string config_origin;   // where cfg came from (the log, the header of RUN/config.yaml)
  std::string run_dir;         // the run's files, its tokenizer and prepared data
  checkpoint::CheckpointPlan start;  // what the run directory's earlier files undergo (--overwrite, resume), carried
                                     // out by the run once train.log is attached (rank 0)
  std::optional<checkpoint::CheckpointMeta> resume;  // the checkpoint the run continues from
  std::optional<InitSource> init;                    // --init-from: a new run from these weights
  dist::DistEnv env;           // the launcher's ranks (a single process unless torchrun or srun started it)
  core::Faults faults;         // the tests' fault injection (none unless set)
};

}  // namespace roformer::train
