// The fused kernels' C++ side (src/kernels), on the CPU: the launcher's argument lists and the
// compiled image table (when this build has the kernels), and each op's ATen path, the CPU's
// implementation and the GPU tests' reference, against the plain composition of ATen ops and
// against finite differences. The kernels' own logic is tested by tests/triton under Triton's
// interpreter; tests/gpu/test_gpu_kernels.cpp runs the compiled kernels against these ATen paths.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/layer_norm.h"
#include "kernels/op_paths.h"
#include "kernels/rotary.h"
#include "kernels/triton_runtime.h"
#include "model/rotary.h"

namespace {

using namespace roformer::kernels;
using torch::Tensor;

// ---- The launcher --------------------------------------------------------------------------------

TEST(TritonRuntime, ArgumentsAreStoredAtTheKernelsWidthsFp32AsAFloat) {
  auto t = torch::zeros({4}, torch::kBFloat16);
  KernelArgs args;
  args.tensor(t).i32(-7).i64(int64_t{1} << 40).f32(0.1);
  EXPECT_EQ(args.signature(), "*bf16,i32,i64,fp32");
  auto params = args.launch_params();
  ASSERT_EQ(params.size(), 6u);  // four arguments, then Triton's global and profile scratch pointers
  EXPECT_EQ(*static_cast<void**>(params[0]), t.data_ptr());
  EXPECT_EQ(*static_cast<int32_t*>(params[1]), -7);
  EXPECT_EQ(*static_cast<int64_t*>(params[2]), int64_t{1} << 40);
  // compile.py's trap: an fp32 parameter passed as a double reads as garbage; here its 4 bytes are a float.
  float f = 0;
  std::memcpy(&f, params[3], sizeof f);
  EXPECT_EQ(f, 0.1f);
  EXPECT_EQ(*static_cast<uint64_t*>(params[4]), 0u);
  EXPECT_EQ(*static_cast<uint64_t*>(params[5]), 0u);
  EXPECT_THROW(KernelArgs().i32(int64_t{1} << 31), c10::Error);
  EXPECT_EQ(triton_pointer_type(torch::kFloat), "*fp32");
  EXPECT_EQ(triton_pointer_type(torch::kLong), "*i64");
}

// The AOT step writes a typed launcher per kernel (build/kernels/triton_launchers.h, issue 52): the
// kernels' C++ callers name each runtime parameter with its kind, so a kernel whose parameters change
// no longer compiles against its callers. Every compiled kernel has one; rotary_qk's reads as its
// Triton signature (pointers, then i32s; the constexpr BLOCK left out).
TEST(TritonRuntime, EveryKernelHasATypedLauncher) {
  if (!triton_kernels_built()) GTEST_SKIP() << "this build has no fused kernels (ROFORMER_WITH_TRITON_KERNELS off)";
  const auto path = std::filesystem::path(ROFORMER_TEST_BIN).parent_path() / "kernels" / "triton_launchers.h";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  std::set<std::string> kernels;
  for (const auto& image : triton_images()) kernels.insert(image.kernel);
  EXPECT_GE(kernels.size(), 6u);
  for (const auto& kernel : kernels) {
    EXPECT_NE(header.find("struct " + kernel + " {"), std::string::npos) << kernel;
    EXPECT_NE(header.find("static constexpr const char* kKernel = \"" + kernel + "\";"), std::string::npos) << kernel;
  }
  EXPECT_NE(header.find("static KernelArgs args(PtrArg X, PtrArg OUT, PtrArg TABLE, I32Arg T, I32Arg row_stride, "
                        "I32Arg n_pairs, I32Arg half_d, I32Arg table_stride, I32Arg inverse) {"),
            std::string::npos) << header;
}

TEST(TritonRuntime, ImagesAreCubinsForSm90AndSm80) {
  const auto images = triton_images();
  if (!triton_kernels_built()) GTEST_SKIP() << "this build has no fused kernels (ROFORMER_WITH_TRITON_KERNELS off)";
  std::set<std::string> sm90, sm80;
  for (const auto& image : images) {
    ASSERT_GT(image.cubin_size, 64u) << image.kernel;
    EXPECT_EQ(std::memcmp(image.cubin, "\x7f" "ELF", 4), 0) << image.kernel << "/" << image.variant << " is not an ELF cubin";
    EXPECT_TRUE(image.arch == 90 || image.arch == 80) << image.arch;
    EXPECT_GE(image.num_warps, 1);
    (image.arch == 90 ? sm90 : sm80).insert(std::string(image.kernel) + "/" + image.variant);
  }
  EXPECT_EQ(sm90, sm80) << "every variant is compiled for both architectures";
  EXPECT_NE(find_triton_image("residual_dropout_layer_norm_fwd", "bf16_1024", 9, 0), nullptr);
  EXPECT_EQ(find_triton_image("residual_dropout_layer_norm_fwd", "bf16_1024", 8, 6)->arch, 80);  // sm_86: sm_80 cubin
  EXPECT_EQ(find_triton_image("residual_dropout_layer_norm_fwd", "bf16_1024", 10, 0), nullptr);  // no Blackwell cubin
  EXPECT_EQ(find_triton_image("residual_dropout_layer_norm_fwd", "fp16_1024", 9, 0), nullptr);
}

// ---- Residual + dropout + LayerNorm --------------------------------------------------------------

struct LayerNormCase {
  Tensor x, r, gamma, beta, keep;  // (M, H) x, r, keep; (H,) gamma, beta
};

LayerNormCase layer_norm_case(int64_t M, int64_t H, torch::ScalarType dtype, double p) {
  torch::manual_seed(3);
  LayerNormCase c;
  c.x = torch::randn({M, H}).to(dtype).requires_grad_();
  c.r = torch::randn({M, H}).to(dtype).requires_grad_();
  c.gamma = (1 + 0.5 * torch::randn({H})).to(dtype).requires_grad_();
  c.beta = (0.1 * torch::randn({H})).to(dtype).requires_grad_();
  c.keep = torch::rand({M, H}) >= p;
  return c;
}

// The gradients of sum(y * wy) + sum(z * wz) for x, r, gamma, beta.
std::vector<Tensor> gradients_of(const Tensor& y, const Tensor& z, const LayerNormCase& c, const Tensor& wy, const Tensor& wz) {
  auto loss = (y.to(torch::kDouble) * wy).sum() + (z.to(torch::kDouble) * wz).sum();
  return torch::autograd::grad({loss}, {c.x, c.r, c.gamma, c.beta});
}

// A launch that would break what a kernel was compiled to assume (aot.py's ":16") is refused before
// the driver sees it (issue 51): an address not 16-byte aligned or an integer not a multiple of 16
// where the image says so; the same values pass where it does not.
TEST(TritonRuntime, ArgumentsBreakingTheCompiledAlignmentAreRefused) {
  const TritonImage image{"k", "v", 90, 4, 0, "k_entry", "*fp32,i32,*fp32,i32", nullptr, 0, "1100"};
  auto t = torch::zeros({64});
  KernelArgs good;
  good.tensor(t).i32(48).tensor(t.narrow(0, 1, 4)).i32(5);  // the last two carry no hint
  EXPECT_EQ(divisibility_violation(image, good), std::nullopt);
  KernelArgs negative;
  negative.tensor(t).i32(-16).tensor(t).i32(0);
  EXPECT_EQ(divisibility_violation(image, negative), std::nullopt);
  KernelArgs bad_pointer;
  bad_pointer.tensor(t.narrow(0, 1, 8)).i32(48).tensor(t).i32(5);  // 4 bytes past an aligned start
  const auto p = divisibility_violation(image, bad_pointer);
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->find("argument 0 (*fp32)"), std::string::npos) << *p;
  EXPECT_NE(p->find("an address not 16-byte aligned, which k/v was compiled to assume"), std::string::npos) << *p;
  KernelArgs bad_int;
  bad_int.tensor(t).i32(40).tensor(t).i32(5);
  EXPECT_EQ(divisibility_violation(image, bad_int), "argument 1 (i32) is 40, not a multiple of 16, which k/v was "
                                                    "compiled to assume");
}

