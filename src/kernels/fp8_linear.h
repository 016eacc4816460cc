// FP8 GEMMs for the encoder layers' linear layers (issue 51; train.fp8, off by default): q, k and v,
// the attention output and the feed-forward block compute y = x W^T + b through at::_scaled_mm with
// per-tensor dynamic scaling; attention itself, the embeddings and the MLM head stay bf16, the
// parameters stay what they are (fp32 masters, bf16 compute copies), checkpoints are unchanged.
//
// Per-tensor dynamic scaling: a tensor t is stored as q = saturate(t / s) in an FP8 format with
// s = amax(|t|) / max_format, so its largest element maps to the format's largest finite value and
// t ~ q s (s is the dequantization scale _scaled_mm takes). Nothing is read back to the host: amax
// and s stay on the device, so the step can be captured in a CUDA graph.
//
//   forward   y  = (x_q s_x) (W_q s_w)^T + b      x, W in E4M3 (3 mantissa bits, max 448)
//   backward  dx = (dy_q s_dy) (W_q s_w)           dy in E5M2 (2 mantissa bits, max 57344: the range
//             dW = (dy_q s_dy)^T (x_q s_x)          gradients need); x_q and W_q as saved by the forward
//             db = sum_rows(dy)                     in fp32, from dy as it came
// The products accumulate in fp32 (_scaled_mm); y comes back in the dtype the layer computes in (the
// autocast dtype, or x's), dx in x's dtype, dW in W's.
//
// _scaled_mm's CUDA kernels need FP8 tensor cores (compute capability 8.9 or later) and every GEMM
// dimension a multiple of 16 (M = B*T tokens is the weight gradient's inner dimension); where that
// does not hold the caller runs its bf16 linear and says why once (op_paths.h, fp8_linear_unsupported).
// On the CPU _scaled_mm runs too (this wheel's reference implementation), which is how the scaling,
// the saturation and the formats are tested here (tests/unit/test_fp8.cpp); the device's numerics and
// graphs in tests/gpu.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

namespace roformer::kernels {

enum class Fp8Format {
  kE4M3,  // float8_e4m3fn: activations and weights (max 448, no infinities)
  kE5M2,  // float8_e5m2: gradients (max 57344)
};
std::string to_string(Fp8Format format);
// The largest finite value of the format.
double fp8_max(Fp8Format format);
torch::ScalarType fp8_dtype(Fp8Format format);

// max |t| as a 0-dim fp32 tensor on t's device (0 for an empty tensor).
torch::Tensor fp8_amax(const torch::Tensor& t);
// The dequantization scale amax / max_format (0-dim fp32); 1 where amax is 0 or not finite, so a zero
// tensor stays zero and a non-finite one stays non-finite (the step's non-finite check sees it).
torch::Tensor fp8_scale(const torch::Tensor& amax, Fp8Format format);

// A tensor in FP8 with its dequantization scale: t ~ data * scale.
struct Fp8Tensor {
  torch::Tensor data;   // the FP8 values, t's shape, contiguous
  torch::Tensor scale;  // 0-dim fp32
  Fp8Format format = Fp8Format::kE4M3;
  // data * scale in fp32.
  torch::Tensor dequantized() const;
};
// t / scale rounded to `format`, saturated to +-max_format (a value past the range becomes the
// largest finite value of its sign rather than inf or NaN).
Fp8Tensor fp8_quantize(const torch::Tensor& t, const torch::Tensor& scale, Fp8Format format);
// Dynamic scaling: the scale from t's own amax.
Fp8Tensor fp8_quantize(const torch::Tensor& t, Fp8Format format);

// Why y = x W^T (+ b) cannot run as FP8 GEMMs (nullopt: it can): a dtype other than fp32/bf16/fp16,
// a dimension that is not a multiple of 16, a GPU without FP8 tensor cores.
std::optional<std::string> fp8_linear_unsupported(const torch::Tensor& x, const torch::Tensor& weight);
// y = x W^T + b (x (..., K), W (N, K), b (N) or undefined) with the FP8 GEMMs above, differentiable
// in x, W and b. Precondition: fp8_linear_unsupported(x, weight) is nullopt.
torch::Tensor fp8_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// Whether the linear layers of the encoder compute in FP8 in this thread (Fp8Scope; train.fp8).
bool fp8_enabled();
// FP8 linear layers on (or off) for as long as it lives, then the previous state (as AutocastScope:
// the training step's forward; gradient checkpointing replays the forward's state).
class Fp8Scope {
 public:
  explicit Fp8Scope(bool enabled);
  ~Fp8Scope();
  Fp8Scope(const Fp8Scope&) = delete;
  Fp8Scope& operator=(const Fp8Scope&) = delete;

 private:
  bool previous_;
};

}  // namespace roformer::kernels
