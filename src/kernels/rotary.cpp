// Rotary of q and k on the packed projection, ATen and Triton paths; see rotary.h.
// B batch, T positions, N heads, D head dimension, H = N D.
#include "kernels/rotary.h"

#include <torch/torch.h>

#include "kernels/op_paths.h"

namespace roformer::kernels {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using torch::indexing::None;
using torch::indexing::Slice;

namespace {

// The fp32 rotation with ATen ops: out_2i = x_2i c - x_2i+1 s, out_2i+1 = x_2i+1 c + x_2i s.
Tensor aten_rotary(const Tensor& qk, const Tensor& table) {
  const int64_t T = qk.size(1), D = qk.size(4);
  auto rows = table.narrow(0, 0, T).to(torch::kFloat);
  auto sin = rows.narrow(1, 0, D / 2).view({1, T, 1, 1, D / 2});  // (1, T, 1, 1, D/2) over (B, T, 2, N, D/2)
  auto cos = rows.narrow(1, D / 2, D / 2).view({1, T, 1, 1, D / 2});
  auto x = qk.to(torch::kFloat);
  auto even = x.index({"...", Slice(0, None, 2)}), odd = x.index({"...", Slice(1, None, 2)});
  return torch::stack({even * cos - odd * sin, odd * cos + even * sin}, -1).flatten(-2).to(qk.scalar_type());
}

std::string rotary_variant(torch::ScalarType dtype, int64_t H) {
  return layer_norm_variant(dtype, H);  // the same dtypes and blocks: H pairs per token
}

class RotaryFunction : public torch::autograd::Function<RotaryFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& qk, const Tensor& table) {
    const int64_t B = qk.size(0), T = qk.size(1), N = qk.size(3), D = qk.size(4);
    auto out = torch::empty({B, T, 2, N, D}, qk.options());
    auto plan = plan_rotary(qk, qk.stride(1), out, table, T, N * D, D, false);
    launch_triton(plan.kernel, plan.variant, qk.device(), plan.grid, plan.args);
    ctx->save_for_backward({table});
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto table = ctx->get_saved_variables()[0];
    auto g = contiguous_aligned(grads[0], "rotary_qk", "the gradient");  // (B, T, 2, N, D), aligned rows
    const int64_t T = g.size(1), N = g.size(3), D = g.size(4);
    auto dqk = torch::empty_like(g);
    auto plan = plan_rotary(g, 2 * N * D, dqk, table, T, N * D, D, true);
    launch_triton(plan.kernel, plan.variant, g.device(), plan.grid, plan.args);
    return {dqk, Tensor()};
  }
};

}  // namespace

LaunchPlan plan_rotary(const Tensor& x, int64_t row_stride, const Tensor& out, const Tensor& table, int64_t T,
                       int64_t H, int64_t D, bool inverse) {
  const int64_t tokens = out.numel() / (2 * H);
#ifdef ROFORMER_WITH_TRITON_KERNELS
  using K = triton::rotary_qk;
  return {K::kKernel, rotary_variant(x.scalar_type(), H), {static_cast<uint32_t>(tokens), 1, 1},
          K::args(x, out, table, T, row_stride, H, D / 2, table.stride(0), inverse)};
#else
  no_triton_kernels("plan_rotary");
#endif
}

std::optional<std::string> triton_rotary_unsupported(const Tensor& qk, const Tensor& table) {
  if (qk.dim() != 5 || qk.size(2) != 2) return "qk is not (B, T, 2, N, D)";
  const auto dtype = qk.scalar_type();
  if (dtype != torch::kBFloat16 && dtype != torch::kFloat) return "dtype is neither bf16 nor fp32";
  const int64_t T = qk.size(1), N = qk.size(3), D = qk.size(4), H = N * D;
  if (H > 4096 || H % 16 != 0 || D % 2 != 0) return "H = " + std::to_string(H) + " is not an even multiple of 16 up to 4096";
  if (qk.stride(4) != 1 || qk.stride(3) != D || qk.stride(2) != H || qk.stride(0) != T * qk.stride(1) ||
      qk.stride(1) % 16 != 0)
    return "a token's q and k are not 2H contiguous features with aligned rows";
  if (table.scalar_type() != torch::kFloat || table.dim() != 2 || table.size(0) < T || table.size(1) != D ||
      !table.is_contiguous() || table.device() != qk.device())
    return "the table is not a contiguous (>= T, D) fp32 tensor on qk's device";
  if (!aligned16(qk) || !aligned16(table)) return "qk or the table is not 16-byte aligned";
  return triton_device_unsupported(qk, "rotary_qk", rotary_variant(dtype, H));
}

Tensor rotary_qk(const Tensor& qk, const Tensor& table, Backend backend) {
  TORCH_CHECK(qk.dim() == 5 && qk.size(2) == 2 && qk.size(4) % 2 == 0 && table.size(0) >= qk.size(1) &&
                  table.size(1) == qk.size(4),
              "rotary_qk: qk ", qk.sizes(), " is not (B, T, 2, N, D) with even D, or the table ", table.sizes(),
              " is not (>= T, D)");
  const auto why_not = backend == Backend::kTriton ? triton_rotary_unsupported(qk, table) : aten_asked_for(qk);
  note_op_path("rotary_qk", why_not);
  return why_not ? aten_rotary(qk, table) : RotaryFunction::apply(qk, table)[0];
}

}  // namespace roformer::kernels