// The backward passes take incoming gradients through contiguous_aligned: a contiguous view at an
// unaligned offset (what cat's backward hands its inputs) is copied into a fresh aligned buffer and
// the copy noted once as the op's path; an aligned tensor is used as it is; a non-contiguous one is
// made contiguous (a new, aligned allocation) without a note.
TEST(TritonRuntime, UnalignedGradientsAreCopiedToAlignedBuffersAndNoted) {
  reset_op_paths();
  auto base = torch::randn({65});
  const auto aligned = base.narrow(0, 0, 64);
  EXPECT_EQ(contiguous_aligned(aligned, "op", "dy").data_ptr(), aligned.data_ptr());
  const auto transposed = base.narrow(0, 0, 64).view({8, 8}).t();
  const auto made = contiguous_aligned(transposed, "op", "dy");
  EXPECT_TRUE(made.is_contiguous() && aligned16(made));
  EXPECT_TRUE(torch::equal(made, transposed));
  EXPECT_EQ(op_paths().count("op"), 0u);
  const auto view = base.narrow(0, 1, 64);
  ASSERT_TRUE(view.is_contiguous() && !aligned16(view));
  for (int i = 0; i < 2; ++i) {
    const auto copy = contiguous_aligned(view, "op", "dy");
    EXPECT_TRUE(aligned16(copy));
    EXPECT_NE(copy.data_ptr(), view.data_ptr());
    EXPECT_TRUE(torch::equal(copy, view));
  }
  EXPECT_EQ(op_paths().at("op"), "triton, dy copied to an aligned buffer (it came as a view at an unaligned offset)");
  reset_op_paths();
}

