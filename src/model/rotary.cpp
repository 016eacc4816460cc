// Rotary position embedding; see rotary.h for the formulas.
#include "model/rotary.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <vector>

#include <fmt/format.h>

#include "kernels/rotary.h"
#include "model/kernel_policy.h"
#include "model/options.h"
#include "model/position.h"

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

torch::Tensor rotary_rows(const torch::Tensor& table, int64_t seq_len, double base) {
  if (seq_len <= table.size(0)) return table;
  // theta_i does not depend on P and each row is computed from its own position, so rows < P equal
  // the buffer's exactly; only longer inputs (evaluation beyond the training length) pay for it.
  return rotary_table(seq_len, table.size(1), base).to(table.device());
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

namespace {

// PositionInputs::fixed, per rotary base: the (T, D) rows of the forward, sin_pos and cos_pos, then
// (fused_rotary) the (T, D) fp32 rows of the table, sin | cos. The global layers' base first, then,
// with model.local_rotary_base, the local layers' in the same form (from fixed.size() / 2 on).
constexpr size_t kSin = 0, kCos = 1, kTable = 2;

// q and k, (B, T, 2, N, D) with each token's 2H features contiguous, rotated by the fused op
// (KernelPolicy::fused_rotary): (B, N, T, D) each, (B, T, N, D)-strided.
std::array<torch::Tensor, 2> rotate_qk_fused(const torch::Tensor& qk, const torch::Tensor& table) {
  auto rotated = kernels::rotary_qk(qk, table, kernels::backend_for(qk.device())).unbind(2);
  return {rotated[0].transpose(1, 2), rotated[1].transpose(1, 2)};
}

// One layer's rotation in the form the kernel policy gives its device (model/kernel_policy.h).
class RotaryAttention final : public AttentionPositions {
 public:
  // own_base: a local layer of a model with model.local_rotary_base (the second rows of fixed).
  RotaryAttention(bool rotate_values, bool own_base) : rotate_values_(rotate_values), own_base_(own_base) {}

  void transform(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, const PositionInputs& inputs) const override {
    if (rotate_values_) v = rotate(v, inputs);
    if (kernel_policy().fused_rotary) {  // separate projections: packed (one copy) for the one op
      auto rotated = rotate_qk_fused(torch::stack({q.transpose(1, 2), k.transpose(1, 2)}, 2), row(inputs, kTable));
      q = rotated[0];
      k = rotated[1];
      return;
    }
    q = rotate(q, inputs);
    k = rotate(k, inputs);
  }

  std::array<torch::Tensor, 3> transform_packed(const torch::Tensor& qkv, const PositionInputs& inputs) const override {
    const bool fused_op = kernel_policy().fused_rotary;
    if (!fused_op && rotary_impl(qkv.device()) != RotaryImpl::kFused)
      return AttentionPositions::transform_packed(qkv, inputs);
    // q and k rotated together: one rotation for both (positions along dim 1 of (B, T, 2, N, D)).
    // Split and unbind rather than narrow/select: their backward is one cat/stack.
    auto parts = qkv.split_with_sizes({2, 1}, 2);
    auto v = parts[1].squeeze(2).transpose(1, 2);
    if (rotate_values_) v = rotate(v, inputs);
    if (fused_op) {  // the kernel reads q and k in place from the projection
      auto [q, k] = rotate_qk_fused(parts[0], row(inputs, kTable));
      return {q, k, v};
    }
    auto qk = apply_rotary_fused(parts[0], row(inputs, kSin), row(inputs, kCos), /*seq_dim=*/1).unbind(2);
    return {qk[0].transpose(1, 2), qk[1].transpose(1, 2), v};
  }

  torch::Tensor transform_features(const torch::Tensor& features, const PositionInputs& inputs) const override {
    return rotate(features, inputs);
  }

 private:
  torch::Tensor rotate(const torch::Tensor& x, const PositionInputs& inputs) const {  // x: (B, N, T, D)
    const auto& sin_pos = row(inputs, kSin);
    const auto& cos_pos = row(inputs, kCos);
    if (rotary_impl(x.device()) == RotaryImpl::kFused) return apply_rotary_fused(x, sin_pos, cos_pos, /*seq_dim=*/-2);
    return apply_rotary(x, sin_pos, cos_pos);
  }
  // The `which` tensor of this layer's base in PositionInputs::fixed.
  const torch::Tensor& row(const PositionInputs& inputs, size_t which) const {
    return inputs.fixed[(own_base_ ? inputs.fixed.size() / 2 : 0) + which];
  }
  bool rotate_values_;
  bool own_base_;
};

class RotaryPositions final : public PositionScheme {
 public:
  explicit RotaryPositions(const RoFormerOptions& o)
      : rows_(o.model().max_position_embeddings), head_dim_(o.model().hidden_size / o.model().num_heads),
        base_(o.model().rotary_base), rotate_values_(o.model().rotary_value) {
    const auto& m = o.model();
    // Local layers with a base of their own (ModernBERT: 10000 where its global layers take 160000).
    if (m.local_attention > 0 && m.local_rotary_base > 0 && m.local_rotary_base != m.rotary_base)
      local_base_ = m.local_rotary_base;
  }

  // First in the encoder, as HF RoFormerEncoder's embed_positions; the local layers' table beside it.
  void register_encoder_front(torch::nn::Module& encoder) override {
    auto group = encoder.register_module("embed_positions", std::make_shared<torch::nn::Module>());
    table_ = group->register_buffer("weight", rotary_table(rows_, head_dim_, base_));
    if (local_base_ > 0) local_table_ = group->register_buffer("local_weight", rotary_table(rows_, head_dim_, local_base_));
  }

  std::shared_ptr<AttentionPositions> register_attention(torch::nn::Module&, const torch::nn::Linear&,
                                                         const torch::nn::Linear&, bool local) override {
    return std::make_shared<RotaryAttention>(rotate_values_, local && local_base_ > 0);
  }

  PositionInputs prepare(const torch::Tensor& x) override {
    PositionInputs inputs;
    add_rows(inputs.fixed, table_, base_, x);
    if (local_base_ > 0) add_rows(inputs.fixed, local_table_, local_base_, x);
    return inputs;
  }

  // The (P, D) float32 table is computed in float64: the angles, their sines and cosines and the
  // concatenation (P x D/2 x 8 bytes each, then P x D x 8) live at once with the float32 copy, about
  // 24 P D bytes at the peak, 4 P D after; a local base adds its own table.
  std::vector<TableSize> tables() const override {
    const double tables = local_base_ > 0 ? 2.0 : 1.0;
    return {{"model.max_position_embeddings", 0.0,
             tables * 24.0 * static_cast<double>(rows_) * static_cast<double>(head_dim_)}};
  }
  std::string description() const override {
    std::string out = rotate_values_ ? "rotary positions (values rotated too)" : "rotary positions";
    if (local_base_ > 0) out += fmt::format(" (base {:g}, local layers {:g})", base_, local_base_);
    return out;
  }

 private:
  // The fixed rows of one base for x (B, T, H): see kSin, kCos, kTable.
  static void add_rows(std::vector<torch::Tensor>& fixed, const torch::Tensor& table, double base,
                       const torch::Tensor& x) {
    const int64_t T = x.size(1);
    auto [sin_pos, cos_pos] = rotary_sin_cos(rotary_rows(table, T, base), T);  // (T, D) each
    if (rotary_impl(x.device()) != RotaryImpl::kFused) {  // fused rotates in fp32
      sin_pos = sin_pos.to(rotary_dtype(x));  // the dtype of q and k, autocast included
      cos_pos = cos_pos.to(rotary_dtype(x));
    }
    fixed.push_back(sin_pos);
    fixed.push_back(cos_pos);
    // The fused op's fp32 rows (a no-op cast unless bf16 parameters cast the buffer).
    if (kernel_policy().fused_rotary) fixed.push_back(rotary_rows(table, T, base).narrow(0, 0, T).to(torch::kFloat));
  }
  int64_t rows_, head_dim_;
  double base_;
  double local_base_ = 0;  // the local layers' own base; 0: they take base_
  bool rotate_values_;
  torch::Tensor table_;        // (P, D) sin|cos, the buffer embed_positions.weight
  torch::Tensor local_table_;  // (P, D) of local_base_, the buffer embed_positions.local_weight
};

}  // namespace

std::shared_ptr<PositionScheme> make_rotary_positions(const RoFormerOptions& options) {
  return std::make_shared<RotaryPositions>(options);
}

void validate_rotary_keys(const config::ModelConfig& m, bool chosen) {
  if (m.attention == config::Attention::kLinear && m.rotary_value)
    config::invalid("model.rotary_value is only supported with model.attention: softmax");
  if (!chosen && m.rotary_value)
    config::invalid("model.rotary_value needs model.position: rotary (got " + config::to_string(m.position) +
                    "); set model.rotary_value: false");
  if (!chosen && m.local_rotary_base != config::ModelConfig().local_rotary_base)
    config::invalid(fmt::format("model.local_rotary_base = {} needs model.position: rotary (got {}); remove it",
                                m.local_rotary_base, config::to_string(m.position)));
}

}  // namespace roformer::model
