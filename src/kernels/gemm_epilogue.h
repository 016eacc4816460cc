// Linear layers through cuBLASLt with epilogues (issue 51; KernelPolicy::gemm_epilogues, off until a
// device has measured it): the bias, the tanh GELU and their gradients computed inside the GEMMs
// instead of by separate kernels.
//
//   forward   y = x W^T + b                   one GEMM, b added in its epilogue (BIAS)
//             h = gelu_tanh(x W1^T + b1)      one GEMM, b1 and the GELU in its epilogue, which also
//                                             writes the pre-activation z for the backward (GELU_AUX_BIAS)
//   backward  dW, db = dy^T x, sum_rows(dy)   one GEMM, the bias gradient in its epilogue (BGRADB)
//             dz = (dy W2) * gelu_tanh'(z)    the FFN's down-projection's input gradient through the
//                                             GELU, one GEMM (DGELU reading z); then dW1, db1 from dz
//                                             by the BGRADB GEMM
//   dx = dy W stays ATen's GEMM (no epilogue to add).
//
// cuBLASLt is column-major; a row-major (R, C) matrix is its (C, R) with leading dimension C. Each
// GEMM is planned from the tensors' shapes and strides as a plain value (GemmPlan: which operand is
// transposed, m, n, k, leading dimensions, the epilogue, the aux matrix's leading dimension, the
// workspace): the plans are tested on any machine (tests/unit/test_gemm_epilogue.cpp runs them on CPU
// tensors through a column-major reading of the same numbers), the launches on the device
// (tests/gpu/test_gpu_kernels.cpp, against ATen). The launch runs on the current stream with ATen's
// cuBLASLt handle and its workspace (allocated once per stream outside any capture, as ATen's own
// GEMMs use them: CUDA-graph safe).
//
// An op whose GEMMs cannot be planned (a dtype other than bf16/fp16/fp32, rows that are not 16-byte
// aligned, autocast, the CPU) runs its ATen composition instead, and says so once (op_paths.h).
// Dimensions: M rows (B*T tokens), K input features, N output features (I for the FFN's inner width).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace roformer::kernels {

enum class Epilogue {
  kDefault,      // D = op(A) op(B)
  kBias,         // D = op(A) op(B) + bias (length m, along D's rows)
  kGeluAux,      // aux = op(A) op(B); D = gelu_tanh(aux)
  kGeluAuxBias,  // aux = op(A) op(B) + bias; D = gelu_tanh(aux)
  kDGelu,        // D = op(A) op(B) * gelu_tanh'(aux)
  kBgradB,       // D = op(A) op(B); bias = op(B) summed over k (length n)
};
std::string to_string(Epilogue e);

// One cuBLASLt matmul, column-major: D (m x n, ldd) = op(A) (m x k) op(B) (k x n), A stored (m x k)
// or, transposed, (k x m) with leading dimension lda (B likewise with ldb); the epilogue's aux matrix
// (m x n) has leading dimension aux_ld. why_not non-empty: no plan (the reason), the op takes ATen.
struct GemmPlan {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  Epilogue epilogue = Epilogue::kDefault;
  int64_t aux_ld = 0;            // 0 without an aux matrix
  torch::ScalarType dtype = torch::kFloat;  // A, B, D, bias and aux
  int64_t workspace = 0;         // bytes the algorithm may use (ATen's cuBLASLt workspace; set at launch)
  std::string why_not;

  bool ok() const { return why_not.empty(); }
};

// y (M, N) = x (M, K) W (N, K)^T (+ bias (N)), gelu: then the tanh GELU, the pre-activation into an
// aux (M, N). A = W (transposed), B = x: m = N, n = M, k = K.
GemmPlan plan_linear_forward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, bool gelu);
// dx (M, K) = dy (M, N) W (N, K) (dgelu: times gelu_tanh'(aux), aux (M, K) the forward's
// pre-activation of x). A = W, B = dy: m = K, n = M, k = N.
GemmPlan plan_input_grad(const torch::Tensor& dy, const torch::Tensor& weight, const torch::Tensor& aux);
// dW (N, K) = dy (M, N)^T x (M, K) (bias_grad: and db (N) = dy summed over its M rows). A = x,
// B = dy (transposed): m = K, n = N, k = M.
GemmPlan plan_weight_grad(const torch::Tensor& dy, const torch::Tensor& x, bool bias_grad);

// ---- The ops (autograd), each falling back to ATen where a plan says why not ----
// y = x W^T + b for x (..., K): the bias in the forward GEMM, its gradient in the weight GEMM.
torch::Tensor linear_epilogue(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);
// The feed-forward block's y = gelu_tanh(x W1^T + b1) W2^T + b2 for x (..., K): four GEMMs with the
// epilogues above and no other kernel (ATen's: two GEMMs, a bias add, the GELU, their backwards, two
// bias reductions). b1, b2 may be undefined (model.bias false).
torch::Tensor ffn_gelu_epilogue(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                                const torch::Tensor& w2, const torch::Tensor& b2);

// Why x, its weights and biases cannot take the epilogue path (nullopt: they can): not CUDA, no
// cuBLASLt in this build, autocast on, dtypes, or the plans' reasons.
std::optional<std::string> gemm_epilogue_unsupported(const torch::Tensor& x, const torch::Tensor& weight,
                                                     const torch::Tensor& bias);

// Runs a plan on the current CUDA stream: a, b, d (and bias, aux: undefined where the epilogue has
// none) as the plan names them. CUDA builds only (throws elsewhere).
void run_gemm_plan(const GemmPlan& plan, const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& d,
                   const torch::Tensor& bias, const torch::Tensor& aux);
// Whether run_gemm_plan can launch in this build (a CUDA LibTorch with cuBLASLt).
bool gemm_epilogues_built();

}  // namespace roformer::kernels
