// FP8 linear layers with per-tensor dynamic scaling; see fp8_linear.h. CMakeLists.txt compiles this
// file with ROFORMER_WITH_CUDA where LibTorch has CUDA (the device's compute capability).
#include "kernels/fp8_linear.h"

#include <torch/torch.h>

#include <ATen/autocast_mode.h>

#include <vector>

#ifdef ROFORMER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace roformer::kernels {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::string to_string(Fp8Format format) { return format == Fp8Format::kE4M3 ? "e4m3" : "e5m2"; }

double fp8_max(Fp8Format format) { return format == Fp8Format::kE4M3 ? 448.0 : 57344.0; }

torch::ScalarType fp8_dtype(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? torch::kFloat8_e4m3fn : torch::kFloat8_e5m2;
}

Tensor fp8_amax(const Tensor& t) {
  if (t.numel() == 0) return torch::zeros({}, t.options().dtype(torch::kFloat));
  return t.abs().max().to(torch::kFloat);
}

Tensor fp8_scale(const Tensor& amax, Fp8Format format) {
  const auto a = amax.to(torch::kFloat);
  const auto usable = torch::isfinite(a).logical_and(a > 0);
  return torch::where(usable, a / fp8_max(format), torch::ones_like(a));
}

Tensor Fp8Tensor::dequantized() const { return data.to(torch::kFloat) * scale; }

Fp8Tensor fp8_quantize(const Tensor& t, const Tensor& scale, Fp8Format format) {
  const double max = fp8_max(format);
  // In fp32: t / scale, clamped so that a value past the range saturates (a plain cast would give
  // NaN in E4M3, inf in E5M2). NaN stays NaN (clamp keeps it).
  auto q = (t.to(torch::kFloat) / scale).clamp(-max, max).to(fp8_dtype(format)).contiguous();
  return {q, scale.to(torch::kFloat), format};
}

Fp8Tensor fp8_quantize(const Tensor& t, Fp8Format format) { return fp8_quantize(t, fp8_scale(fp8_amax(t), format), format); }

namespace {

bool supported_dtype(torch::ScalarType t) { return t == torch::kBFloat16 || t == torch::kHalf || t == torch::kFloat; }

// A matrix operand laid out column-major (what _scaled_mm's second operand must be): t's transpose
// made contiguous, viewed back.
Tensor column_major(const Tensor& t) { return t.t().contiguous().t(); }

// The dtype the layer's output takes: the autocast dtype where autocast is on, else x's.
torch::ScalarType output_dtype(const Tensor& x) {
  const auto device = x.device().type();
  return at::autocast::is_autocast_enabled(device) ? at::autocast::get_autocast_dtype(device) : x.scalar_type();
}

class Fp8LinearFunction : public torch::autograd::Function<Fp8LinearFunction> {
 public:
  // bias: (N) or none (an undefined tensor cannot be an input of a custom Function).
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias_arg) {
    const Tensor bias = bias_arg.value_or(Tensor());
    const int64_t K = x.size(-1), N = weight.size(0);
    const auto out_dtype = output_dtype(x);
    const auto x2 = x.reshape({-1, K});
    const auto xq = fp8_quantize(x2, Fp8Format::kE4M3);
    const auto wq = fp8_quantize(weight, Fp8Format::kE4M3);
    // _scaled_mm adds a bf16 bias for a bf16 output in its epilogue; otherwise the bias is added apart.
    const bool bias_in_epilogue = bias.defined() && out_dtype == torch::kBFloat16;
    std::optional<Tensor> gemm_bias;
    if (bias_in_epilogue) gemm_bias = bias.to(torch::kBFloat16);
    auto y = at::_scaled_mm(xq.data, wq.data.t(), xq.scale, wq.scale, gemm_bias, std::nullopt, out_dtype, /*use_fast_accum=*/true);
    if (bias.defined() && !bias_in_epilogue) y = y + bias.to(out_dtype);
    ctx->save_for_backward({xq.data, xq.scale, wq.data, wq.scale});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["bias"] = bias.defined();
    if (bias.defined()) ctx->saved_data["b_dtype"] = static_cast<int64_t>(bias.scalar_type());
    auto sizes = x.sizes().vec();
    sizes.back() = N;
    return y.view(sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& xq = saved[0];
    const auto& sx = saved[1];
    const auto& wq = saved[2];
    const auto& sw = saved[3];
    const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto w_dtype = static_cast<torch::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    const int64_t N = wq.size(0);
    const auto dy = grads[0].reshape({-1, N});
    const auto g = fp8_quantize(dy, Fp8Format::kE5M2);
    // dx (M, K) = dy (M, N) W (N, K); dW (N, K) = dy^T (N, M) x (M, K): fp32 accumulation, no fast accumulation.
    const auto dx = at::_scaled_mm(g.data, column_major(wq), g.scale, sw, std::nullopt, std::nullopt, x_dtype, false);
    const auto dw = at::_scaled_mm(g.data.t().contiguous(), column_major(xq), g.scale, sx, std::nullopt, std::nullopt,
                                   w_dtype, false);
    Tensor db;
    if (ctx->saved_data["bias"].toBool())
      db = dy.sum(0, /*keepdim=*/false, torch::kFloat)
               .to(static_cast<torch::ScalarType>(ctx->saved_data["b_dtype"].toInt()));
    return {dx.view(ctx->saved_data["x_sizes"].toIntVector()), dw, db};
  }
};

thread_local bool fp8_on = false;

}  // namespace

std::optional<std::string> fp8_linear_unsupported(const Tensor& x, const Tensor& weight) {
  if (!supported_dtype(x.scalar_type()) || !supported_dtype(weight.scalar_type()))
    return "the input or weight is " + std::string(c10::toString(x.scalar_type())) + "/" +
           c10::toString(weight.scalar_type()) + ", not fp32, bf16 or fp16";
  if (weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1)) return "the shapes do not match";
  const int64_t K = weight.size(1), N = weight.size(0), M = x.numel() / std::max<int64_t>(K, 1);
  for (const auto& [name, n] : std::vector<std::pair<const char*, int64_t>>{{"K", K}, {"N", N}, {"M = B*T", M}})
    if (n == 0 || n % 16 != 0)
      return std::string(name) + " = " + std::to_string(n) + " is not a positive multiple of 16";
  if (x.is_cuda()) {
#ifdef ROFORMER_WITH_CUDA
    const auto* props = at::cuda::getDeviceProperties(x.device().index());
    if (props->major * 10 + props->minor < 89)
      return "sm_" + std::to_string(props->major) + std::to_string(props->minor) +
             " has no FP8 tensor cores (8.9 or later)";
#else
    return "built without CUDA";
#endif
  }
  return std::nullopt;
}

Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return Fp8LinearFunction::apply(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt);
}

bool fp8_enabled() { return fp8_on; }

Fp8Scope::Fp8Scope(bool enabled) : previous_(fp8_on) { fp8_on = enabled; }

Fp8Scope::~Fp8Scope() { fp8_on = previous_; }

}  // namespace roformer::kernels
