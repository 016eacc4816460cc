// AdamW as the training step runs it, one component owning the optimizer's state and its three choices:
//
// - Decoupled weight decay in two parameter groups: the model's decay_parameters (Linear weights,
//   optionally the embeddings) and the rest (biases, LayerNorm) without decay.
// - The portable torch::optim::AdamW or the fused kernel (optimizer.fused: at::_fused_adamw_ once per
//   group on the very state tensors of the torch optimizer, so optimizer.pt has one format). The
//   fused kernel counts steps on the device, where an update skipped for a non-finite gradient
//   (found_inf) does not count; sync_step_counts() brings the host counts in line before a save.
// - Master weights (train.param_dtype: bf16). The step computes with a bf16 copy of the model; the
//   optimizer updates fp32 master weights (the `weights` model, what checkpoints save and load), adds
//   every micro-batch's bf16 gradients into fp32 gradients of the masters (accumulation in fp32), and
//   after each update writes the masters back to the bf16 copy (one foreach copy).
//
// Without master weights the two models are one and the same module.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "model/roformer.h"

namespace roformer::train {

class AdamW {
 public:
  // weights: the fp32 model the optimizer updates (and checkpoints hold). compute: the model the step
  // runs: `weights` itself, or its bf16 copy for master weights (same architecture; its parameters are
  // overwritten from the masters here).
  AdamW(model::RoFormerForMaskedLM weights, model::RoFormerForMaskedLM compute, const config::OptimizerConfig& options);

  bool master_weights() const { return !compute_params_.empty(); }
  bool fused() const { return fused_; }
  // The parameters the optimizer updates (the fp32 weights), the decay group first.
  const std::vector<torch::Tensor>& params() const { return params_; }

  // After the backward of each micro-batch: with master weights, the compute model's gradients are
  // added to the masters' fp32 gradients and cleared; otherwise nothing (they accumulate in place).
  void accumulate_gradients();
  // The defined gradients of params() (after accumulate_gradients), the ones the update applies.
  std::vector<torch::Tensor> gradients() const;
  // One update at learning rate lr. found_inf (float 0/1 on the device; may be undefined) makes the
  // fused kernel leave everything as it is. Master weights: then copied into the compute model.
  void step(double lr, const torch::Tensor& found_inf);
  // step() in two: set_lr, then update. On CUDA the fused kernel reads the learning rate from a device
  // tensor that set_lr fills, so a captured update (train/step_graphs.h) replays at each step's rate.
  void set_lr(double lr);
  void update(const torch::Tensor& found_inf);
  // Drops every gradient (of both models); after keep_gradients(), zeroes the kept ones in place.
  void zero_grad();
  // From now on the gradients that are defined now stay allocated at their addresses (zero_grad zeroes
  // them, backward adds into them): what a captured CUDA graph needs. Call after a backward, so the
  // parameters that receive gradients are known; the others keep none, as before.
  void keep_gradients();
  bool keeps_gradients() const { return keep_gradients_; }
  // The weights or the state were replaced from outside (a checkpoint or --init-from loaded, a
  // broadcast), before training goes on: the compute model takes the weights again and the fused
  // path's device step counts are read again from the states.
  void loaded();

  // The update count of the first parameter (what a checkpoint saves as AdamW's step). Syncs.
  int64_t step_count();
  // Fused path: the device step counts into the states' host counts (one read-back).
  void sync_step_counts();
  // The state, in the format optimizer.pt holds (checkpoint save and load).
  torch::optim::AdamW& torch_optimizer() { return *optimizer_; }

 private:
  void fused_step(const torch::Tensor& found_inf);
  void write_back();  // master weights: the masters into the compute model (bf16); otherwise nothing

  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::vector<torch::Tensor> params_;          // the updated parameters, decay group first
  std::vector<torch::Tensor> compute_params_;  // master weights: the bf16 copies, same order; else empty
  bool fused_ = false;
  bool keep_gradients_ = false;
  torch::Tensor lr_;  // fused on CUDA: the learning rate, float32 on the device (set_lr)
  std::unordered_map<void*, torch::Tensor> device_steps_;  // fused: per parameter, its float step count on the device
};

// The compute model for train.param_dtype: bf16: a model of the same options on the same device,
// its parameters and buffers in bf16 (AdamW copies the weights in).
model::RoFormerForMaskedLM make_bf16_compute_model(const model::RoFormerForMaskedLM& weights);

}  // namespace roformer::train
