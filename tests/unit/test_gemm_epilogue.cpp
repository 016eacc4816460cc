// The cuBLASLt GEMM plans of the linear layers (src/kernels/gemm_epilogue.h, issue 51) on the CPU:
// each plan is read back the way cuBLASLt reads it (column-major operands through their leading
// dimensions, op() as the transposes say, the epilogue's bias, aux and bias gradient) and must compute
// the row-major product the layer needs: the forward with its bias and tanh GELU, the input gradient
// through the GELU, the weight and bias gradients. Also the refusals (dtype, alignment, unit stride),
// and the ops' ATen path on the CPU, which is the reference composition.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "kernels/gemm_epilogue.h"
#include "kernels/op_paths.h"

namespace {

using namespace roformer::kernels;
using torch::Tensor;

// The (rows x cols) column-major matrix with leading dimension ld over t's memory.
Tensor column_major(const Tensor& t, int64_t rows, int64_t cols, int64_t ld) {
  return t.as_strided({rows, cols}, {1, ld}, t.storage_offset());
}

// What cuBLASLt computes for `plan` from a, b (and bias, aux as inputs): D (m x n), and the bias
// gradient for BGRADB. Written into d's memory (column-major, ldd) and returned.
struct Emulated {
  Tensor d, bias_grad;
};
Emulated emulate(const GemmPlan& p, const Tensor& a, const Tensor& b, const Tensor& d, const Tensor& bias,
                 const Tensor& aux) {
  EXPECT_TRUE(p.ok()) << p.why_not;
  auto op_a = p.trans_a ? column_major(a, p.k, p.m, p.lda).t() : column_major(a, p.m, p.k, p.lda);
  auto op_b = p.trans_b ? column_major(b, p.n, p.k, p.ldb).t() : column_major(b, p.k, p.n, p.ldb);
  EXPECT_EQ(op_a.sizes(), (std::vector<int64_t>{p.m, p.k}));
  EXPECT_EQ(op_b.sizes(), (std::vector<int64_t>{p.k, p.n}));
  auto acc = op_a.to(torch::kDouble).mm(op_b.to(torch::kDouble));  // (m, n)
  Emulated out;
  auto gelu = [](const Tensor& t) { return torch::gelu(t, "tanh"); };
  switch (p.epilogue) {
    case Epilogue::kDefault: break;
    case Epilogue::kBias: acc = acc + bias.to(torch::kDouble).unsqueeze(1); break;
    case Epilogue::kGeluAux:
    case Epilogue::kGeluAuxBias: {
      if (p.epilogue == Epilogue::kGeluAuxBias) acc = acc + bias.to(torch::kDouble).unsqueeze(1);
      column_major(aux, p.m, p.n, p.aux_ld).copy_(acc);
      acc = gelu(acc);
      break;
    }
    case Epilogue::kDGelu: {
      auto z = column_major(aux, p.m, p.n, p.aux_ld).to(torch::kDouble);
      acc = at::gelu_backward(acc, z, "tanh");
      break;
    }
    case Epilogue::kBgradB: out.bias_grad = op_b.to(torch::kDouble).sum(0); break;  // over k: one per column of D
  }
  column_major(d, p.m, p.n, p.ldd).copy_(acc);
  out.d = d;
  return out;
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  // got is stored in fp32 (the operands' dtype): one rounding from the double reference.
  EXPECT_TRUE(torch::allclose(got.to(torch::kDouble), want.to(torch::kDouble), 1e-6, 1e-5))
      << what << ": max |diff| " << (got.to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
}

constexpr int64_t M = 24, K = 16, N = 40;

TEST(GemmPlan, ForwardBiasAndGeluEpiloguesComputeTheRowMajorLinear) {
  torch::manual_seed(1);
  auto x = torch::randn({M, K}, torch::kFloat), w = torch::randn({N, K}, torch::kFloat), b = torch::randn({N}, torch::kFloat);
  for (const bool gelu : {false, true})
    for (const bool bias : {false, true}) {
      SCOPED_TRACE(std::string(gelu ? "gelu" : "plain") + (bias ? " + bias" : ""));
      const auto plan = plan_linear_forward(x, w, bias ? b : Tensor(), gelu);
      ASSERT_TRUE(plan.ok()) << plan.why_not;
      EXPECT_TRUE(plan.trans_a);
      EXPECT_FALSE(plan.trans_b);
      EXPECT_EQ(plan.m, N);
      EXPECT_EQ(plan.n, M);
      EXPECT_EQ(plan.k, K);
      EXPECT_EQ(plan.epilogue, gelu ? (bias ? Epilogue::kGeluAuxBias : Epilogue::kGeluAux) : (bias ? Epilogue::kBias : Epilogue::kDefault));
      auto y = torch::empty({M, N}), z = torch::empty({M, N});
      emulate(plan, w, x, y, bias ? b : Tensor(), z);  // A = W, B = x, as the op launches it
      auto x64 = x.to(torch::kDouble), w64 = w.to(torch::kDouble);
      auto pre = bias ? torch::addmm(b.to(torch::kDouble), x64, w64.t()) : x64.mm(w64.t());
      expect_close(y, gelu ? torch::gelu(pre, "tanh") : pre, "y");
      if (gelu) expect_close(z, pre, "the aux matrix (pre-activation)");
    }
}

TEST(GemmPlan, InputGradientThroughTheGeluReadsTheForwardsAux) {
  torch::manual_seed(2);
  auto dy = torch::randn({M, N}), w = torch::randn({N, K}), z = torch::randn({M, K});
  for (const bool dgelu : {false, true}) {
    const auto plan = plan_input_grad(dy, w, dgelu ? z : Tensor());
    ASSERT_TRUE(plan.ok()) << plan.why_not;
    EXPECT_EQ(plan.epilogue, dgelu ? Epilogue::kDGelu : Epilogue::kDefault);
    EXPECT_EQ(plan.aux_ld, dgelu ? K : 0);
    auto dx = torch::empty({M, K});
    emulate(plan, w, dy, dx, Tensor(), dgelu ? z : Tensor());
    const auto product = dy.to(torch::kDouble).mm(w.to(torch::kDouble));
    expect_close(dx, dgelu ? at::gelu_backward(product, z.to(torch::kDouble), "tanh") : product, dgelu ? "dz" : "dx");
  }
}

TEST(GemmPlan, WeightGradientWithTheBiasGradientInItsEpilogue) {
  torch::manual_seed(3);
  auto dy = torch::randn({M, N}), x = torch::randn({M, K});
  const auto plan = plan_weight_grad(dy, x, true);
  ASSERT_TRUE(plan.ok()) << plan.why_not;
  EXPECT_EQ(plan.epilogue, Epilogue::kBgradB);
  EXPECT_FALSE(plan.trans_a);
  EXPECT_TRUE(plan.trans_b);
  auto dw = torch::empty({N, K});
  const auto out = emulate(plan, x, dy, dw, Tensor(), Tensor());  // A = x, B = dy
  expect_close(dw, dy.to(torch::kDouble).t().mm(x.to(torch::kDouble)), "dW");
  expect_close(out.bias_grad, dy.to(torch::kDouble).sum(0), "db (n = N values)");
  EXPECT_EQ(plan_weight_grad(dy, x, false).epilogue, Epilogue::kDefault);
}

// Rows given with a larger stride (a view into wider rows): the leading dimensions follow.
TEST(GemmPlan, LeadingDimensionsFollowTheRowStrides) {
  torch::manual_seed(4);
  auto wide = torch::randn({M, K + 8});
  auto x = wide.narrow(1, 0, K), w = torch::randn({N, K});
  const auto plan = plan_linear_forward(x, w, Tensor(), false);
  ASSERT_TRUE(plan.ok()) << plan.why_not;
  EXPECT_EQ(plan.ldb, K + 8);
  auto y = torch::empty({M, N});
  emulate(plan, w, x, y, Tensor(), Tensor());
  expect_close(y, x.to(torch::kDouble).mm(w.to(torch::kDouble).t()), "y from strided rows");
}

TEST(GemmPlan, RefusesWhatCuBlasLtCannotReadAsPlanned) {
  auto w = torch::randn({N, K});
  auto why = [](const GemmPlan& p) { return p.why_not; };
  EXPECT_EQ(why(plan_linear_forward(torch::randn({M, K}, torch::kDouble), torch::randn({N, K}, torch::kDouble), {}, false)),
            "dtype is not bf16, fp16 or fp32");
  EXPECT_EQ(why(plan_linear_forward(torch::randn({M, K}), torch::randn({N, K}, torch::kBFloat16), {}, false)),
            "the weight is not of the operands' dtype");
  EXPECT_EQ(why(plan_linear_forward(torch::randn({M, 6}), torch::randn({N, 6}), {}, false)),
            "x's rows are 24 bytes, not a multiple of 16");
  EXPECT_EQ(why(plan_linear_forward(torch::randn({K, M}).t(), w, {}, false)), "x has no unit-stride rows");
  auto base = torch::randn({M * K + 1});
  EXPECT_EQ(why(plan_linear_forward(base.narrow(0, 1, M * K).view({M, K}), w, {}, false)), "x is not 16-byte aligned");
  EXPECT_EQ(why(plan_linear_forward(torch::randn({M, K}), torch::randn({6, K}), {}, false)),
            "the output rows (N = 6) are not 16-byte multiples");
  EXPECT_EQ(why(plan_linear_forward(torch::randn({M, K}), w, torch::randn({N + 1}), false)),
            "the bias is not a contiguous (40,) vector");
  const auto wider = plan_input_grad(torch::randn({M, N}), w, torch::randn({M, K + 8}).narrow(1, 0, K));
  EXPECT_EQ(why(wider), "");  // aux rows of K + 8 = 24 floats: its own leading dimension
  EXPECT_EQ(wider.aux_ld, K + 8);
  EXPECT_EQ(why(plan_input_grad(torch::randn({M, N}), torch::randn({N, 20}), torch::randn({M, 20}))),
            "the aux matrix's leading dimension is not a multiple of 8");
}

// On the CPU the ops are their ATen composition (the path says why), the reference they are compared
// with on the device (tests/gpu).
TEST(GemmEpilogueOps, TheCpuRunsTheAtenCompositionAndSaysSo) {
  reset_op_paths();
  torch::manual_seed(5);
  auto x = torch::randn({2, 3, K}), w1 = torch::randn({N, K}), b1 = torch::randn({N}), w2 = torch::randn({K, N}),
       b2 = torch::randn({K});
  namespace F = torch::nn::functional;
  EXPECT_TRUE(torch::equal(linear_epilogue(x, w1, b1), F::linear(x, w1, b1)));
  EXPECT_TRUE(torch::equal(ffn_gelu_epilogue(x, w1, b1, w2, b2), F::linear(torch::gelu(F::linear(x, w1, b1), "tanh"), w2, b2)));
  EXPECT_EQ(op_paths().at("linear_epilogue"), "aten (the CPU)");
  EXPECT_EQ(op_paths().at("ffn_gelu_epilogue"), "aten (the CPU)");
  reset_op_paths();
}

}  // namespace
