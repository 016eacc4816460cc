// Rotary position embedding; see rotary.h for the formulas.
#include "model/rotary.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <vector>

namespace roformer::model {

torch::Tensor rotary_table(int64_t max_positions, int64_t head_dim, double base) {
  TORCH_CHECK(head_dim % 2 == 0, "rotary embedding needs an even head dimension, got ", head_dim);
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto pos = torch::arange(max_positions, f64).unsqueeze(1);           // (P, 1)
  auto i = torch::arange(head_dim / 2, f64);                           // (D/2)
  // HF: pos / base^(2 (j // 2) / D) for even j = 2i.
  auto angle = pos / torch::pow(base, 2.0 * i / static_cast<double>(head_dim));  // (P, D/2)
  return torch::cat({angle.sin(), angle.cos()}, 1).to(torch::kFloat32);         // (P, D)
}

std::pair<torch::Tensor, torch::Tensor> rotary_sin_cos(const torch::Tensor& table, int64_t seq_len) {
  TORCH_CHECK(seq_len <= table.size(0), "sequence length ", seq_len, " exceeds max_position_embeddings ",
              table.size(0));
  auto rows = table.narrow(0, 0, seq_len);  // (T, D)
  auto halves = rows.chunk(2, -1);          // sin, cos: (T, D/2)
  // [s0, s1, ...] -> [s0, s0, s1, s1, ...], as HF's torch.stack([sin, sin], -1).reshape_as(...).
  auto sin_pos = torch::stack({halves[0], halves[0]}, -1).reshape_as(rows);
  auto cos_pos = torch::stack({halves[1], halves[1]}, -1).reshape_as(rows);
  return {sin_pos, cos_pos};
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  using torch::indexing::Slice;
  using torch::indexing::Ellipsis;
  auto odd = x.index({Ellipsis, Slice(1, torch::indexing::None, 2)});
  auto even = x.index({Ellipsis, Slice(0, torch::indexing::None, 2)});
  return torch::stack({-odd, even}, -1).reshape_as(x);
}

torch::ScalarType rotary_dtype(const torch::Tensor& x) {
  const auto type = x.device().type();
  return at::autocast::is_autocast_enabled(type) ? at::autocast::get_autocast_dtype(type) : x.scalar_type();
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& sin_pos, const torch::Tensor& cos_pos) {
  const auto dtype = x.scalar_type();  // .to() is free when the encoder already cast the tables
  return x * cos_pos.to(dtype) + rotate_half(x) * sin_pos.to(dtype);
}

torch::Tensor apply_rotary_fused(const torch::Tensor& x, const torch::Tensor& sin_pos, const torch::Tensor& cos_pos,
                                 int64_t seq_dim) {
  using torch::indexing::None;
  using torch::indexing::Slice;
  const int64_t T = sin_pos.size(0), D = sin_pos.size(1);
  TORCH_CHECK(x.size(-1) == D && x.size(seq_dim) == T, "apply_rotary_fused: x ", x.sizes(), " does not match the (",
              T, ", ", D, ") tables along dim ", seq_dim);
  // cos_pos and sin_pos hold each angle twice ([c0, c0, c1, c1, ...]): one per pair.
  auto rotation = torch::complex(cos_pos.index({Slice(), Slice(0, None, 2)}).to(torch::kFloat),
                                 sin_pos.index({Slice(), Slice(0, None, 2)}).to(torch::kFloat));  // (T, D/2)
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[static_cast<size_t>(seq_dim < 0 ? seq_dim + x.dim() : seq_dim)] = T;
  shape.back() = D / 2;
  auto xf = x.to(torch::kFloat);  // a new fp32 tensor for bf16/fp16 x (strides kept where dense)
  // view_as_complex needs even strides and an even storage offset (true for views of q/k/v).
  if (xf.storage_offset() % 2 != 0) xf = xf.contiguous();
  auto rotated = torch::view_as_complex(xf.unflatten(-1, {D / 2, 2})) * rotation.view(shape);
  return torch::view_as_real(rotated).flatten(-2).to(x.scalar_type());
}

torch::Tensor rotation_matrices(const torch::Tensor& sin_pos, const torch::Tensor& cos_pos) {
  using torch::indexing::Slice;
  const int64_t T = sin_pos.size(0), D = sin_pos.size(1);
  auto R = torch::zeros({T, D, D}, sin_pos.options());  // (T, D, D)
  auto c = cos_pos.index({Slice(), Slice(0, torch::indexing::None, 2)});  // (T, D/2)
  auto s = sin_pos.index({Slice(), Slice(0, torch::indexing::None, 2)});
  auto even = torch::arange(0, D, 2, torch::TensorOptions().dtype(torch::kLong).device(sin_pos.device()));
  auto odd = even + 1;
  // Block i: [[cos, -sin], [sin, cos]] at rows/cols (2i, 2i+1).
  R.index_put_({Slice(), even, even}, c);
  R.index_put_({Slice(), even, odd}, -s);
  R.index_put_({Slice(), odd, even}, s);
  R.index_put_({Slice(), odd, odd}, c);
  return R;
}

torch::Tensor apply_rotary_matrix(const torch::Tensor& x, const torch::Tensor& sin_pos, const torch::Tensor& cos_pos) {
  auto R = rotation_matrices(sin_pos, cos_pos);  // (T, D, D)
  // x'_{..., t, e} = sum_d R_{t, e, d} x_{..., t, d}
  return torch::matmul(R, x.unsqueeze(-1)).squeeze(-1);
}

}  // namespace roformer::model
