// Where a training process computes: its device and its process group, set up before anything
// else, so a device that does not exist leaves no run directory behind. `roformer train` (one rank
// of a data-parallel run, or a world of one), `roformer bench` and the step tests all start here.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "core/config.h"
#include "dist/env.h"

namespace roformer::dist {
class ProcessGroup;
}

namespace roformer::train {

// train.device, train.precision, train.param_dtype, train.fp8, train.run_dir and distributed.backend
// together (train/run_config.h): a device that exists by name, a precision and a backend it runs. Throws
// roformer::Error naming the key to change.
void validate_placement(const config::Config& c);

class Placement {
 public:
  // Resolves train.device (a rank of a data-parallel run takes cuda:LOCAL_RANK) and makes it the
  // process's current device before anything allocates on it; resolves train.param_dtype auto for
  // it in `cfg` (before config.yaml is written); starts the process group (a world of one unless a
  // launcher started ranks); applies train.num_threads. Throws roformer::Error for a device that
  // does not exist, fp16 off CUDA, and a config that cannot fit the device (train/memory_check.h,
  // with model.vocab_size, or tokenizer.vocab_size until a tokenizer says more).
  // one_rank_backend (tests): a world of one gets its backend all the same
  // (dist::ProcessGroupOptions::one_rank_backend), so the NCCL path runs with one GPU.
  Placement(config::Config& cfg, const dist::DistEnv& env, bool one_rank_backend = false);
  ~Placement();
  Placement(const Placement&) = delete;
  Placement& operator=(const Placement&) = delete;

  const c10::Device& device() const { return device_; }
  dist::ProcessGroup& group() const { return *group_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool main_rank() const { return env_.rank == 0; }

 private:
  dist::DistEnv env_;
  c10::Device device_{c10::kCPU};
  std::unique_ptr<dist::ProcessGroup> group_;
};

}  // namespace roformer::train