// Each fused op notes the path it ran and why, each distinct path once, in the order first seen
// (`roformer bench` records them; the log says each once).
TEST(FusedOpPaths, EachOpNotesItsPathsWithTheReason) {
  reset_op_paths();
  auto ok = layer_norm_case(4, 32, torch::kFloat, 0.0), narrow = layer_norm_case(4, 40, torch::kFloat, 0.0);
  for (int i = 0; i < 3; ++i) residual_dropout_layer_norm(ok.x, ok.r, ok.gamma, ok.beta, 0.0, 1e-5, Backend::kTriton);
  residual_dropout_layer_norm(ok.x, ok.r, ok.gamma, ok.beta, 0.0, 1e-5, Backend::kAten);
  residual_dropout_layer_norm(narrow.x, narrow.r, narrow.gamma, narrow.beta, 0.0, 1e-5, Backend::kTriton);
  EXPECT_EQ(op_paths().at("residual_dropout_layer_norm"),
            "aten (not a CUDA tensor); aten (the CPU); aten (H = 40 is not a multiple of 16 (the kernels assume "
            "aligned rows))");
  EXPECT_EQ(op_paths().size(), 1u);
  reset_op_paths();
  EXPECT_TRUE(op_paths().empty());
}

TEST(ResidualLayerNorm, AtenPathIsTheCompositionOfAtenOps) {
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const double p = 0.1, eps = 1e-5;
    auto c = layer_norm_case(6, 40, dtype, p);
    auto wy = torch::randn({6, 40}, torch::kDouble), wz = torch::randn({6, 40}, torch::kDouble);
    auto out = residual_dropout_layer_norm(c.x, c.r, c.gamma, c.beta, p, eps, Backend::kAten, c.keep);
    auto z = c.r + c.x * c.keep * (1.0 / (1.0 - p));
    auto y = torch::layer_norm(z, {40}, c.gamma, c.beta, eps);
    EXPECT_TRUE(torch::equal(out.z, z)) << dtype;
    EXPECT_TRUE(torch::equal(out.y, y)) << dtype;
    auto got = gradients_of(out.y, out.z, c, wy, wz), want = gradients_of(y, z, c, wy, wz);
    const char* names[] = {"x", "residual", "gamma", "beta"};
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(torch::allclose(got[i].to(torch::kDouble), want[i].to(torch::kDouble), 1e-6, 1e-6))
          << dtype << " d" << names[i] << ": max diff " << (got[i] - want[i]).abs().max().item<double>();
  }
}

