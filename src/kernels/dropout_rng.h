// Where the fused kernels' dropout masks come from: PyTorch's default CUDA generator, so a run's
// masks follow torch's seed, are saved and restored with its RNG state (checkpoints, layer
// recomputation), and stay valid under CUDA graphs.
//
// A call that drops n elements reserves n Philox numbers, philox_cuda_state(round_up(n, 4)), as
// PyTorch's own dropout does, and its kernel reads seed and offset from device memory: during a
// graph capture the generator's own device tensors (which a replay advances) plus the call's fixed
// place within the graph; otherwise the generator's values, copied into a two-element device tensor.
// The kernels (src/kernels/triton/layer_norm.py, _dropout_keep) draw element j as output
// (offset + j) % 4 of Philox-4x32-10 at counter (offset + j) / 4: within the reserved range only.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace roformer::kernels {

struct DropoutRng {
  const int64_t* seed = nullptr;    // device memory: the Philox key
  const int64_t* offset = nullptr;  // device memory: the first number of the reserved range ...
  int64_t offset_add = 0;           // ... plus this (a captured call's place in its graph)
  torch::Tensor storage;            // eager calls: the (seed, offset) pair the pointers point into
};

// Reserves n numbers of `device`'s default CUDA generator (CUDA builds; throws elsewhere).
DropoutRng reserve_dropout_rng(const torch::Device& device, int64_t n);

// The keep mask (n,) uint8 that a fused kernel dropping n elements with probability p draws from
// the same reservation: reserves n numbers itself, so call it with the generator in the state the
// kernel saw (get_rng_state before, set_rng_state back). For tests; needs the compiled kernels.
torch::Tensor dropout_keep_mask(const torch::Device& device, int64_t n, double p);

}  // namespace roformer::kernels
