// Rotary position embedding (RoPE, Su et al. 2021, "RoFormer", eq. 13/34) in Hugging Face
// RoFormer's layout, so weights are interchangeable with RoFormerForMaskedLM.
//
// theta_i = base^(-2i/D), i = 0 .. D/2-1. The table (P, D) holds sin(m theta_i) in columns
// [0, D/2) and cos(m theta_i) in [D/2, D) for positions m < P (HF's
// RoFormerSinusoidalPositionalEmbedding). Pairs are adjacent dimensions (2i, 2i+1):
//   x'_{2i}   = x_{2i} cos(m theta_i) - x_{2i+1} sin(m theta_i)
//   x'_{2i+1} = x_{2i+1} cos(m theta_i) + x_{2i} sin(m theta_i)
// computed element-wise as x * cos_pos + rotate_half(x) * sin_pos, where
// rotate_half(x) = [-x1, x0, -x3, x2, ...] and sin_pos = [s0, s0, s1, s1, ...] (repeat-interleave).
// As a position scheme (model.position: rotary, position.h): the table is the encoder's buffer
// embed_positions.weight (HF's name; not trained); every layer rotates its q and k (and v with
// model.rotary_value), in the form the kernel policy gives its device (model/kernel_policy.h), or its feature maps
// under linear attention.
#pragma once

#include <torch/types.h>

#include <memory>
#include <utility>

#include "core/config.h"

namespace roformer::model {

class PositionScheme;
struct RoFormerOptions;

// The (P, D) sin|cos table above, float32, computed in double like HF's numpy code.
torch::Tensor rotary_table(int64_t max_positions, int64_t head_dim, double base = 10000.0);

// The table with at least seq_len rows: `table` itself when seq_len <= P, otherwise a (seq_len, D)
// table built by the same formula (base: its rotary base), whose first P rows equal `table` bit for
// bit. RoPE needs no learned rows, so a model trained at length T runs at any length (the buffer,
// and so a checkpoint or export, keeps its P rows).
torch::Tensor rotary_rows(const torch::Tensor& table, int64_t seq_len, double base);

// (T, D) sin_pos and cos_pos for the first T rows of the table (each value repeated twice).
std::pair<torch::Tensor, torch::Tensor> rotary_sin_cos(const torch::Tensor& table, int64_t seq_len);

// [-x1, x0, -x3, x2, ...] along the last dimension.
torch::Tensor rotate_half(const torch::Tensor& x);

// The dtype the (T, D) tables take for an encoder input x: under autocast on x's device the query
// and key projections return the autocast dtype (bf16/fp16), so the tables take that dtype; float32
// tables would promote the rotated q and k (and the backward) back to float32.
torch::ScalarType rotary_dtype(const torch::Tensor& x);

// x: (..., T, D); sin_pos, cos_pos: (T, D). Element-wise form; no rotation matrix is built. The
// result has x's dtype (the tables are cast to it if they differ).
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& sin_pos, const torch::Tensor& cos_pos);

// apply_rotary as one complex multiply: the pair (x_2i, x_2i+1) read as x_2i + i x_2i+1, times
// e^{i m theta_i} = cos + i sin, gives (x_2i cos - x_2i+1 sin) + i (x_2i+1 cos + x_2i sin): the same
// rotation, computed in fp32 and rounded once to x's dtype (three kernels forward, three backward,
// instead of about ten; in bf16 also closer to the exact rotation). x: (..., D) with the positions
// along dimension seq_dim (size T); sin_pos, cos_pos: (T, D) as rotary_sin_cos gives them, any dtype.
torch::Tensor apply_rotary_fused(const torch::Tensor& x, const torch::Tensor& sin_pos, const torch::Tensor& cos_pos,
                                 int64_t seq_dim);

std::shared_ptr<PositionScheme> make_rotary_positions(const RoFormerOptions& options);
// The rules of rotary's keys (model.rotary_value; model.rotary_base any positive value), `chosen`
// when model.position is rotary (position.h validate_position_keys).
void validate_rotary_keys(const config::ModelConfig& model, bool chosen);

}  // namespace roformer::model
