// cuBLASLt GEMMs with epilogues for the linear layers; see gemm_epilogue.h. The plans are plain C++
// (built and tested everywhere); the launch needs ROFORMER_WITH_CUDA, which CMakeLists.txt defines
// for this file where LibTorch has CUDA (it then links the wheel's cuBLASLt).
#include "kernels/gemm_epilogue.h"

#include <torch/torch.h>

#include <ATen/autocast_mode.h>

#include <optional>
#include <utility>
#include <vector>

#include "kernels/op_paths.h"
#include "kernels/triton_runtime.h"

#ifdef ROFORMER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cublasLt.h>
#endif

namespace roformer::kernels {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::string to_string(Epilogue e) {
  switch (e) {
    case Epilogue::kDefault: return "default";
    case Epilogue::kBias: return "bias";
    case Epilogue::kGeluAux: return "gelu_aux";
    case Epilogue::kGeluAuxBias: return "gelu_aux_bias";
    case Epilogue::kDGelu: return "dgelu";
    case Epilogue::kBgradB: return "bgradb";
  }
  return "?";
}

namespace {

const char* const kLinearOp = "linear_epilogue";
const char* const kFfnOp = "ffn_gelu_epilogue";

bool supported_dtype(torch::ScalarType t) { return t == torch::kBFloat16 || t == torch::kHalf || t == torch::kFloat; }

// Why t cannot be a row-major matrix operand of (rows, cols) as cuBLASLt reads it (empty: it can):
// unit column stride, a leading dimension (row stride) >= cols whose bytes are a multiple of 16, and
// a 16-byte aligned start.
std::string matrix_unfit(const Tensor& t, const char* name, int64_t rows, int64_t cols, torch::ScalarType dtype) {
  if (!t.defined()) return std::string(name) + " is missing";
  if (t.scalar_type() != dtype) return std::string(name) + " is not of the operands' dtype";
  if (t.dim() != 2 || t.size(0) != rows || t.size(1) != cols)
    return std::string(name) + " is not (" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
  if (rows > 1 && (t.stride(1) != 1 || t.stride(0) < cols)) return std::string(name) + " has no unit-stride rows";
  const int64_t ld = rows > 1 ? t.stride(0) : cols;
  if (ld * t.element_size() % 16 != 0)
    return std::string(name) + "'s rows are " + std::to_string(ld * t.element_size()) + " bytes, not a multiple of 16";
  if (!aligned16(t)) return std::string(name) + " is not 16-byte aligned";
  return "";
}

int64_t leading_dimension(const Tensor& t) { return t.size(0) > 1 ? t.stride(0) : t.size(1); }

std::string vector_unfit(const Tensor& t, const char* name, int64_t size, torch::ScalarType dtype) {
  if (t.scalar_type() != dtype) return std::string(name) + " is not of the operands' dtype";
  if (t.dim() != 1 || t.size(0) != size || !t.is_contiguous()) return std::string(name) + " is not a contiguous (" + std::to_string(size) + ",) vector";
  if (!aligned16(t)) return std::string(name) + " is not 16-byte aligned";
  return "";
}

GemmPlan refused(GemmPlan p, std::string why) {
  p.why_not = std::move(why);
  return p;
}

}  // namespace

GemmPlan plan_linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, bool gelu) {
  GemmPlan p;
  if (x.dim() != 2 || weight.dim() != 2) return refused(p, "x or the weight is not a matrix");
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  p.dtype = x.scalar_type();
  if (!supported_dtype(p.dtype)) return refused(p, "dtype is not bf16, fp16 or fp32");
  if (auto why = matrix_unfit(x, "x", M, K, p.dtype); !why.empty()) return refused(p, why);
  if (auto why = matrix_unfit(weight, "the weight", N, K, p.dtype); !why.empty()) return refused(p, why);
  if (bias.defined())
    if (auto why = vector_unfit(bias, "the bias", N, p.dtype); !why.empty()) return refused(p, why);
  if (N * x.element_size() % 16 != 0) return refused(p, "the output rows (N = " + std::to_string(N) + ") are not 16-byte multiples");
  // D^T = W x^T: A = W stored (K x N) column-major, transposed; B = x stored (K x M), as it is.
  p.trans_a = true;
  p.trans_b = false;
  p.m = N;
  p.n = M;
  p.k = K;
  p.lda = leading_dimension(weight);
  p.ldb = leading_dimension(x);
  p.ldd = N;  // the output and the aux: new contiguous (M, N)
  p.epilogue = gelu ? (bias.defined() ? Epilogue::kGeluAuxBias : Epilogue::kGeluAux)
                    : (bias.defined() ? Epilogue::kBias : Epilogue::kDefault);
  p.aux_ld = gelu ? N : 0;
  if (gelu && p.aux_ld % 8 != 0) return refused(p, "the aux matrix's leading dimension is not a multiple of 8");
  return p;
}