TEST(ResidualLayerNorm, AtenPathGradientsMatchFiniteDifferences) {
  const double p = 0.25, eps = 1e-5, h = 1e-6;
  auto c = layer_norm_case(3, 5, torch::kDouble, p);
  auto wy = torch::randn({3, 5}, torch::kDouble), wz = torch::randn({3, 5}, torch::kDouble);
  auto loss_of = [&] {
    auto out = residual_dropout_layer_norm(c.x, c.r, c.gamma, c.beta, p, eps, Backend::kAten, c.keep);
    return ((out.y * wy).sum() + (out.z * wz).sum());
  };
  auto analytic = torch::autograd::grad({loss_of()}, {c.x, c.r, c.gamma, c.beta});
  torch::NoGradGuard no_grad;
  const std::vector<Tensor> params = {c.x, c.r, c.gamma, c.beta};
  for (size_t k = 0; k < params.size(); ++k) {
    auto flat = params[k].view({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double v = flat[i].item<double>();
      flat[i] = v + h;
      const double up = loss_of().item<double>();
      flat[i] = v - h;
      const double down = loss_of().item<double>();
      flat[i] = v;
      EXPECT_NEAR(analytic[k].view({-1})[i].item<double>(), (up - down) / (2 * h), 1e-6) << "input " << k << " element " << i;
    }
  }
}

TEST(ResidualLayerNorm, DrawnMaskDropsWithRateAndScalesTheRest) {
  const double p = 0.5;
  auto x = (torch::rand({64, 64}) + 1).requires_grad_();  // no zeros of its own
  auto gamma = torch::ones({64}, torch::requires_grad()), beta = torch::zeros({64}, torch::requires_grad());
  auto out = residual_dropout_layer_norm(x, Tensor(), gamma, beta, p, 1e-5, Backend::kAten);
  auto dropped = out.z == 0;
  const double rate = dropped.to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(rate, p, 5 * std::sqrt(p * (1 - p) / 4096));
  EXPECT_TRUE(torch::allclose(out.z.masked_select(~dropped), x.detach().masked_select(~dropped) * 2));
  auto dx = torch::autograd::grad({out.z.sum()}, {x})[0];  // z's own gradient: 1/(1-p) where kept, 0 where dropped
  EXPECT_TRUE(torch::equal(dx, torch::where(dropped, 0.0, 2.0).to(dx.dtype())));
}

TEST(ResidualLayerNorm, WithoutDropoutOrResidualItIsLayerNorm) {
  auto c = layer_norm_case(4, 24, torch::kFloat, 0.0);
  auto out = residual_dropout_layer_norm(c.x, Tensor(), c.gamma, c.beta, 0.0, 1e-5, Backend::kAten);
  EXPECT_TRUE(torch::equal(out.z, c.x));
  EXPECT_NE(out.z.data_ptr(), c.x.data_ptr());  // a new tensor, not x aliased
  EXPECT_TRUE(torch::equal(out.y, torch::layer_norm(c.x, {24}, c.gamma, c.beta, 1e-5)));
  auto g = torch::autograd::grad({out.y.sum()}, {c.x});
  EXPECT_TRUE(torch::allclose(g[0], torch::autograd::grad({torch::layer_norm(c.x, {24}, c.gamma, c.beta, 1e-5).sum()}, {c.x})[0]));
}

TEST(ResidualLayerNorm, TritonRequestedOnTheCpuRunsTheAtenPath) {
  auto c = layer_norm_case(4, 32, torch::kFloat, 0.0);
  auto a = residual_dropout_layer_norm(c.x, c.r, c.gamma, c.beta, 0.0, 1e-5, Backend::kAten);
  auto t = residual_dropout_layer_norm(c.x, c.r, c.gamma, c.beta, 0.0, 1e-5, Backend::kTriton);
  EXPECT_TRUE(torch::equal(a.y, t.y));
  EXPECT_EQ(triton_layer_norm_unsupported(c.x, c.r, c.gamma, c.beta), std::optional<std::string>("not a CUDA tensor"));
}

TEST(ResidualLayerNorm, SaysWhyTheTritonPathCannotRun) {
  auto reason = [](int64_t H, torch::ScalarType dtype, bool bad_residual = false) {
    auto x = torch::zeros({2, H}, dtype), w = torch::ones({H}, dtype);
    auto r = bad_residual ? torch::zeros({2, H}, torch::kDouble) : torch::zeros({2, H}, dtype);
    return triton_layer_norm_unsupported(x, r, w, w).value_or("supported");
  };
  EXPECT_EQ(reason(64, torch::kHalf), "dtype is neither bf16 nor fp32");
  EXPECT_EQ(reason(8192, torch::kBFloat16), "H = 8192 is outside 1..4096");
  EXPECT_EQ(reason(100, torch::kBFloat16), "H = 100 is not a multiple of 16 (the kernels assume aligned rows)");
  EXPECT_EQ(reason(64, torch::kFloat, true), "residual differs from x in shape or dtype");
  EXPECT_EQ(reason(768, torch::kBFloat16), "not a CUDA tensor");  // everything else fits
  auto x = torch::zeros({4, 64}).t().contiguous().t();  // (4, 64) with column-major strides
  EXPECT_EQ(triton_layer_norm_unsupported(x, Tensor(), torch::ones({64}), torch::ones({64})),
            std::optional<std::string>("an input is not contiguous and 16-byte aligned"));
}

TEST(ResidualLayerNorm, VariantsCoverEveryWidthUpTo4096) {
  EXPECT_EQ(layer_norm_variant(torch::kBFloat16, 768), "bf16_1024");
  EXPECT_EQ(layer_norm_variant(torch::kFloat, 128), "fp32_256");
  EXPECT_EQ(layer_norm_variant(torch::kFloat, 1024), "fp32_1024");
  EXPECT_EQ(layer_norm_variant(torch::kBFloat16, 1040), "bf16_4096");
  EXPECT_THROW(layer_norm_variant(torch::kFloat, 4097), c10::Error);
}

// The Triton path's argument lists against the compiled kernels' signatures, for each dtype and
// width class, with and without dropout, residual and z's own gradient: a launch on the GPU passes
// exactly these (a mismatch there is a refused launch, found here first).
TEST(ResidualLayerNorm, LaunchPlansMatchTheCompiledSignatures) {
  if (!triton_kernels_built()) GTEST_SKIP() << "this build has no fused kernels (ROFORMER_WITH_TRITON_KERNELS off)";
  for (auto dtype : {torch::kFloat, torch::kBFloat16})
    for (int64_t H : {96, 768, 2048})
      for (double p : {0.0, 0.1}) {
        const int64_t M = 10;
        auto t = [&] { return torch::zeros({M, H}, dtype); };
        auto v = torch::zeros({H}, dtype), stats = torch::zeros({M}), rng_used = torch::zeros({2}, torch::kLong);
        DropoutRng rng{rng_used.data_ptr<int64_t>(), rng_used.data_ptr<int64_t>() + 1, 4, Tensor()};
        auto fwd = plan_layer_norm_forward(t(), p > 0 ? t() : Tensor(), v, v, t(), t(), stats, stats, rng, rng_used, p, 1e-5);
        auto bwd = plan_layer_norm_backward(t(), p > 0 ? Tensor() : t(), t(), v, stats, stats, rng_used, t(),
                                            p > 0 ? t() : Tensor(), torch::zeros({2, 3, H}), 4, p,
                                            p > 0 ? DropoutAt::kInput : DropoutAt::kNone);
        for (auto* plan : {&fwd, &bwd}) {
          const auto* image = find_triton_image(plan->kernel, plan->variant, 9, 0);
          ASSERT_NE(image, nullptr) << plan->kernel << "/" << plan->variant;
          EXPECT_EQ(plan->args.signature(), image->signature) << plan->kernel << "/" << plan->variant;
          EXPECT_EQ(divisibility_violation(*image, plan->args), std::nullopt) << plan->kernel << "/" << plan->variant;
        }
        EXPECT_EQ(fwd.grid[0], M);
        EXPECT_EQ(bwd.grid[0], 3u);
      }
}

// ---- Rotary of q and k ---------------------------------------------------------------------------

// The packed projection (B, T, 3, N, D) and its q|k part, as the model's fused-QKV path views them.
Tensor packed_qkv(torch::ScalarType dtype) {
  torch::manual_seed(5);
  return torch::randn({2, 7, 3, 3, 8}).to(dtype).requires_grad_();
}

TEST(RotaryQK, AtenPathIsTheModelsRotation) {
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    auto qkv = packed_qkv(dtype);
    auto table = roformer::model::rotary_table(11, 8);
    auto qk = qkv.split_with_sizes({2, 1}, 2)[0];  // (B, T, 2, N, D), rows 3H apart
    auto out = rotary_qk(qk, table, Backend::kAten);
    ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, 7, 2, 3, 8}));
    auto [sin_pos, cos_pos] = roformer::model::rotary_sin_cos(table, 7);
    auto grad = torch::randn({2, 7, 2, 3, 8});
    auto ours = torch::autograd::grad({(out.to(torch::kFloat) * grad).sum()}, {qkv})[0];
    for (int64_t s = 0; s < 2; ++s) {
      auto x = qk.select(2, s).transpose(1, 2).to(torch::kDouble);  // (B, N, T, D), HF's x cos + rotate_half(x) sin
      auto want = roformer::model::apply_rotary(x, sin_pos.to(torch::kDouble), cos_pos.to(torch::kDouble)).transpose(1, 2);
      const double tol = dtype == torch::kFloat ? 1e-6 : 1e-2;  // bf16: one rounding of the fp32 rotation
      EXPECT_TRUE(torch::allclose(out.select(2, s).to(torch::kDouble), want, tol, tol)) << dtype << " part " << s;
    }
    auto theirs = torch::autograd::grad(
        {(torch::stack({roformer::model::apply_rotary_fused(qk.select(2, 0), sin_pos, cos_pos, 1),
                        roformer::model::apply_rotary_fused(qk.select(2, 1), sin_pos, cos_pos, 1)}, 2).to(torch::kFloat) *
          grad).sum()},
        {qkv})[0];
    EXPECT_TRUE(torch::allclose(ours.to(torch::kDouble), theirs.to(torch::kDouble), 1e-5, 1e-5)) << dtype << " dqkv";
    EXPECT_TRUE(torch::equal(ours.select(2, 2), torch::zeros_like(ours.select(2, 2)))) << "v is not rotated";
  }
}

