// FP8 linear layers' scaling (src/kernels/fp8_linear.h, issue 51) on the CPU, where this wheel's
// at::_scaled_mm runs: amax and the dequantization scale, saturation to the E4M3 and E5M2 ranges, the
// rounding each format allows, and the linear op's forward and gradients against the same products
// computed from the dequantized FP8 values (the gradient in E5M2, x and W in E4M3); then the model's
// encoder layers under an Fp8Scope. The device's kernels are checked by tests/gpu/test_gpu_kernels.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/autocast_mode.h>

#include <cmath>

#include "kernels/fp8_linear.h"
#include "kernels/op_paths.h"
#include "model_util.h"

namespace {

using namespace roformer::kernels;
using torch::Tensor;

double max_abs(const Tensor& t) { return t.abs().max().item<double>(); }
// max |a - b| / max |b|
double rel_err(const Tensor& a, const Tensor& b) {
  return max_abs(a.to(torch::kDouble) - b.to(torch::kDouble)) / max_abs(b.to(torch::kDouble));
}

TEST(Fp8Formats, RangesAndDtypes) {
  EXPECT_EQ(fp8_max(Fp8Format::kE4M3), 448.0);
  EXPECT_EQ(fp8_max(Fp8Format::kE5M2), 57344.0);
  EXPECT_EQ(fp8_dtype(Fp8Format::kE4M3), torch::kFloat8_e4m3fn);
  EXPECT_EQ(fp8_dtype(Fp8Format::kE5M2), torch::kFloat8_e5m2);
  for (auto f : {Fp8Format::kE4M3, Fp8Format::kE5M2})  // the largest finite value is representable exactly
    EXPECT_EQ(torch::tensor(fp8_max(f)).to(fp8_dtype(f)).to(torch::kDouble).item<double>(), fp8_max(f)) << to_string(f);
}

TEST(Fp8Scaling, AmaxAndScale) {
  const auto t = torch::tensor({0.5f, -7.0f, 3.0f, 6.5f});
  EXPECT_EQ(fp8_amax(t).item<float>(), 7.0f);
  EXPECT_EQ(fp8_amax(t).dim(), 0);
  EXPECT_EQ(fp8_amax(t.to(torch::kBFloat16)).scalar_type(), torch::kFloat);
  EXPECT_FLOAT_EQ(fp8_scale(fp8_amax(t), Fp8Format::kE4M3).item<float>(), 7.0f / 448.0f);
  EXPECT_FLOAT_EQ(fp8_scale(fp8_amax(t), Fp8Format::kE5M2).item<float>(), 7.0f / 57344.0f);
  // A zero tensor: scale 1 (no 0/0), quantized to zeros.
  const auto zeros = torch::zeros({4, 16});
  EXPECT_EQ(fp8_scale(fp8_amax(zeros), Fp8Format::kE4M3).item<float>(), 1.0f);
  const auto qz = fp8_quantize(zeros, Fp8Format::kE4M3);
  EXPECT_EQ(max_abs(qz.dequantized()), 0.0);
  EXPECT_EQ(fp8_amax(torch::empty({0, 16})).item<float>(), 0.0f);
  // A non-finite amax keeps scale 1: the non-finite values reach the step's check as they are.
  EXPECT_EQ(fp8_scale(torch::tensor(INFINITY), Fp8Format::kE5M2).item<float>(), 1.0f);
  EXPECT_EQ(fp8_scale(torch::tensor(NAN), Fp8Format::kE5M2).item<float>(), 1.0f);
}

TEST(Fp8Scaling, AmaxMapsToTheFormatsLargestValueAndRoundsWithinItsPrecision) {
  torch::manual_seed(0);
  const auto t = torch::randn({64, 48}) * 3.0;
  // E4M3 has 3 mantissa bits (a rounding error of at most 2^-4 relative), E5M2 2 (2^-3), for values in
  // the normal range (above 2^-6 and 2^-14 of the format's scale).
  for (const auto& [format, bound, normal] : {std::tuple{Fp8Format::kE4M3, 1.0 / 16, std::ldexp(1.0, -6)},
                                              std::tuple{Fp8Format::kE5M2, 1.0 / 8, std::ldexp(1.0, -14)}}) {
    const auto q = fp8_quantize(t, format);
    EXPECT_EQ(q.data.scalar_type(), fp8_dtype(format));
    EXPECT_EQ(q.data.sizes(), t.sizes());
    EXPECT_EQ(q.scale.dim(), 0);
    EXPECT_EQ(max_abs(q.data.to(torch::kFloat)), fp8_max(format)) << to_string(format);
    const auto back = q.dequantized();
    const auto scaled = t.abs() / q.scale;
    const auto in_range = scaled >= normal;
    const auto rel = ((back - t).abs() / t.abs()).masked_select(in_range);
    EXPECT_LE(rel.max().item<double>(), bound * (1 + 1e-6)) << to_string(format);
    EXPECT_GT(rel.max().item<double>(), bound / 4) << "the values were not rounded to " << to_string(format);
    // Signs kept, every value finite.
    EXPECT_TRUE(torch::equal(back.sign().masked_select(in_range), t.sign().masked_select(in_range)));
    EXPECT_TRUE(torch::isfinite(back).all().item<bool>());
  }
}

TEST(Fp8Scaling, ValuesPastTheRangeSaturate) {
  // A scale from an amax smaller than the tensor's (a stale, delayed scale): the values past the range
  // become the largest finite value of their sign, where a plain cast gives NaN (E4M3) or inf (E5M2).
  const auto t = torch::tensor({1.0f, -2.0f, 10.0f, -100.0f, 1000.0f});
  for (auto format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const auto scale = fp8_scale(torch::tensor(2.0f), format);  // 2 maps to the max
    const auto q = fp8_quantize(t, scale, format);
    const auto back = q.dequantized();
    EXPECT_TRUE(torch::isfinite(back).all().item<bool>()) << to_string(format) << " " << back;
    EXPECT_FLOAT_EQ(back[0].item<float>(), 1.0f);
    EXPECT_FLOAT_EQ(back[1].item<float>(), -2.0f);
    for (int i : {2, 4}) EXPECT_FLOAT_EQ(back[i].item<float>(), 2.0f) << to_string(format);
    EXPECT_FLOAT_EQ(back[3].item<float>(), -2.0f) << to_string(format);
    const auto plain = (t / scale).to(fp8_dtype(format)).to(torch::kFloat);
    EXPECT_FALSE(torch::isfinite(plain).all().item<bool>()) << "the cast alone saturates: the test shows nothing";
  }
  // NaN stays NaN (the step's non-finite check must see it).
  const auto q = fp8_quantize(torch::tensor({1.0f, NAN}), Fp8Format::kE5M2);
  EXPECT_TRUE(std::isnan(q.dequantized()[1].item<float>()));
}

// The op against the same products computed in double from its dequantized operands.
struct LinearCase {
  Tensor x, w, b, dy;
};
LinearCase linear_case(int64_t M, int64_t K, int64_t N, bool bias) {
  torch::manual_seed(3);
  return {torch::randn({2, M / 2, K}), torch::randn({N, K}) * 0.1, bias ? torch::randn({N}) : Tensor(),
          torch::randn({2, M / 2, N}) * 1e-3};
}

TEST(Fp8Linear, ForwardAndGradientsAreTheScaledProductsOfTheFp8Operands) {
  for (bool bias : {true, false}) {
    auto c = linear_case(32, 64, 48, bias);
    auto x = c.x.clone().requires_grad_(true);
    auto w = c.w.clone().requires_grad_(true);
    auto b = bias ? c.b.clone().requires_grad_(true) : Tensor();
    ASSERT_FALSE(fp8_linear_unsupported(x, w)) << *fp8_linear_unsupported(x, w);
    auto y = fp8_linear(x, w, b);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 16, 48}));
    EXPECT_EQ(y.scalar_type(), torch::kFloat);  // fp32 in, no autocast: fp32 out
    const auto xq = fp8_quantize(c.x.reshape({-1, 64}), Fp8Format::kE4M3).dequantized().to(torch::kDouble);
    const auto wq = fp8_quantize(c.w, Fp8Format::kE4M3).dequantized().to(torch::kDouble);
    auto ref = xq.mm(wq.t());
    if (bias) ref = ref + c.b.to(torch::kDouble);
    EXPECT_LT(rel_err(y.reshape({-1, 48}), ref), 1e-5);
    // ... and, FP8 being FP8, a few percent from the exact product.
    auto exact = c.x.reshape({-1, 64}).to(torch::kDouble).mm(c.w.to(torch::kDouble).t());
    if (bias) exact = exact + c.b.to(torch::kDouble);
    const double fp8_error = rel_err(y.reshape({-1, 48}), exact);
    EXPECT_LT(fp8_error, 0.1);
    EXPECT_GT(fp8_error, 1e-4) << "no FP8 rounding seen";

    y.backward(c.dy);
    const auto dy = c.dy.reshape({-1, 48});
    const auto gq = fp8_quantize(dy, Fp8Format::kE5M2).dequantized().to(torch::kDouble);
    EXPECT_LT(rel_err(x.grad().reshape({-1, 64}), gq.mm(wq)), 1e-5);
    EXPECT_LT(rel_err(w.grad(), gq.t().mm(xq)), 1e-5);
    EXPECT_EQ(x.grad().sizes(), c.x.sizes());
    if (bias) {
      EXPECT_LT(rel_err(b.grad(), dy.to(torch::kDouble).sum(0)), 1e-6);  // from dy as it came
    }
    // The gradient's format is E5M2: the E4M3 rounding of dy gives other products.
    const auto g_e4m3 = fp8_quantize(dy, Fp8Format::kE4M3).dequantized().to(torch::kDouble);
    EXPECT_GT(rel_err(w.grad(), g_e4m3.t().mm(xq)), 1e-3);
    EXPECT_GT(rel_err(x.grad().reshape({-1, 64}), g_e4m3.mm(wq)), 1e-3);
  }
}