GemmPlan plan_input_grad(const Tensor& dy, const Tensor& weight, const Tensor& aux) {
  GemmPlan p;
  if (dy.dim() != 2 || weight.dim() != 2) return refused(p, "dy or the weight is not a matrix");
  const int64_t M = dy.size(0), N = dy.size(1), K = weight.size(1);
  p.dtype = dy.scalar_type();
  if (!supported_dtype(p.dtype)) return refused(p, "dtype is not bf16, fp16 or fp32");
  if (auto why = matrix_unfit(dy, "dy", M, N, p.dtype); !why.empty()) return refused(p, why);
  if (auto why = matrix_unfit(weight, "the weight", N, K, p.dtype); !why.empty()) return refused(p, why);
  if (aux.defined())
    if (auto why = matrix_unfit(aux, "the aux matrix", M, K, p.dtype); !why.empty()) return refused(p, why);
  if (K * dy.element_size() % 16 != 0) return refused(p, "dx's rows (K = " + std::to_string(K) + ") are not 16-byte multiples");
  // dx^T = W^T dy^T: A = W stored (K x N), as it is; B = dy stored (N x M), as it is.
  p.trans_a = false;
  p.trans_b = false;
  p.m = K;
  p.n = M;
  p.k = N;
  p.lda = leading_dimension(weight);
  p.ldb = leading_dimension(dy);
  p.ldd = K;
  p.epilogue = aux.defined() ? Epilogue::kDGelu : Epilogue::kDefault;
  p.aux_ld = aux.defined() ? leading_dimension(aux) : 0;
  if (aux.defined() && p.aux_ld % 8 != 0) return refused(p, "the aux matrix's leading dimension is not a multiple of 8");
  return p;
}

GemmPlan plan_weight_grad(const Tensor& dy, const Tensor& x, bool bias_grad) {
  GemmPlan p;
  if (dy.dim() != 2 || x.dim() != 2) return refused(p, "dy or x is not a matrix");
  const int64_t M = dy.size(0), N = dy.size(1), K = x.size(1);
  p.dtype = dy.scalar_type();
  if (!supported_dtype(p.dtype)) return refused(p, "dtype is not bf16, fp16 or fp32");
  if (auto why = matrix_unfit(dy, "dy", M, N, p.dtype); !why.empty()) return refused(p, why);
  if (auto why = matrix_unfit(x, "x", M, K, p.dtype); !why.empty()) return refused(p, why);
  // dW^T (K x N) = x^T dy: A = x stored (K x M), as it is; B = dy stored (N x M), transposed. The bias
  // gradient (BGRADB) sums op(B) = dy over k = M: one value per column of D, N.
  p.trans_a = false;
  p.trans_b = true;
  p.m = K;
  p.n = N;
  p.k = M;
  p.lda = leading_dimension(x);
  p.ldb = leading_dimension(dy);
  p.ldd = K;
  p.epilogue = bias_grad ? Epilogue::kBgradB : Epilogue::kDefault;
  return p;
}

// ---- The launch -----------------------------------------------------------------------------------
#ifdef ROFORMER_WITH_CUDA
namespace {

cudaDataType_t cuda_type(torch::ScalarType t) {
  switch (t) {
    case torch::kBFloat16: return CUDA_R_16BF;
    case torch::kHalf: return CUDA_R_16F;
    case torch::kFloat: return CUDA_R_32F;
    default: TORCH_CHECK(false, "no cuBLASLt type for ", t);
  }
}

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kDefault: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kGeluAux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::kGeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::kDGelu: return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::kBgradB: return CUBLASLT_EPILOGUE_BGRADB;
  }
  TORCH_CHECK(false, "unhandled epilogue");
}