TEST(RotaryQK, SaysWhyTheTritonPathCannotRun) {
  auto table = roformer::model::rotary_table(16, 64);
  auto reason = [&](const Tensor& qk, const Tensor& t) { return triton_rotary_unsupported(qk, t).value_or("supported"); };
  auto qkv = torch::zeros({2, 16, 3, 12, 64}, torch::kBFloat16);
  auto qk = qkv.split_with_sizes({2, 1}, 2)[0];
  EXPECT_EQ(reason(qk, table), "not a CUDA tensor");  // base's shapes fit
  EXPECT_EQ(reason(qk.to(torch::kHalf), table), "dtype is neither bf16 nor fp32");
  EXPECT_EQ(reason(qkv.narrow(2, 1, 2), table), "not a CUDA tensor");  // k|v: also 2H contiguous features
  EXPECT_EQ(reason(qkv.transpose(3, 4).narrow(2, 0, 2), table.narrow(1, 0, 12)),
            "a token's q and k are not 2H contiguous features with aligned rows");
  EXPECT_EQ(reason(qk, table.narrow(0, 0, 8)), "the table is not a contiguous (>= T, D) fp32 tensor on qk's device");
  EXPECT_EQ(reason(torch::zeros({2, 16, 2, 3, 6}), roformer::model::rotary_table(16, 6)),
            "H = 18 is not an even multiple of 16 up to 4096");
}

