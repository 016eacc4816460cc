// Residual + dropout + LayerNorm as one differentiable op with two implementations (issue 38):
//
//   z = residual + dropout(x, p)                        (..., H), x's dtype
//   y = (z - mean(z)) / sqrt(var(z) + eps) * gamma + beta   statistics in fp32
//
// the post-LayerNorm block's LN(u + drop(f(u))) (y), or the pre-LayerNorm block's residual stream
// (z) and the next sublayer's input (y). Gradients flow to x, residual, gamma and beta, and to z's
// own uses (pre-LN) as well as y's.
//
// Backend::kTriton runs src/kernels/triton/layer_norm.py compiled ahead of time: one kernel forward
// (reads x, residual, gamma, beta; writes z, y and the fp32 mean and rstd per row) and one backward
// (reads dy, dz, z; writes dx, dresidual and per-program gamma/beta partial sums, then summed),
// the mask regenerated from the CUDA generator's seed and offset (kernels/dropout_rng.h) instead of
// stored. Backend::kAten runs ATen's native_dropout, native_layer_norm and their backwards: the
// CPU's path, the reference of the GPU tests and what a CUDA call takes where the kernel cannot.
#pragma once

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/dropout_rng.h"
#include "kernels/triton_runtime.h"

namespace roformer::kernels {

enum class Backend { kAten, kTriton };
// What the model asks for on `device` (model/kernel_policy.h's fused entries): the Triton kernel on
// CUDA (each op falls back to kAten where the kernel cannot run), ATen on the CPU.
inline Backend backend_for(const torch::Device& device) { return device.is_cuda() ? Backend::kTriton : Backend::kAten; }
// Why an op given Backend::kAten runs its ATen path, as op_paths records it: the CPU, or asked for.
inline std::string aten_asked_for(const torch::Tensor& x) {
  return x.is_cuda() ? "the ATen backend was asked for" : "the CPU";
}

struct ResidualLayerNormOutput {
  torch::Tensor y;  // (..., H) LayerNorm(z)
  torch::Tensor z;  // (..., H) residual + dropout(x)
};

// x: (..., H); residual: as x, or undefined (z = dropout(x)); gamma, beta: (H,). p: the dropout
// probability in [0, 1), 0 for none (evaluation). keep: (..., H) bool, the mask to apply instead of
// drawing one (kAten only: tests replay a Triton draw with it; undefined otherwise). kTriton where
// triton_layer_norm_unsupported says why not runs kAten instead.
ResidualLayerNormOutput residual_dropout_layer_norm(const torch::Tensor& x, const torch::Tensor& residual,
                                                    const torch::Tensor& gamma, const torch::Tensor& beta, double p,
                                                    double eps, Backend backend,
                                                    const torch::Tensor& keep = torch::Tensor());

// Why kTriton cannot run these arguments (nullopt: it can): not a CUDA tensor, no kernels in this
// build or for this GPU, a dtype other than bf16/fp32 shared by x, residual, gamma and beta,
// H > 4096, or a row stride / pointer not 16-byte aligned (H % 16 != 0 for fp32 and bf16 alike).
std::optional<std::string> triton_layer_norm_unsupported(const torch::Tensor& x, const torch::Tensor& residual,
                                                         const torch::Tensor& gamma, const torch::Tensor& beta);

// The compiled variant for a row of H elements in `dtype`: "bf16_256" (H <= 256), "bf16_1024",
// "bf16_4096", the same for "fp32_"; throws for H outside 1..4096.
std::string layer_norm_variant(torch::ScalarType dtype, int64_t H);

// ---- The Triton path's launches, as plain values (the tests check them against the compiled
// ---- signatures on any machine; the Triton path launches exactly these).
struct LaunchPlan {
  std::string kernel, variant;
  std::array<uint32_t, 3> grid;
  KernelArgs args;
};
// Forward over M = x.numel() / H rows: reads x, residual (undefined: none), gamma, beta and, when
// p > 0, the (seed, offset) of `rng`; writes z, y, mean, rstd (M,) fp32 and rng_used (2,) int64.
LaunchPlan plan_layer_norm_forward(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& gamma,
                                   const torch::Tensor& beta, const torch::Tensor& z, const torch::Tensor& y,
                                   const torch::Tensor& mean, const torch::Tensor& rstd, const DropoutRng& rng,
                                   const torch::Tensor& rng_used, double p, double eps);
// Where the backward applies the forward's dropout mask: nowhere, to x (z = r + dropout(x)), or to
// dy (y = dropout(LayerNorm(z)): the embeddings, kernels/embedding.h).
enum class DropoutAt { kNone = 0, kInput = 1, kOutput = 2 };
// Backward in `programs` blocks of `rows` rows: reads dy, dz_in (undefined: none), z, gamma, mean,
// rstd, rng_used; writes dr = dz (when defined), dx (kInput only: dr holds dz, dx it masked) and
// the per-program sums partial (2, programs, H) fp32: [0] gamma's, [1] beta's.
LaunchPlan plan_layer_norm_backward(const torch::Tensor& dy, const torch::Tensor& dz_in, const torch::Tensor& z,
                                    const torch::Tensor& gamma, const torch::Tensor& mean, const torch::Tensor& rstd,
                                    const torch::Tensor& rng_used, const torch::Tensor& dr, const torch::Tensor& dx,
                                    const torch::Tensor& partial, int64_t rows, double p, DropoutAt dropout_at);
// The backward's row blocks for M rows on `device`: (rows per program, programs), about four
// programs per SM, each summing its rows' gamma/beta gradients.
std::pair<int64_t, int64_t> layer_norm_backward_blocks(int64_t M, const torch::Device& device);

}  // namespace roformer::kernels