void check(cublasStatus_t status, const char* what, const GemmPlan& plan) {
  TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, what, " failed (cublasStatus ", static_cast<int>(status), ") for a ",
              to_string(plan.epilogue), " GEMM m=", plan.m, " n=", plan.n, " k=", plan.k);
}

// The descriptors of one matmul, destroyed with it.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Descriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

template <class T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value, const GemmPlan& plan) {
  check(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute", plan);
}

}  // namespace

bool gemm_epilogues_built() { return true; }

namespace {
// Returns false when cuBLASLt offers no algorithm for the plan (the caller computes with ATen).
bool launch_gemm_plan(const GemmPlan& plan, const Tensor& a, const Tensor& b, const Tensor& d, const Tensor& bias,
                      const Tensor& aux) {
  TORCH_CHECK(plan.ok(), "run_gemm_plan: no plan: ", plan.why_not);
  const auto type = cuda_type(plan.dtype);
  // fp32 operands: full fp32 products unless the process allows TF32 (ATen's flag, as its GEMMs do).
  const auto compute = plan.dtype == torch::kFloat && at::globalContext().allowTF32CuBLAS() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                             : CUBLAS_COMPUTE_32F;
  Descriptors desc;
  check(cublasLtMatmulDescCreate(&desc.op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate", plan);
  const cublasOperation_t ta = plan.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = plan.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, ta, plan);
  set(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, tb, plan);
  set(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(plan.epilogue), plan);
  if (bias.defined()) {
    const void* pointer = bias.data_ptr();
    set(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, pointer, plan);
    set(desc.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type, plan);
  }
  if (plan.aux_ld > 0) {
    TORCH_CHECK(aux.defined(), "run_gemm_plan: the ", to_string(plan.epilogue), " epilogue needs its aux matrix");
    const void* pointer = aux.data_ptr();
    set(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pointer, plan);
    set(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, plan.aux_ld, plan);
  }
  // Stored shapes: op(A) is m x k, so A is (k x m) when transposed; op(B) is k x n likewise.
  check(cublasLtMatrixLayoutCreate(&desc.a, type, plan.trans_a ? plan.k : plan.m, plan.trans_a ? plan.m : plan.k, plan.lda),
        "cublasLtMatrixLayoutCreate(A)", plan);
  check(cublasLtMatrixLayoutCreate(&desc.b, type, plan.trans_b ? plan.n : plan.k, plan.trans_b ? plan.k : plan.n, plan.ldb),
        "cublasLtMatrixLayoutCreate(B)", plan);
  check(cublasLtMatrixLayoutCreate(&desc.d, type, plan.m, plan.n, plan.ldd), "cublasLtMatrixLayoutCreate(D)", plan);
  // ATen's workspace for this handle and stream (allocated before any capture by ATen's own GEMMs).
  const auto handle = at::cuda::getCurrentCUDABlasLtHandle();
  void* workspace = at::cuda::getCUDABlasLtWorkspace();
  const size_t workspace_bytes = at::cuda::getCUDABlasLtWorkspaceSize();
  check(cublasLtMatmulPreferenceCreate(&desc.preference), "cublasLtMatmulPreferenceCreate", plan);
  check(cublasLtMatmulPreferenceSetAttribute(desc.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                             sizeof(workspace_bytes)),
        "cublasLtMatmulPreferenceSetAttribute", plan);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const auto status = cublasLtMatmulAlgoGetHeuristic(handle, desc.op, desc.a, desc.b, desc.d, desc.d, desc.preference, 1,
                                                     &heuristic, &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) return false;
  const float alpha = 1.0f, beta = 0.0f;
  check(cublasLtMatmul(handle, desc.op, &alpha, a.data_ptr(), desc.a, b.data_ptr(), desc.b, &beta, d.data_ptr(), desc.d,
                       d.data_ptr(), desc.d, &heuristic.algo, workspace, workspace_bytes,
                       at::cuda::getCurrentCUDAStream(d.device().index()).stream()),
        "cublasLtMatmul", plan);
  return true;
}
}  // namespace

#else  // a CPU-only LibTorch

bool gemm_epilogues_built() { return false; }

namespace {
bool launch_gemm_plan(const GemmPlan&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  TORCH_CHECK(false, "the cuBLASLt GEMMs need a CUDA LibTorch (ROFORMER_WITH_CUDA)");
}
}  // namespace

#endif

void run_gemm_plan(const GemmPlan& plan, const Tensor& a, const Tensor& b, const Tensor& d, const Tensor& bias,
                   const Tensor& aux) {
  TORCH_CHECK(launch_gemm_plan(plan, a, b, d, bias, aux), "cuBLASLt has no algorithm for a ", to_string(plan.epilogue),
              " GEMM m=", plan.m, " n=", plan.n, " k=", plan.k);
}

// ---- The ops --------------------------------------------------------------------------------------
namespace {

std::optional<Tensor> optional(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

// dW and db of y = x W^T + b from dy: one BGRADB GEMM, or ATen's two kernels when cuBLASLt declines.
std::pair<Tensor, Tensor> weight_and_bias_grads(const Tensor& dy, const Tensor& x, bool bias_grad, const char* op) {
  const int64_t N = dy.size(1), K = x.size(1);
  auto plan = plan_weight_grad(dy, x, bias_grad);
  auto dw = torch::empty({N, K}, dy.options());
  auto db = bias_grad ? torch::empty({N}, dy.options()) : Tensor();
  if (plan.ok() && launch_gemm_plan(plan, x, dy, dw, db, Tensor())) return {dw, db};
  note_op_path_text(op, "aten (weight gradient: " + (plan.ok() ? std::string("cuBLASLt has no algorithm") : plan.why_not) + ")");
  return {dy.t().mm(x), bias_grad ? dy.sum(0) : Tensor()};
}

class LinearEpilogueFunction : public torch::autograd::Function<LinearEpilogueFunction> {
 public:
  // x: (M, K); weight (N, K); bias (N,) or none.
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                               const std::optional<Tensor>& bias_arg) {
    const Tensor bias = bias_arg.value_or(Tensor());
    auto y = torch::empty({x.size(0), weight.size(0)}, x.options());
    const auto plan = plan_linear_forward(x, weight, bias, false);
    if (!launch_gemm_plan(plan, weight, x, y, bias, Tensor())) {
      note_op_path_text(kLinearOp, "aten (forward: cuBLASLt has no algorithm)");
      y = bias.defined() ? torch::addmm(bias, x, weight.t()) : x.mm(weight.t());
    }
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = bias.defined();
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &weight = saved[1];
    const bool has_bias = ctx->saved_data["bias"].toBool();
    const auto dy = contiguous_aligned(grads[0], kLinearOp, "dy");  // (M, N)
    Tensor dx = ctx->needs_input_grad(0) ? dy.mm(weight) : Tensor();
    auto [dw, db] = weight_and_bias_grads(dy, x, has_bias && ctx->needs_input_grad(2), kLinearOp);
    return {dx, dw, db};
  }
};

class FfnGeluFunction : public torch::autograd::Function<FfnGeluFunction> {
 public:
  // x (M, K); w1 (I, K), b1 (I,); w2 (N, I), b2 (N,); biases optional.
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1_arg,
                               const Tensor& w2, const std::optional<Tensor>& b2_arg) {
    const Tensor b1 = b1_arg.value_or(Tensor()), b2 = b2_arg.value_or(Tensor());
    const int64_t M = x.size(0), I = w1.size(0), N = w2.size(0);
    auto z = torch::empty({M, I}, x.options()), h = torch::empty({M, I}, x.options());  // pre-activation, GELU
    auto y = torch::empty({M, N}, x.options());
    if (!launch_gemm_plan(plan_linear_forward(x, w1, b1, true), w1, x, h, b1, z)) {
      note_op_path_text(kFfnOp, "aten (up-projection: cuBLASLt has no algorithm)");
      z = b1.defined() ? torch::addmm(b1, x, w1.t()) : x.mm(w1.t());
      h = torch::gelu(z, "tanh");
    }
    if (!launch_gemm_plan(plan_linear_forward(h, w2, b2, false), w2, h, y, b2, Tensor())) {
      note_op_path_text(kFfnOp, "aten (down-projection: cuBLASLt has no algorithm)");
      y = b2.defined() ? torch::addmm(b2, h, w2.t()) : h.mm(w2.t());
    }
    ctx->save_for_backward({x, w1, w2, h, z});
    ctx->saved_data["b1"] = b1.defined();
    ctx->saved_data["b2"] = b2.defined();
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &w1 = saved[1], &w2 = saved[2], &h = saved[3], &z = saved[4];
    const bool has_b1 = ctx->saved_data["b1"].toBool(), has_b2 = ctx->saved_data["b2"].toBool();
    // needs_input_grad counts the tensors given: x, w1, b1 (when given), w2, b2 (when given).
    const size_t b1_input = 2, b2_input = has_b1 ? 4 : 3;
    const auto dy = contiguous_aligned(grads[0], kFfnOp, "dy");  // (M, N)
    auto [dw2, db2] = weight_and_bias_grads(dy, h, has_b2 && ctx->needs_input_grad(b2_input), kFfnOp);
    auto dz = torch::empty_like(z);  // (M, I) = (dy w2) * gelu_tanh'(z)
    if (!launch_gemm_plan(plan_input_grad(dy, w2, z), w2, dy, dz, Tensor(), z)) {
      note_op_path_text(kFfnOp, "aten (dgelu: cuBLASLt has no algorithm)");
      dz = at::gelu_backward(dy.mm(w2), z, "tanh");
    }
    auto [dw1, db1] = weight_and_bias_grads(dz, x, has_b1 && ctx->needs_input_grad(b1_input), kFfnOp);
    Tensor dx = ctx->needs_input_grad(0) ? dz.mm(w1) : Tensor();
    return {dx, dw1, db1, dw2, db2};
  }
};

// x (..., K) as the (M, K) matrix the GEMMs read.
Tensor rows_of(const Tensor& x) { return x.reshape({-1, x.size(-1)}); }

std::vector<int64_t> with_last(const Tensor& x, int64_t last) {
  auto sizes = x.sizes().vec();
  sizes.back() = last;
  return sizes;
}

}  // namespace

