// CUDA graphs of the training step (train.cuda_graph): the host launches about a thousand kernels
// per step, and between them the GPU waits. A captured graph replays the same kernels with one launch.
//
// Two regions are captured, each by the step's own eager code (train/step.h) run once under capture:
// - a micro-batch's forward, loss, backward and gradient accumulation, one graph per batch shape
//   (B, T, predicted positions, padding, the step's predicted count that normalizes the loss). The
//   batch is copied into that shape's device buffers before each replay;
// - the update of a step that reads nothing back (gradient norm, clip, non-finite flag, fused AdamW
//   with the learning rate in a device tensor, gradients zeroed in place).
// The first time a region (or shape) comes it runs eagerly on the capture stream, as warm-up (lazy
// initializations such as AdamW's state must not be captured); the second time it is captured and
// replayed; after that, replayed. Dropout draws from the CUDA generator through the graph's offsets,
// so a replay draws exactly what the eager step would. Graphs share one memory pool (they never run
// at the same time) and hold no tensor that outlives them: the gradients, sums and flags they write
// exist before capture and are never released (AdamW::keep_gradients).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace roformer::train {

// One micro-batch as the captured forward reads it: host tensors in, device buffers to the region.
struct MicroInputs {
  torch::Tensor ids, mask, positions, labels;  // mask undefined when the batch has no padding
};

class StepGraphs {
 public:
  // Whether this build can capture CUDA graphs (a CUDA LibTorch).
  static bool supported();
  // At most this many batch shapes are captured; further shapes run eagerly (and say so once).
  static constexpr int kMaxShapes = 8;

  StepGraphs();
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Runs region on the micro-batch `host` (warm-up, capture + replay, or replay; see above).
  // step_n_pred: the predicted positions of the whole step, part of the shape (the loss divides by it).
  void micro(const MicroInputs& host, int64_t step_n_pred, const std::function<void(const MicroInputs&)>& region);
  // Runs the sync-free update region (warm-up, capture + replay, or replay).
  void update(const std::function<void()>& region);

  int64_t captured() const;  // graphs captured so far
  int64_t replayed() const;  // replays so far (the replay right after a capture included)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace roformer::train
