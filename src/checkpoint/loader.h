// Loading a training checkpoint for inference (eval, fill-mask, inspect, export): verifies the
// files against the manifest, then rebuilds the config, tokenizer and model it describes.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "data/tokenizer.h"
#include "model/roformer.h"
#include "checkpoint/trainer_state.h"

namespace roformer::checkpoint {

struct LoadedCheckpoint {
  std::string dir;                 // the checkpoint directory
  config::Config config;           // its resolved config
  TrainerState state;       // trainer_state.json, typed
  std::unique_ptr<data::Tokenizer> tokenizer;  // holds its files' bytes (the checkpoint may be pruned meanwhile)
  model::RoFormerForMaskedLM model{nullptr};  // in eval mode, on the requested device
};

// `path` is a checkpoint directory (RUN/checkpoints/step_N) or a run directory (then its newest
// complete checkpoint: resolve_checkpoint_dir). Throws roformer::Error saying what is wrong:
// not found, incomplete, corrupt (which file), or weights that do not fit the config.
LoadedCheckpoint load_checkpoint(const std::string& path, const torch::Device& device);

}  // namespace roformer::checkpoint
