// Residual + dropout + LayerNorm, ATen and Triton paths behind one autograd Function; see layer_norm.h.
// M rows of H features: M = x.numel() / H.
#include "kernels/layer_norm.h"

#include <torch/torch.h>

#include <algorithm>

#include "kernels/dropout_rng.h"
#include "kernels/op_paths.h"
#include "kernels/triton_runtime.h"

namespace roformer::kernels {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

constexpr int64_t kMaxWidth = 4096;  // the widest BLOCK_H compiled (layer_norm.py, BLOCKS)
const char* const kOp = "residual_dropout_layer_norm";  // its name in op_paths

// ---- ATen path -------------------------------------------------------------------------------------
variable_list aten_forward(AutogradContext* ctx, const Tensor& x, const Tensor& residual, const Tensor& gamma,
                           const Tensor& beta, double p, double eps, const Tensor& keep) {
  Tensor dropped = x, mask;
  if (p > 0 && keep.defined()) {
    mask = keep;
    dropped = x * keep * (1.0 / (1.0 - p));
  } else if (p > 0) {
    std::tie(dropped, mask) = at::native_dropout(x, p, /*train=*/true);
  }
  // z is a new tensor even without residual and dropout (an input returned as an output would alias it).
  Tensor z = residual.defined() ? residual + dropped : (p > 0 ? dropped : x.clone());
  auto [y, mean, rstd] = at::native_layer_norm(z, {x.size(-1)}, gamma, beta, eps);
  ctx->save_for_backward({z, mean, rstd, gamma, beta, mask});
  return {y, z};
}

// Returns (dx, dresidual, dgamma, dbeta).
std::array<Tensor, 4> aten_backward(AutogradContext* ctx, const Tensor& dy, const Tensor& dz_out, double p,
                                    bool has_residual) {
  const auto saved = ctx->get_saved_variables();
  const Tensor &z = saved[0], &mean = saved[1], &rstd = saved[2], &gamma = saved[3], &beta = saved[4], &mask = saved[5];
  Tensor dz, dgamma, dbeta;
  if (dy.defined()) {
    // needs_input_grad counts the tensor inputs given: x, residual (when given), gamma, beta
    const size_t g = has_residual ? 2 : 1;
    std::tie(dz, dgamma, dbeta) = at::native_layer_norm_backward(dy, z, {z.size(-1)}, mean, rstd, gamma, beta,
                                                                 {true, ctx->needs_input_grad(g), ctx->needs_input_grad(g + 1)});
    if (dz_out.defined()) dz = dz + dz_out;
  } else {
    dz = dz_out;
  }
  Tensor dx = p > 0 ? at::native_dropout_backward(dz, mask, 1.0 / (1.0 - p)) : dz;
  return {dx, has_residual ? dz : Tensor(), dgamma, dbeta};
}

// ---- Triton path -----------------------------------------------------------------------------------
variable_list triton_forward(AutogradContext* ctx, const Tensor& x, const Tensor& residual, const Tensor& gamma,
                             const Tensor& beta, double p, double eps) {
  const int64_t H = x.size(-1), M = x.numel() / H;
  auto z = torch::empty_like(x), y = torch::empty_like(x);
  auto f32 = x.options().dtype(torch::kFloat);
  auto mean = torch::empty({M}, f32), rstd = torch::empty({M}, f32);
  auto rng_used = torch::empty({2}, x.options().dtype(torch::kLong));  // (seed, offset) the mask was drawn with
  DropoutRng rng;
  if (p > 0) rng = reserve_dropout_rng(x.device(), M * H);
  auto plan = plan_layer_norm_forward(x, residual, gamma, beta, z, y, mean, rstd, rng, rng_used, p, eps);
  launch_triton(plan.kernel, plan.variant, x.device(), plan.grid, plan.args);
  ctx->save_for_backward({z, mean, rstd, gamma, rng_used});
  return {y, z};
}

std::array<Tensor, 4> triton_backward(AutogradContext* ctx, Tensor dy, const Tensor& dz_out, double p,
                                      bool has_residual) {
  const bool need_dr = has_residual && ctx->needs_input_grad(1);  // residual, when given, is tensor input 1
  const auto saved = ctx->get_saved_variables();
  const Tensor &z = saved[0], &mean = saved[1], &rstd = saved[2], &gamma = saved[3], &rng_used = saved[4];
  const int64_t H = z.size(-1), M = z.numel() / H;
  if (!dy.defined()) dy = torch::zeros_like(z);  // only z was used downstream
  // The kernel assumes 16-byte aligned rows, as the forward checked for its inputs.
  dy = contiguous_aligned(dy, kOp, "dy");
  const Tensor dz_in = dz_out.defined() ? contiguous_aligned(dz_out, kOp, "dz") : Tensor();
  const auto [rows, programs] = layer_norm_backward_blocks(M, z.device());
  const bool store_dr = need_dr || p == 0;  // without dropout dx is dz: stored once, returned twice
  auto dr = store_dr ? torch::empty_like(z) : Tensor();
  auto dx = p > 0 ? torch::empty_like(z) : dr;
  auto partial = torch::empty({2, programs, H}, z.options().dtype(torch::kFloat));  // dgamma, dbeta per program
  auto plan = plan_layer_norm_backward(dy, dz_in, z, gamma, mean, rstd, rng_used, dr, dx, partial, rows, p,
                                       p > 0 ? DropoutAt::kInput : DropoutAt::kNone);
  launch_triton(plan.kernel, plan.variant, z.device(), plan.grid, plan.args);
  auto sums = partial.sum(1).to(gamma.scalar_type());  // (2, H)
  return {dx, need_dr ? dr : Tensor(), sums[0], sums[1]};
}

class ResidualDropoutLayerNormFunction : public torch::autograd::Function<ResidualDropoutLayerNormFunction> {
 public:
  // residual and keep are optional: an undefined Tensor given to apply() as an input fails there.
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const std::optional<Tensor>& residual_arg,
                               const Tensor& gamma, const Tensor& beta, double p, double eps, bool triton,
                               const std::optional<Tensor>& keep_arg) {
    const Tensor residual = residual_arg.value_or(Tensor()), keep = keep_arg.value_or(Tensor());
    ctx->set_materialize_grads(false);  // an unused z gets no zero-filled gradient
    ctx->saved_data["p"] = p;
    ctx->saved_data["triton"] = triton;
    ctx->saved_data["residual"] = residual.defined();
    return triton ? triton_forward(ctx, x, residual, gamma, beta, p, eps)
                  : aten_forward(ctx, x, residual, gamma, beta, p, eps, keep);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const double p = ctx->saved_data["p"].toDouble();
    const bool residual = ctx->saved_data["residual"].toBool();
    if (!grads[0].defined() && !grads[1].defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    auto [dx, dr, dgamma, dbeta] = ctx->saved_data["triton"].toBool()
                                       ? triton_backward(ctx, grads[0], grads[1], p, residual)
                                       : aten_backward(ctx, grads[0], grads[1], p, residual);
    return {dx, dr, dgamma, dbeta, Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

std::string layer_norm_variant(torch::ScalarType dtype, int64_t H) {
  TORCH_CHECK(H > 0 && H <= kMaxWidth, "layer_norm_variant: H = ", H, " outside 1..", kMaxWidth);
  const char* type = dtype == torch::kBFloat16 ? "bf16" : "fp32";
  return std::string(type) + (H <= 256 ? "_256" : H <= 1024 ? "_1024" : "_4096");
}

LaunchPlan plan_layer_norm_forward(const Tensor& x, const Tensor& residual, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& z, const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                   const DropoutRng& rng, const Tensor& rng_used, double p, double eps) {
  const int64_t H = x.size(-1), M = x.numel() / H;
  const bool dropout = p > 0;
#ifdef ROFORMER_WITH_TRITON_KERNELS
  // Without dropout SEED/OFFSET are not read: any int64 pointer will do.
  const int64_t* seed = dropout ? rng.seed : rng_used.data_ptr<int64_t>();
  const int64_t* offset = dropout ? rng.offset : rng_used.data_ptr<int64_t>();
  using K = triton::residual_dropout_layer_norm_fwd;
  return {K::kKernel, layer_norm_variant(x.scalar_type(), H), {static_cast<uint32_t>(M), 1, 1},
          K::args(x, residual.defined() ? residual : x, gamma, beta, z, y, mean, rstd, seed, offset, rng_used,
                  dropout ? rng.offset_add : 0, H,
                  H, H, H, H,  // row strides of x, residual, z, y: contiguous rows
                  p, eps, residual.defined(), dropout)};
#else
  no_triton_kernels("plan_layer_norm_forward");
#endif
}

LaunchPlan plan_layer_norm_backward(const Tensor& dy, const Tensor& dz_in, const Tensor& z, const Tensor& gamma,
                                    const Tensor& mean, const Tensor& rstd, const Tensor& rng_used, const Tensor& dr,
                                    const Tensor& dx, const Tensor& partial, int64_t rows, double p,
                                    DropoutAt dropout_at) {
  const int64_t H = z.size(-1), M = z.numel() / H, programs = partial.size(1);
  const bool dropout = dropout_at == DropoutAt::kInput;  // dx written
#ifdef ROFORMER_WITH_TRITON_KERNELS
  using K = triton::residual_dropout_layer_norm_bwd;
  // Unused pointers (dz_in, dr or dx) are given another tensor of the type: never read or written.
  return {K::kKernel, layer_norm_variant(z.scalar_type(), H), {static_cast<uint32_t>(programs), 1, 1},
          K::args(dy, dz_in.defined() ? dz_in : dy, z, gamma, mean, rstd, rng_used, dr.defined() ? dr : dx,
                  dropout ? dx : dr, partial[0], partial[1], M, H, rows,
                  H, H, H, H, H,  // row strides of dy, dz_in, z, dr, dx: contiguous rows
                  p, dz_in.defined(), static_cast<int>(dropout_at), dr.defined())};
#else
  no_triton_kernels("plan_layer_norm_backward");
#endif
}

std::pair<int64_t, int64_t> layer_norm_backward_blocks(int64_t M, const torch::Device& device) {
  const int64_t target = std::max<int64_t>(1, std::min<int64_t>(M, 4 * device_sm_count(device)));
  const int64_t rows = (M + target - 1) / target;
  return {rows, (M + rows - 1) / rows};
}

std::optional<std::string> triton_layer_norm_unsupported(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                                         const Tensor& beta) {
  const auto dtype = x.scalar_type();
  if (dtype != torch::kBFloat16 && dtype != torch::kFloat) return "dtype is neither bf16 nor fp32";
  const int64_t H = x.size(-1);
  if (H == 0 || H > kMaxWidth) return "H = " + std::to_string(H) + " is outside 1.." + std::to_string(kMaxWidth);
  if (residual.defined() && (residual.sizes() != x.sizes() || residual.scalar_type() != dtype))
    return "residual differs from x in shape or dtype";
  for (const Tensor* t : {&gamma, &beta})
    if (t->dim() != 1 || t->size(0) != H || t->scalar_type() != dtype) return "gamma/beta are not (H,) of x's dtype";
  if (H % 16 != 0) return "H = " + std::to_string(H) + " is not a multiple of 16 (the kernels assume aligned rows)";
  for (const Tensor* t : {&x, &residual, &gamma, &beta})
    if (t->defined() && (!t->is_contiguous() || !aligned16(*t))) return "an input is not contiguous and 16-byte aligned";
  if (residual.defined() && residual.device() != x.device()) return "residual is on another device";
  return triton_device_unsupported(x, "residual_dropout_layer_norm_fwd", layer_norm_variant(dtype, H));
}

ResidualLayerNormOutput residual_dropout_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                                    const Tensor& beta, double p, double eps, Backend backend,
                                                    const Tensor& keep) {
  TORCH_CHECK(p >= 0 && p < 1, "residual_dropout_layer_norm: p = ", p, " outside [0, 1)");
  TORCH_CHECK(!keep.defined() || backend == Backend::kAten, "an explicit keep mask is for the ATen path only");
  const auto why_not = backend == Backend::kTriton ? triton_layer_norm_unsupported(x, residual, gamma, beta)
                                                   : aten_asked_for(x);
  note_op_path(kOp, why_not);
  const bool triton = !why_not;
  auto optional = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  auto out = ResidualDropoutLayerNormFunction::apply(x, optional(residual), gamma, beta, p, eps, triton, optional(keep));
  return {out[0], out[1]};
}

}  // namespace roformer::kernels
