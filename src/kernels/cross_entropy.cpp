// The MLM loss from (P, V) logits, ATen and Triton paths; see cross_entropy.h.
#include "kernels/cross_entropy.h"

#include <torch/torch.h>

#include <limits>

#include "kernels/op_paths.h"

namespace roformer::kernels {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

const char* dtype_name(torch::ScalarType dtype) { return dtype == torch::kBFloat16 ? "bf16" : "fp32"; }

class CrossEntropyFunction : public torch::autograd::Function<CrossEntropyFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& logits, const Tensor& labels) {
    const int64_t P = logits.size(0);
    auto f32 = logits.options().dtype(torch::kFloat);
    auto loss_rows = torch::empty({P}, f32), correct_rows = torch::empty({P}, f32), lse = torch::empty({P}, f32);
    auto plan = plan_cross_entropy_forward(logits, labels, loss_rows, correct_rows, lse);
    launch_triton(plan.kernel, plan.variant, logits.device(), plan.grid, plan.args);
    ctx->save_for_backward({logits, labels, lse});
    auto correct = correct_rows.sum().to(torch::kLong);
    ctx->mark_non_differentiable({correct});
    return {loss_rows.sum(), correct};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &logits = saved[0], &labels = saved[1], &lse = saved[2];
    auto grad = grads[0].defined() ? grads[0].to(torch::kFloat).contiguous() : torch::zeros({}, lse.options());
    auto dlogits = torch::empty_like(logits, torch::MemoryFormat::Contiguous);
    auto plan = plan_cross_entropy_backward(logits, labels, lse, grad, dlogits);
    launch_triton(plan.kernel, plan.variant, logits.device(), plan.grid, plan.args);
    return {dlogits, Tensor()};
  }
};

}  // namespace

LaunchPlan plan_cross_entropy_forward(const Tensor& logits, const Tensor& labels, const Tensor& loss_rows,
                                      const Tensor& correct_rows, const Tensor& lse) {
#ifdef ROFORMER_WITH_TRITON_KERNELS
  using K = triton::cross_entropy_fwd;
  return {K::kKernel, dtype_name(logits.scalar_type()), {static_cast<uint32_t>(logits.size(0)), 1, 1},
          K::args(logits, labels, loss_rows, correct_rows, lse, logits.size(1), logits.stride(0))};
#else
  no_triton_kernels("plan_cross_entropy_forward");
#endif
}

LaunchPlan plan_cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& lse, const Tensor& grad,
                                       const Tensor& dlogits) {
#ifdef ROFORMER_WITH_TRITON_KERNELS
  using K = triton::cross_entropy_bwd;
  return {K::kKernel, dtype_name(logits.scalar_type()), {static_cast<uint32_t>(logits.size(0)), 1, 1},
          K::args(logits, labels, lse, grad, dlogits, logits.size(1), logits.stride(0), dlogits.stride(0))};
#else
  no_triton_kernels("plan_cross_entropy_backward");
#endif
}

std::optional<std::string> triton_cross_entropy_unsupported(const Tensor& logits, const Tensor& labels) {
  const auto dtype = logits.scalar_type();
  if (dtype != torch::kBFloat16 && dtype != torch::kFloat) return "dtype is neither bf16 nor fp32";
  if (logits.dim() != 2 || logits.stride(1) != 1 || logits.stride(0) % 16 != 0 || logits.size(1) % 16 != 0)
    return "logits are not (P, V) rows of unit stride, V and the row stride multiples of 16";
  if (labels.dim() != 1 || labels.size(0) != logits.size(0) || labels.scalar_type() != torch::kLong ||
      !labels.is_contiguous() || labels.device() != logits.device())
    return "labels are not (P,) int64, contiguous, on the logits' device";
  if (!aligned16(logits) || !aligned16(labels)) return "logits or labels are not 16-byte aligned";
  if (logits.stride(0) > std::numeric_limits<int32_t>::max()) return "the row stride does not fit an int32";
  return triton_device_unsupported(logits, "cross_entropy_fwd", dtype_name(dtype));
}

CrossEntropyOutput cross_entropy_sum(const Tensor& logits, const Tensor& labels, Backend backend) {
  TORCH_CHECK(logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0),
              "cross_entropy_sum: logits ", logits.sizes(), " and labels ", labels.sizes(), " are not (P, V) and (P,)");
  const auto why_not = backend == Backend::kTriton ? triton_cross_entropy_unsupported(logits, labels)
                                                   : aten_asked_for(logits);
  note_op_path("cross_entropy_sum", why_not);
  if (!why_not) {
    auto out = CrossEntropyFunction::apply(logits, labels);
    return {out[0], out[1]};
  }
  namespace F = torch::nn::functional;
  auto loss = F::cross_entropy(logits.to(torch::kFloat), labels, F::CrossEntropyFuncOptions().reduction(torch::kSum));
  auto correct = (logits.detach().argmax(-1).eq(labels) & labels.ge(0)).sum();
  return {loss, correct};
}

}  // namespace roformer::kernels
