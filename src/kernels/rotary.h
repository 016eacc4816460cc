// Rotary position embedding of q and k, read from the packed QKV projection, as one differentiable
// op with two implementations (issue 38). The rotation is RoFormer's in Hugging Face's layout
// (src/model/rotary.h): pairs (2i, 2i+1) of each head turned by t theta_i, computed in fp32 and
// rounded once to the dtype.
//
// qk: (B, T, 2, N, D), q then k, as the first two thirds of the projection (B, T, 3, N, D) (a view:
// qkv.split_with_sizes({2, 1}, 2)[0]) or any tensor whose 2H = 2 N D features of a token are
// contiguous. Returns (B, T, 2, N, D) contiguous in qk's dtype: [:, :, 0] and [:, :, 1] are the
// rotated q and k, each (B, T, N, D)-strided as SDPA takes them (transpose(1, 2) gives (B, N, T, D)).
// table: the model's (P, D) fp32 rotary table, P >= T: sin in columns [0, D/2), cos in [D/2, D).
//
// Backend::kTriton runs src/kernels/triton/rotary.py (one kernel forward, the same kernel with the
// inverse rotation backward; no fp32 tensor); kAten the fp32 rotation with ATen ops (about six
// kernels each way), the CPU's path and the GPU tests' reference.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

#include "kernels/layer_norm.h"

namespace roformer::kernels {

torch::Tensor rotary_qk(const torch::Tensor& qk, const torch::Tensor& table, Backend backend);

// Why kTriton cannot run these arguments (nullopt: it can): a dtype other than bf16/fp32, H > 4096
// or not a multiple of 16, a token's 2H features not contiguous, an fp32 table not (>= T, D) and
// contiguous, unaligned data, or rotary_qk's device reasons (triton_device_unsupported).
std::optional<std::string> triton_rotary_unsupported(const torch::Tensor& qk, const torch::Tensor& table);

// The kernel's launch over B*T tokens: rotation of x's rows (row_stride elements apart, the first
// 2H features q and k) into out (B*T, 2H); inverse: by -t theta (the backward).
LaunchPlan plan_rotary(const torch::Tensor& x, int64_t row_stride, const torch::Tensor& out, const torch::Tensor& table,
                       int64_t T, int64_t H, int64_t D, bool inverse);

}  // namespace roformer::kernels
