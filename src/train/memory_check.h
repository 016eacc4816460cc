// A lower bound of the memory a training run needs, checked before anything large is allocated, so
// an absurd value (model.hidden_size=2000000000, train.batch_size=2000000000) is refused with the
// figure and the key to change instead of ending in std::bad_alloc or an abort inside LibTorch.
//
// Estimate (bytes):
//   parameters, gradients and the two AdamW moments: 16 x P (fp32), P counted from the config
//   (model/size.h, the position scheme's tables included); 20 x P with train.param_dtype bf16 (the
//   bf16 copy and its gradients on top of the fp32 masters)
//   buffers: the position scheme's (the rotary table, at its peak while computed in float64)
//   activations kept for backward, per token and layer: N*T attention probabilities + 4H + I
//   values, plus the scheme's own (disentangled: its N*T score bias), 2 bytes each under bf16/fp16
//   autocast, 4 in fp32, over B x T tokens of one micro-batch (with gradient checkpointing: one
//   layer's worth plus H per token per layer).
// It leaves out temporaries and allocator overhead on purpose: a run refused by it cannot fit.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"

namespace roformer::train {

struct MemoryEstimate {
  double parameters = 0;        // P
  double parameter_bytes = 0;   // parameters, gradients, AdamW moments
  double buffer_bytes = 0;      // the position scheme's buffers
  double activation_bytes = 0;  // one micro-batch (of the length phase that needs most: train.phases)
  int64_t batch_size = 0;       // that micro-batch: sequences and tokens per sequence
  int64_t seq_len = 0;
  std::string largest_key;      // the config key behind the largest term
  double total() const { return parameter_bytes + buffer_bytes + activation_bytes; }
};

MemoryEstimate estimate_training_memory(const config::Config& config, int64_t vocab_size);

// Throws roformer::Error naming the figures and the key when the estimate exceeds `available`
// bytes (no check when available is 0; core::device_memory_bytes gives the device's).
void check_training_memory(const config::Config& config, int64_t vocab_size, double available,
                           const std::string& device_name);

}  // namespace roformer::train
