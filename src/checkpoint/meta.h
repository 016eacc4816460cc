// What every reader of a checkpoint needs before its tensors: the resolved config (config.yaml)
// and the trainer state (trainer_state.json), read and checked here and nowhere else. The trainer's
// resume, the launch checks, --init-from, eval, fill-mask, export and inspect all start from it;
// the weights, optimizer and generator states stay with their loaders. Free of LibTorch.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/config.h"
#include "checkpoint/trainer_state.h"

namespace roformer::checkpoint {

struct CheckpointMeta {
  std::string dir;        // the checkpoint directory (RUN/checkpoints/step_N)
  config::Config config;  // config.yaml: the run's resolved config when it was saved
  TrainerState state;     // trainer_state.json, typed
};

// Throws roformer::Error naming the file and what is wrong with it.
CheckpointMeta read_checkpoint_meta(const std::string& dir);

// What a resume reads beyond the manifest's checksums (which a careful hand-edit keeps matching),
// checked before anything is written: the data position's length phase is the one the checkpoint's
// config trains its last step in (or the next step's, for a step given up at a stop signal), and its
// metrics.jsonl, which the run goes on appending to, holds whole JSON records only. phase_of: the
// index of the length phase the checkpoint's config trains a 0-based step in (the caller's: the
// phases are train/length_phases.h's). Throws roformer::Error naming the file, the field or line,
// and what to do.
void check_resumable(const CheckpointMeta& meta, const std::function<size_t(int64_t step)>& phase_of);

// For `roformer inspect`, which reports damaged checkpoints too: each part that could be read,
// and the first problem met reading the others.
struct CheckpointMetaParts {
  std::optional<config::Config> config;
  std::optional<TrainerState> state;
  std::string problem;  // empty when both parts were read
};
CheckpointMetaParts read_checkpoint_meta_parts(const std::string& dir);

}  // namespace roformer::checkpoint