// ---- Cross-entropy ---------------------------------------------------------------------------------

TEST(CrossEntropySum, AtenPathIsLossSumAndArgmaxHits) {
  torch::manual_seed(6);
  auto logits = (3 * torch::randn({9, 50})).requires_grad_();
  auto labels = torch::randint(0, 50, {9}, torch::kLong);
  labels[2] = -100;
  labels[4] = logits[4].argmax().item<int64_t>();
  auto out = cross_entropy_sum(logits, labels, Backend::kAten);
  double loss = 0;
  int64_t correct = 0;
  for (int64_t r = 0; r < 9; ++r) {
    if (labels[r].item<int64_t>() < 0) continue;
    loss += (torch::logsumexp(logits[r].to(torch::kDouble), 0) - logits[r][labels[r].item<int64_t>()].to(torch::kDouble)).item<double>();
    correct += logits[r].argmax().item<int64_t>() == labels[r].item<int64_t>();
  }
  EXPECT_NEAR(out.loss.item<double>(), loss, 1e-4);
  EXPECT_EQ(out.correct.item<int64_t>(), correct);
  EXPECT_GE(correct, 1);
  auto grad = torch::autograd::grad({out.loss}, {logits})[0];
  EXPECT_TRUE(torch::equal(grad[2], torch::zeros({50}))) << "an ignored row has no gradient";
  EXPECT_TRUE(torch::allclose(grad.sum(1).narrow(0, 3, 6), torch::zeros({6}), 0, 1e-6)) << "softmax - one-hot sums to 0";
}

