// The MLM loss at the predicted positions from the (P, V) logits, as one differentiable op with two
// implementations (issue 38):
//
//   loss    = sum_r (logsumexp_v x_rv - x_r,y_r)      fp32 scalar, differentiable in the logits
//   correct = #{r : argmax_v x_rv == y_r}              int64 scalar (ties: the first index)
//
// over the rows whose label is >= 0 (label -100 is ignored: ATen's ignore_index; the kernel ignores
// any negative label, where ATen refuses the others). Backend::kTriton runs
// src/kernels/triton/cross_entropy.py: one pass forward (per-row loss, hit and logsumexp, summed
// by ATen), one pass backward writing the logits' gradient in their dtype, scaled by the loss's
// gradient read on the device; no fp32 copy of the logits. kAten is what the training step runs
// today: logits cast to fp32, cross_entropy (reduction sum), argmax; the CPU's path and the GPU
// tests' reference.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

#include "kernels/layer_norm.h"

namespace roformer::kernels {

struct CrossEntropyOutput {
  torch::Tensor loss;     // () fp32: the sum over the rows
  torch::Tensor correct;  // () int64: rows whose argmax is their label
};

// logits: (P, V) bf16 or fp32; labels: (P,) int64 on the same device.
CrossEntropyOutput cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& labels, Backend backend);

// Why kTriton cannot run these arguments (nullopt: it can): a dtype other than bf16/fp32, logits not
// (P, V) with unit stride along V and an aligned row stride, labels not (P,) int64 contiguous,
// unaligned data, or the device reasons (triton_device_unsupported).
std::optional<std::string> triton_cross_entropy_unsupported(const torch::Tensor& logits, const torch::Tensor& labels);

// The two launches over P rows: forward writes loss_rows, correct_rows and lse (P,) fp32; backward
// writes dlogits from the logits, labels, lse and grad (a () fp32 device tensor: the loss's gradient).
LaunchPlan plan_cross_entropy_forward(const torch::Tensor& logits, const torch::Tensor& labels,
                                      const torch::Tensor& loss_rows, const torch::Tensor& correct_rows,
                                      const torch::Tensor& lse);
LaunchPlan plan_cross_entropy_backward(const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& lse,
                                       const torch::Tensor& grad, const torch::Tensor& dlogits);

}  // namespace roformer::kernels