TEST(Fp8Linear, TakesTheAutocastDtypeAndGivesEachGradientItsInputsDtype) {
  auto c = linear_case(32, 32, 16, true);
  // fp32 masters under bf16 autocast: a bf16 output (the bias in the GEMM), fp32 gradients.
  auto x = c.x.clone().requires_grad_(true);
  auto w = c.w.clone().requires_grad_(true);
  auto b = c.b.clone().requires_grad_(true);
  Tensor y;
  {
    at::autocast::set_autocast_dtype(torch::kCPU, torch::kBFloat16);
    at::autocast::set_autocast_enabled(torch::kCPU, true);
    y = fp8_linear(x, w, b);
    at::autocast::set_autocast_enabled(torch::kCPU, false);
  }
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  const auto xq = fp8_quantize(c.x.reshape({-1, 32}), Fp8Format::kE4M3).dequantized();
  const auto wq = fp8_quantize(c.w, Fp8Format::kE4M3).dequantized();
  EXPECT_LT(rel_err(y.reshape({-1, 16}), xq.mm(wq.t()) + c.b), 1e-2);  // bf16's rounding of the output
  y.backward(c.dy.to(torch::kBFloat16));
  EXPECT_EQ(x.grad().scalar_type(), torch::kFloat);
  EXPECT_EQ(w.grad().scalar_type(), torch::kFloat);
  EXPECT_EQ(b.grad().scalar_type(), torch::kFloat);
  // bf16 parameters and activations (train.param_dtype bf16): bf16 throughout.
  auto xb = c.x.to(torch::kBFloat16).requires_grad_(true);
  auto wb = c.w.to(torch::kBFloat16).requires_grad_(true);
  auto bb = c.b.to(torch::kBFloat16).requires_grad_(true);
  auto yb = fp8_linear(xb, wb, bb);
  EXPECT_EQ(yb.scalar_type(), torch::kBFloat16);
  yb.backward(c.dy.to(torch::kBFloat16));
  EXPECT_EQ(xb.grad().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(wb.grad().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(bb.grad().scalar_type(), torch::kBFloat16);
  EXPECT_LT(rel_err(yb.to(torch::kFloat), y.to(torch::kFloat)), 2e-2);
}

TEST(Fp8Linear, SaysWhyAShapeOrDtypeCannotRun) {
  const auto w = torch::randn({48, 64});
  EXPECT_FALSE(fp8_linear_unsupported(torch::randn({2, 16, 64}), w));
  const auto k = fp8_linear_unsupported(torch::randn({16, 40}), torch::randn({48, 40}));
  ASSERT_TRUE(k);
  EXPECT_NE(k->find("K = 40"), std::string::npos) << *k;
  const auto n = fp8_linear_unsupported(torch::randn({16, 64}), torch::randn({24, 64}));
  ASSERT_TRUE(n);
  EXPECT_NE(n->find("N = 24"), std::string::npos) << *n;
  const auto m = fp8_linear_unsupported(torch::randn({3, 5, 64}), w);  // 15 tokens: dW's inner dimension
  ASSERT_TRUE(m);
  EXPECT_NE(m->find("M = B*T = 15"), std::string::npos) << *m;
  const auto dtype = fp8_linear_unsupported(torch::randn({16, 64}).to(torch::kDouble), w);
  ASSERT_TRUE(dtype);
  EXPECT_NE(dtype->find("Double"), std::string::npos) << *dtype;
}

TEST(Fp8Scope, NestsAndRestores) {
  EXPECT_FALSE(fp8_enabled());
  {
    Fp8Scope on(true);
    EXPECT_TRUE(fp8_enabled());
    {
      Fp8Scope off(false);
      EXPECT_FALSE(fp8_enabled());
    }
    EXPECT_TRUE(fp8_enabled());
  }
  EXPECT_FALSE(fp8_enabled());
}

// The tiny model (H 32, I 48, 64 tokens) under an Fp8Scope: every encoder GEMM through FP8 (the only
// path noted), a loss within FP8's rounding of the plain model's, every encoder GEMM's weight gradient
// rounded, and gradient checkpointing's recompute replays the forward's FP8 state (the same gradients
// as without it; a recompute outside FP8 would give others).
TEST(Fp8Model, EncoderLinearLayersRunFp8AndCheckpointingReplaysIt) {
  using namespace roformer;
  struct Run {
    double loss;
    std::map<std::string, Tensor> grads;
  };
  auto run = [](bool fp8, bool checkpointing) {
    const auto options =
        checkpointing ? test::tiny_model_options({"model.gradient_checkpointing=true"}) : test::tiny_model_options();
    torch::manual_seed(7);
    model::RoFormerForMaskedLM m(options);
    m->train();
    const auto ids = torch::randint(0, 50, {4, 16});
    const auto labels = torch::randint(0, 50, {4 * 16});
    Tensor logits;
    {
      Fp8Scope scope(fp8);
      logits = m->forward(ids);
    }
    const auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, 50}), labels);
    loss.backward();  // outside the scope, as the training step's backward
    Run r{loss.item<double>(), {}};
    for (const auto& item : m->named_parameters())
      if (item.value().grad().defined()) r.grads.emplace(item.key(), item.value().grad().clone());
    return r;
  };
  reset_op_paths();
  const auto plain = run(false, false);
  EXPECT_FALSE(op_paths().count("fp8_linear")) << "FP8 outside a scope";
  const auto fp8 = run(true, false);
  EXPECT_EQ(op_paths().at("fp8_linear"), "fp8");
  const auto replayed = run(true, true);
  EXPECT_NE(fp8.loss, plain.loss);
  EXPECT_NEAR(fp8.loss, plain.loss, 2e-2 * plain.loss);
  ASSERT_EQ(fp8.grads.size(), plain.grads.size());
  int fp8_layers = 0;
  for (const auto& [name, g] : fp8.grads) {
    const double to_plain = rel_err(g, plain.grads.at(name));
    EXPECT_LT(to_plain, 0.5) << name;
    EXPECT_LT(rel_err(replayed.grads.at(name), g), 1e-5) << name << ": the recompute did not replay FP8";
    const bool encoder_gemm = name.find(".layer.") != std::string::npos && name.find("LayerNorm") == std::string::npos &&
                              name.find("weight") != std::string::npos;
    if (encoder_gemm) {
      EXPECT_GT(to_plain, 1e-4) << name << ": no FP8 rounding in an encoder GEMM's gradient";
      ++fp8_layers;
    }
  }
  EXPECT_EQ(fp8_layers, 2 * 6);  // q, k, v, attention output, intermediate, output; two layers
}

}  // namespace