TEST(CrossEntropySum, SaysWhyTheTritonPathCannotRun) {
  auto labels = torch::zeros({4}, torch::kLong);
  auto reason = [&](const Tensor& logits, const Tensor& y) { return triton_cross_entropy_unsupported(logits, y).value_or("supported"); };
  EXPECT_EQ(reason(torch::zeros({4, 32000}, torch::kBFloat16), labels), "not a CUDA tensor");
  EXPECT_EQ(reason(torch::zeros({4, 32000}, torch::kHalf), labels), "dtype is neither bf16 nor fp32");
  EXPECT_EQ(reason(torch::zeros({4, 4001}), labels),
            "logits are not (P, V) rows of unit stride, V and the row stride multiples of 16");
  EXPECT_EQ(reason(torch::zeros({4, 4000}), labels.to(torch::kInt)), "labels are not (P,) int64, contiguous, on the logits' device");
}

// ---- Embeddings + LayerNorm ------------------------------------------------------------------------

TEST(EmbeddingLayerNorm, AtenPathAddsTheRowsThenNormalizes) {
  torch::manual_seed(8);
  EmbeddingInputs in;
  in.ids = torch::randint(0, 20, {2, 5}, torch::kLong);
  in.ids[0][1] = 0;  // the padding row
  in.word = torch::randn({20, 16}, torch::requires_grad());
  in.type = torch::randn({2, 16}, torch::requires_grad());
  in.position = torch::randn({9, 16}, torch::requires_grad());
  in.position_offset = 3;
  in.padding_idx = 0;
  auto gamma = torch::ones({16}, torch::requires_grad()), beta = torch::zeros({16}, torch::requires_grad());
  auto y = embedding_layer_norm(in, gamma, beta, 0.0, 1e-5, Backend::kAten);
  auto z = in.word.index_select(0, in.ids.view(-1)).view({2, 5, 16}) + in.type[0] + in.position.narrow(0, 3, 5);
  EXPECT_TRUE(torch::allclose(y, torch::layer_norm(z, {16}, gamma, beta, 1e-5), 1e-6, 1e-6));
  auto g = torch::autograd::grad({(y * torch::randn({2, 5, 16})).sum()}, {in.word, in.type, in.position});
  EXPECT_TRUE(torch::equal(g[0][0], torch::zeros({16}))) << "the padding row gets no gradient";
  EXPECT_TRUE(torch::equal(g[1][1], torch::zeros({16}))) << "without type ids only row 0 is used";
  EXPECT_TRUE(torch::equal(g[2].narrow(0, 0, 3), torch::zeros({3, 16}))) << "rows before the offset are unused";
  EXPECT_GT(g[2][3].abs().sum().item<double>(), 0);
  auto keep = torch::rand({2, 5, 16}) >= 0.5;
  auto dropped = embedding_layer_norm(in, gamma, beta, 0.5, 1e-5, Backend::kAten, keep);
  EXPECT_TRUE(torch::allclose(dropped, y * keep * 2.0));
}

