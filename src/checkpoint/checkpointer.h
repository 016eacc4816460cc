// The checkpoints of a training run: save (model, optimizer, every rank's generator states, the
// typed trainer state, the resolved config, the tokenizer and the metrics so far; crash-safe
// through checkpoint/store.h, then pruning) and load (the same, back into the run). Collective in a
// data-parallel run: every rank calls save() and load() alike; rank 0 writes. The trainer only
// says what to save and when.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/faults.h"
#include "data/tokenizer.h"
#include "model/roformer.h"
#include "checkpoint/meta.h"
#include "checkpoint/trainer_state.h"

namespace roformer::dist {
class ProcessGroup;
}

namespace roformer::checkpoint {

// What a checkpoint holds, by reference into the trainer.
struct CheckpointContents {
  model::RoFormerForMaskedLM model{nullptr};
  torch::optim::AdamW* optimizer = nullptr;
  const config::Config* config = nullptr;
  const data::Tokenizer* tokenizer = nullptr;
  std::string metrics_path;            // the run's metrics.jsonl (saved; metrics::JsonlSink::resume_from restores it)
  std::vector<torch::Tensor> params;   // data parallel: checked to agree across ranks before a save
};

class Checkpointer {
 public:
  // group: the run's process group (a world of one included); faults: the tests' save faults.
  Checkpointer(std::string checkpoints_dir, int64_t keep_last, dist::ProcessGroup& group, int rank, int world_size,
               const core::Faults& faults = {});

  // Saves state.step (unless that step was just saved or loaded) and prunes older checkpoints;
  // returns the checkpoint directory ("" when nothing was saved). Throws roformer::Error on every
  // rank when the save fails; the previous checkpoint stays intact.
  std::string save(const TrainerState& state, const CheckpointContents& contents);

  // Reads the checkpoint's tensors into the contents (the optimizer state onto `device`) and
  // restores this rank's generators (another world size: ranks > 0 start new streams from seed).
  // Its config and trainer state were read before (meta); each component restores its own part of
  // the state, and metrics.jsonl is the metrics::JsonlSink's. Throws roformer::Error naming the checkpoint.
  void load(const CheckpointMeta& meta, const CheckpointContents& contents, const torch::Device& device, int64_t seed);

  const std::string& dir() const { return dir_; }

 private:
  std::vector<std::string> gather_rng_states();  // collective; rank 0 gets every rank's, serialized
  void restore_rng_states(const std::string& dir, int64_t saved_world_size, int64_t step, int64_t seed);

  std::string dir_;
  int64_t keep_last_;
  dist::ProcessGroup& group_;
  int rank_, world_size_;
  core::Faults faults_;
  int64_t last_saved_step_ = -1;
};

// This process's random generators (the CPU one, then each CUDA device's), as a checkpoint saves
// them, and their restoration.
std::vector<torch::Tensor> get_rng_states();
void set_rng_states(const std::vector<torch::Tensor>& states);

// The dropout seed of a rank without a saved generator state (ranks > 0 at the start of a run or
// after a resume with another world size): a splitmix64 mix of (seed, rank, step).
uint64_t rank_seed(int64_t seed, int rank, int64_t step);

}  // namespace roformer::checkpoint
