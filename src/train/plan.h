// A training run worked out before anything is built: the config, the run directory, the
// checkpoint to resume from (its config and trainer state read once), the --init-from source, the
// data source and the launcher environment. `roformer train` makes one in launch.cpp, `roformer
// bench` in bench.cpp, the tests by hand; the Trainer takes it whole (Trainer(Plan)) and builds
// every component from it, so nothing is completed later by setters whose order matters.
#pragma once

#include <optional>
#include <string>

#include "checkpoint/meta.h"
#include "core/config.h"
#include "core/faults.h"
#include "dist/env.h"
#include "train/init_from.h"

namespace roformer::train {

struct Plan {
  config::Config cfg;          // validated; train.param_dtype auto is resolved when the device is
  std::string config_origin;   // where cfg came from (the log, the header of RUN/config.yaml)
  std::string run_dir;         // the tokenizer and prepared data go here; a run writes its files here too
  // true: `roformer train` (train.log, config.yaml, checkpoints, metrics, TensorBoard; Trainer::run);
  // false: the step alone (`roformer bench`, tests): nothing is written but the data it prepares.
  bool writes_run = false;
  std::optional<checkpoint::CheckpointMeta> resume;  // the checkpoint the run continues from
  std::optional<InitSource> init;                    // --init-from: a new run from these weights
  // Synthetic batches of the loader's shape over model.vocab_size ids instead of a tokenizer and a
  // corpus (`roformer bench --synthetic`, tests).
  bool synthetic = false;
  dist::DistEnv env;           // the launcher's ranks (a single process unless torchrun or srun started it)
  // A device synchronize at every phase boundary, so StepTimings are exact (`bench --breakdown`;
  // CUDA graphs off).
  bool sync_timings = false;
  // Tests only: CPU steps take the sync-free path that CUDA steps take (device-side clipping, the
  // sticky non-finite flag, no read-back), so its logic is tested on a machine without a GPU.
  bool sync_free_on_cpu = false;
  core::Faults faults;         // the tests' fault injection (none unless set)
};

}  // namespace roformer::train