TEST(EmbeddingLayerNorm, SaysWhyTheTritonPathCannotRun) {
  EmbeddingInputs in;
  in.ids = torch::zeros({2, 8}, torch::kLong);
  in.word = torch::zeros({100, 768}, torch::kBFloat16);
  in.type = torch::zeros({2, 768}, torch::kBFloat16);
  auto w = torch::ones({768}, torch::kBFloat16);
  EXPECT_EQ(triton_embedding_unsupported(in, w, w).value_or(""), "not a CUDA tensor");
  in.type = torch::zeros({2, 768});
  EXPECT_EQ(triton_embedding_unsupported(in, w, w).value_or(""),
            "the tables and gamma/beta are not contiguous, aligned (., E) tensors of one dtype and device");
  in.type = Tensor();
  in.ids = in.ids.to(torch::kInt);
  EXPECT_EQ(triton_embedding_unsupported(in, w, w).value_or(""), "ids are not contiguous (B, T) int64 on the tables' device");
}

// Every op's launches against the compiled signatures (see ResidualLayerNorm.LaunchPlans...).
TEST(FusedKernels, LaunchPlansOfRotaryCrossEntropyAndEmbeddingMatchTheCompiledSignatures) {
  if (!triton_kernels_built()) GTEST_SKIP() << "this build has no fused kernels (ROFORMER_WITH_TRITON_KERNELS off)";
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    std::vector<LaunchPlan> plans;
    auto qkv = torch::zeros({2, 4, 3, 12, 64}, dtype), out = torch::zeros({2, 4, 2, 12, 64}, dtype);
    auto table = torch::zeros({8, 64});
    plans.push_back(plan_rotary(qkv, 3 * 768, out, table, 4, 768, 64, false));
    auto logits = torch::zeros({5, 4000}, dtype), labels = torch::zeros({5}, torch::kLong), rows = torch::zeros({5});
    plans.push_back(plan_cross_entropy_forward(logits, labels, rows, rows, rows));
    plans.push_back(plan_cross_entropy_backward(logits, labels, rows, torch::zeros({}), logits));
    EmbeddingInputs in;
    in.ids = torch::zeros({2, 4}, torch::kLong);
    in.word = torch::zeros({100, 768}, dtype);
    in.type = torch::zeros({2, 768}, dtype);
    auto v = torch::zeros({768}, dtype), z = torch::zeros({8, 768}, dtype), stats = torch::zeros({8});
    auto rng_used = torch::zeros({2}, torch::kLong);
    plans.push_back(plan_embedding_forward(in, v, v, z, z, stats, stats, DropoutRng{}, rng_used, 0.1, 1e-12));
    for (const auto& plan : plans) {
      const auto* image = find_triton_image(plan.kernel, plan.variant, 9, 0);
      ASSERT_NE(image, nullptr) << plan.kernel << "/" << plan.variant;
      EXPECT_EQ(plan.args.signature(), image->signature) << plan.kernel << "/" << plan.variant;
      EXPECT_EQ(divisibility_violation(*image, plan.args), std::nullopt) << plan.kernel << "/" << plan.variant;
    }
  }
}

}  // namespace