std::optional<std::string> gemm_epilogue_unsupported(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!x.is_cuda()) return "the CPU";
  if (!gemm_epilogues_built()) return "this build has no cuBLASLt (a CPU-only LibTorch)";
  if (at::autocast::is_autocast_enabled(at::kCUDA)) return "autocast (fp32 parameters): ATen's linear casts them";
  if (weight.device() != x.device() || (bias.defined() && bias.device() != x.device())) return "operands on two devices";
  const auto plan = plan_linear_forward(rows_of(x), weight, bias, false);
  if (!plan.ok()) return plan.why_not;
  return std::nullopt;
}

Tensor linear_epilogue(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const auto why_not = gemm_epilogue_unsupported(x, weight, bias);
  note_op_path_text(kLinearOp, why_not ? "aten (" + *why_not + ")" : "cublaslt");
  if (why_not) return torch::nn::functional::linear(x, weight, bias);
  return LinearEpilogueFunction::apply(rows_of(x), weight, optional(bias))[0].view(with_last(x, weight.size(0)));
}

Tensor ffn_gelu_epilogue(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
  auto why_not = gemm_epilogue_unsupported(x, w1, b1);
  if (!why_not) {  // the down-projection reads the new (M, I) GELU output: w2 and b2 decide
    const int64_t I = w1.size(0), N = w2.size(0);
    std::string why = matrix_unfit(w2, "the down-projection's weight", N, I, x.scalar_type());
    if (why.empty() && b2.defined()) why = vector_unfit(b2, "the down-projection's bias", N, x.scalar_type());
    if (why.empty() && N * x.element_size() % 16 != 0) why = "the output rows are not 16-byte multiples";
    if (why.empty() && I % 8 != 0) why = "the inner width is not a multiple of 8 (the aux matrix's leading dimension)";
    if (!why.empty()) why_not = why;
  }
  note_op_path_text(kFfnOp, why_not ? "aten (" + *why_not + ")" : "cublaslt");
  if (why_not) {
    namespace F = torch::nn::functional;
    return F::linear(torch::gelu(F::linear(x, w1, b1), "tanh"), w2, b2);
  }
  return FfnGeluFunction::apply(rows_of(x), w1, optional(b1), w2, optional(b2))[0].view(with_last(x, w2.size(0)));
}

}  // namespace roformer::kernels
