// The fused kernels on the GPU (src/kernels, issue 38) against their ATen paths: every output and
// every gradient in fp32 and bf16, the dropout masks replayed exactly (the ATen path applies the
// mask the kernel drew, from the same generator state), mask statistics, CUDA graph capture and
// replay, fallbacks, and tiny shapes for compute-sanitizer (scripts/gpu_check.sh kernels).
// Runs only where a GPU is visible (gpu_main.cpp reports the binary skipped otherwise).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/core/Generator.h>

#include <cmath>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#ifdef ROFORMER_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "kernels/cross_entropy.h"
#include "kernels/dropout_rng.h"
#include "kernels/embedding.h"
#include "kernels/fp8_linear.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/layer_norm.h"
#include "kernels/op_paths.h"
#include "kernels/rotary.h"
#include "kernels/triton_runtime.h"

namespace {

using namespace roformer::kernels;
using torch::Tensor;

torch::Device cuda() { return {torch::kCUDA, 0}; }

Tensor get_rng_state() { return at::globalContext().defaultGenerator(cuda()).get_state(); }
void set_rng_state(const Tensor& state) {
  auto gen = at::globalContext().defaultGenerator(cuda());
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

#define REQUIRE_KERNELS()                                                                              \
  do {                                                                                                 \
    if (!triton_kernels_built()) GTEST_SKIP() << "this build has no fused kernels (ROFORMER_WITH_TRITON_KERNELS off)"; \
  } while (0)

// max |got - want| <= atol + rtol * max |want|; prints the figure so the log records the margins.
void expect_close(const std::string& what, const Tensor& got, const Tensor& want, double atol, double rtol) {
  ASSERT_TRUE(got.defined() && want.defined()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double diff = (got.to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
  const double scale = want.to(torch::kDouble).abs().max().item<double>();
  EXPECT_LE(diff, atol + rtol * scale) << what << ": max |diff| " << diff << " against max |reference| " << scale;
  std::cout << "  " << what << ": max |diff| " << diff << " (max |ref| " << scale << ")\n";
}

// ---- Residual + dropout + LayerNorm ----------------------------------------------------------------

struct LnInputs {
  Tensor x, r, gamma, beta, dy, dz;  // dz undefined: z's own gradient not used (post-LN)
};

LnInputs ln_inputs(int64_t M, int64_t H, torch::ScalarType dtype, bool residual, bool dz, double x_scale = 1.0) {
  torch::manual_seed(7);
  auto o = torch::TensorOptions().device(cuda());
  LnInputs in;
  in.x = (x_scale * torch::randn({M, H}, o)).to(dtype).requires_grad_();
  if (residual) in.r = torch::randn({M, H}, o).to(dtype).requires_grad_();
  in.gamma = (1 + 0.5 * torch::randn({H}, o)).to(dtype).requires_grad_();
  in.beta = (0.1 * torch::randn({H}, o)).to(dtype).requires_grad_();
  in.dy = torch::randn({M, H}, o).to(dtype);
  if (dz) in.dz = torch::randn({M, H}, o).to(dtype);
  return in;
}

// y, z and the gradients of sum(y dy) + sum(z dz) for x, residual, gamma, beta.
std::vector<Tensor> ln_run(const LnInputs& in, double p, double eps, Backend backend, const Tensor& keep = Tensor()) {
  auto out = residual_dropout_layer_norm(in.x, in.r, in.gamma, in.beta, p, eps, backend, keep);
  auto loss = (out.y.to(torch::kFloat) * in.dy.to(torch::kFloat)).sum();
  if (in.dz.defined()) loss = loss + (out.z.to(torch::kFloat) * in.dz.to(torch::kFloat)).sum();
  std::vector<Tensor> inputs = {in.x, in.gamma, in.beta};
  if (in.r.defined()) inputs.push_back(in.r);
  auto grads = torch::autograd::grad({loss}, inputs);
  std::vector<Tensor> all = {out.y, out.z};
  all.insert(all.end(), grads.begin(), grads.end());
  return all;  // y, z, dx, dgamma, dbeta[, dresidual]
}

void compare_layer_norm(int64_t M, int64_t H, torch::ScalarType dtype, double p, bool residual, bool dz) {
  const std::string tag = std::string(dtype == torch::kFloat ? "fp32" : "bf16") + " M=" + std::to_string(M) +
                          " H=" + std::to_string(H) + " p=" + std::to_string(p) + (residual ? " residual" : "") +
                          (dz ? " dz" : "");
  SCOPED_TRACE(tag);
  std::cout << tag << "\n";
  auto in = ln_inputs(M, H, dtype, residual, dz);
  ASSERT_EQ(triton_layer_norm_unsupported(in.x, in.r, in.gamma, in.beta), std::nullopt);
  const double eps = 1e-5;
  const auto state = get_rng_state();
  auto fused = ln_run(in, p, eps, Backend::kTriton);
  set_rng_state(state);  // the same reservation again: the kernel's mask, drawn by dropout_keep_mask
  auto keep = p > 0 ? dropout_keep_mask(cuda(), M * H, p).view({M, H}).to(torch::kBool) : Tensor();
  auto ref = ln_run(in, p, eps, Backend::kAten, keep);
  // fp32: the kernel and ATen round alike but sum in other orders; bf16: one bf16 rounding apart
  // (the kernel rounds r + x/(1-p) once, ATen twice), 2^-8 relative, through the normalization.
  const bool f32 = dtype == torch::kFloat;
  const char* names[] = {"y", "z", "dx", "dgamma", "dbeta", "dresidual"};
  for (size_t i = 0; i < fused.size(); ++i) {
    const double rtol = f32 ? (i < 2 ? 1e-5 : 1e-4) : (i < 2 ? 1e-2 : 2e-2);
    expect_close(names[i], fused[i], ref[i], f32 ? 1e-5 : 1e-2, rtol);
  }
}

TEST(KernelsOnCuda, LayerNormMatchesTheAtenPathFp32) {
  REQUIRE_KERNELS();
  for (double p : {0.0, 0.1}) {
    compare_layer_norm(64, 768, torch::kFloat, p, true, false);  // post-LN at RoFormer-base width
    compare_layer_norm(35, 96, torch::kFloat, p, true, true);    // pre-LN, masked lanes (BLOCK 256)
    compare_layer_norm(6, 1040, torch::kFloat, p, false, false);  // no residual, BLOCK 4096
  }
  compare_layer_norm(3, 4096, torch::kFloat, 0.1, true, true);
}

TEST(KernelsOnCuda, LayerNormMatchesTheAtenPathBf16) {
  REQUIRE_KERNELS();
  for (double p : {0.0, 0.1}) {
    compare_layer_norm(64, 768, torch::kBFloat16, p, true, false);
    compare_layer_norm(35, 96, torch::kBFloat16, p, true, true);
    compare_layer_norm(6, 1040, torch::kBFloat16, p, false, false);
  }
  compare_layer_norm(2048, 768, torch::kBFloat16, 0.1, true, true);  // many rows per backward program
}

// eps and p are fp32 kernel parameters (AOT's trap: a double where the kernel reads a float). Rows
// of variance ~1e-6 make eps = 1e-5 and 1e-3 give visibly different y; each must match ATen.
TEST(KernelsOnCuda, LayerNormEpsReachesTheKernel) {
  REQUIRE_KERNELS();
  auto in = ln_inputs(16, 256, torch::kFloat, false, false, 1e-3);
  std::vector<Tensor> ys;
  for (double eps : {1e-5, 1e-3}) {
    auto fused = residual_dropout_layer_norm(in.x, in.r, in.gamma, in.beta, 0.0, eps, Backend::kTriton).y;
    auto ref = residual_dropout_layer_norm(in.x, in.r, in.gamma, in.beta, 0.0, eps, Backend::kAten).y;
    expect_close("y at eps " + std::to_string(eps), fused, ref, 1e-5, 1e-5);
    ys.push_back(fused);
  }
  EXPECT_GT((ys[0] - ys[1]).abs().max().item<double>(), 0.1);
}

// The drawn masks: rate 1 - p within 5 sigma over 16M elements, a fresh mask per call (two calls
// agree on about p^2 of their drops, as independent draws do), and the backward drops exactly
// what the forward dropped.
TEST(KernelsOnCuda, LayerNormMaskRateIndependenceAndBackwardAgree) {
  REQUIRE_KERNELS();
  const int64_t M = 16384, H = 1024;
  const double p = 0.1;
  auto in = ln_inputs(M, H, torch::kBFloat16, false, false);
  auto run = [&] {
    auto out = residual_dropout_layer_norm(in.x, Tensor(), in.gamma, in.beta, p, 1e-5, Backend::kTriton);
    auto dx = torch::autograd::grad({out.z.to(torch::kFloat).sum()}, {in.x})[0];  // 1/(1-p) kept, 0 dropped
    return std::make_pair(out.z == 0, dx == 0);
  };
  auto [dropped1, dx_zero1] = run();
  auto [dropped2, dx_zero2] = run();
  const double n = static_cast<double>(M * H);
  const double rate = dropped1.to(torch::kDouble).mean().item<double>();
  std::cout << "dropped fraction " << rate << " (p = " << p << ", sigma " << std::sqrt(p * (1 - p) / n) << ")\n";
  EXPECT_NEAR(rate, p, 5 * std::sqrt(p * (1 - p) / n));
  const double both = (dropped1 & dropped2).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(both, p * p, 5 * std::sqrt(p * p / n)) << "two calls' masks are not independent";
  EXPECT_TRUE(torch::equal(dropped1, dx_zero1)) << "the backward regenerated another mask";
  EXPECT_TRUE(torch::equal(dropped2, dx_zero2));
}

TEST(KernelsOnCuda, LayerNormUnalignedWidthRunsTheAtenPath) {
  REQUIRE_KERNELS();
  auto in = ln_inputs(8, 100, torch::kFloat, true, false);
  EXPECT_EQ(triton_layer_norm_unsupported(in.x, in.r, in.gamma, in.beta).value_or(""),
            "H = 100 is not a multiple of 16 (the kernels assume aligned rows)");
  auto a = residual_dropout_layer_norm(in.x, in.r, in.gamma, in.beta, 0.0, 1e-5, Backend::kTriton).y;
  auto b = residual_dropout_layer_norm(in.x, in.r, in.gamma, in.beta, 0.0, 1e-5, Backend::kAten).y;
  EXPECT_TRUE(torch::equal(a, b));
}

// Captured forward + backward: each replay draws a new mask from the generator's device-side
// offset (graph safety), and a replay from generator state S equals the eager call from S, bit
// for bit (the same kernel, seed and offset).
TEST(KernelsOnCuda, LayerNormGraphReplaysDrawNewMasksAndMatchEager) {
  REQUIRE_KERNELS();
#ifndef ROFORMER_WITH_CUDA
  GTEST_SKIP() << "built without ROFORMER_WITH_CUDA";
#else
  const double p = 0.1;
  auto in = ln_inputs(256, 768, torch::kBFloat16, false, false);
  auto step = [&] {
    auto out = residual_dropout_layer_norm(in.x, Tensor(), in.gamma, in.beta, p, 1e-5, Backend::kTriton);
    auto loss = (out.y.to(torch::kFloat) * in.dy.to(torch::kFloat)).sum() + out.z.to(torch::kFloat).sum();
    auto grads = torch::autograd::grad({loss}, {in.x, in.gamma});
    return std::vector<Tensor>{out.z, grads[0], grads[1]};
  };
  auto side = c10::cuda::getStreamFromPool();
  torch::cuda::synchronize();  // the inputs are ready before the side stream reads them
  at::cuda::CUDAGraph graph;
  std::vector<Tensor> captured;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    step();  // warm-up on the capture stream (kernels loaded, allocator pools)
    graph.capture_begin();
    captured = step();
    graph.capture_end();
  }
  torch::cuda::synchronize();
  const auto state = get_rng_state();
  graph.replay();
  std::vector<Tensor> first;
  for (const auto& t : captured) first.push_back(t.clone());
  graph.replay();
  EXPECT_FALSE(torch::equal(first[0] == 0, captured[0] == 0)) << "a replay redrew the same mask";
  EXPECT_TRUE(torch::equal(captured[0] == 0, captured[1] == 0)) << "a replay's backward used another mask";
  set_rng_state(state);
  auto eager = step();
  const char* names[] = {"z", "dx", "dgamma"};
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(torch::equal(eager[i], first[i])) << names[i];
#endif
}

// ---- Rotary of q and k ------------------------------------------------------------------------------

// The fp32 table of src/model/rotary.cpp: sin(t theta_i) | cos(t theta_i), theta_i = 10000^(-2i/D).
Tensor rotary_table(int64_t P, int64_t D) {
  auto pos = torch::arange(P, torch::kDouble).unsqueeze(1);
  auto angle = pos / torch::pow(10000.0, 2.0 * torch::arange(D / 2, torch::kDouble) / static_cast<double>(D));
  return torch::cat({angle.sin(), angle.cos()}, 1).to(torch::kFloat).to(cuda());
}

void compare_rotary(int64_t B, int64_t T, int64_t N, int64_t D, torch::ScalarType dtype) {
  const std::string tag = std::string(dtype == torch::kFloat ? "fp32" : "bf16") + " rotary B=" + std::to_string(B) +
                          " T=" + std::to_string(T) + " N=" + std::to_string(N) + " D=" + std::to_string(D);
  SCOPED_TRACE(tag);
  std::cout << tag << "\n";
  torch::manual_seed(9);
  auto qkv = torch::randn({B, T, 3, N, D}, torch::TensorOptions().device(cuda())).to(dtype).requires_grad_();
  auto table = rotary_table(T + 3, D);
  auto grad = torch::randn({B, T, 2, N, D}, qkv.options().requires_grad(false));
  auto qk = qkv.split_with_sizes({2, 1}, 2)[0];
  ASSERT_EQ(triton_rotary_unsupported(qk, table), std::nullopt);
  std::vector<Tensor> got, want;
  for (auto* out : {&got, &want}) {
    auto y = rotary_qk(qk, table, out == &got ? Backend::kTriton : Backend::kAten);
    *out = {y, torch::autograd::grad({(y.to(torch::kFloat) * grad.to(torch::kFloat)).sum()}, {qkv})[0]};
  }
  // The same fp32 rotation rounded once: equal up to FMA contraction, one rounding in bf16.
  const double tol = dtype == torch::kFloat ? 1e-6 : 1e-2;
  expect_close("q|k rotated", got[0], want[0], tol, tol);
  expect_close("dqkv", got[1], want[1], tol, tol);
}

TEST(KernelsOnCuda, RotaryMatchesTheAtenPath) {
  REQUIRE_KERNELS();
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    compare_rotary(4, 512, 12, 64, dtype);  // RoFormer-base's heads
    compare_rotary(3, 5, 3, 16, dtype);     // H = 48: masked pairs (BLOCK 256)
  }
}

// ---- Cross-entropy -----------------------------------------------------------------------------------

void compare_cross_entropy(int64_t P, int64_t V, torch::ScalarType dtype) {
  const std::string tag = std::string(dtype == torch::kFloat ? "fp32" : "bf16") + " cross-entropy P=" +
                          std::to_string(P) + " V=" + std::to_string(V);
  SCOPED_TRACE(tag);
  std::cout << tag << "\n";
  torch::manual_seed(10);
  auto logits = (4 * torch::randn({P, V}, torch::TensorOptions().device(cuda()))).to(dtype).requires_grad_();
  auto labels = torch::randint(0, V, {P}, logits.options().dtype(torch::kLong).requires_grad(false));
  labels.index_put_({torch::indexing::Slice(0, P, 7)}, -100);  // every 7th row ignored
  ASSERT_EQ(triton_cross_entropy_unsupported(logits, labels), std::nullopt);
  std::vector<Tensor> got, want;
  for (auto* out : {&got, &want}) {
    auto r = cross_entropy_sum(logits, labels, out == &got ? Backend::kTriton : Backend::kAten);
    // 0.37: the loss's gradient, which the kernel reads on the device
    *out = {r.loss, r.correct, torch::autograd::grad({r.loss * 0.37}, {logits})[0]};
  }
  expect_close("loss sum", got[0], want[0], 0, 1e-5);
  EXPECT_EQ(got[1].item<int64_t>(), want[1].item<int64_t>()) << "correct count";
  expect_close("dlogits", got[2], want[2], dtype == torch::kFloat ? 1e-7 : 1e-4, dtype == torch::kFloat ? 1e-5 : 1e-2);
}

TEST(KernelsOnCuda, CrossEntropyMatchesTheAtenPath) {
  REQUIRE_KERNELS();
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    compare_cross_entropy(2458, 32000, dtype);  // RoFormer-base: 15% of 16384 positions
    compare_cross_entropy(13, 4000, dtype);     // tiny's vocabulary: a partial last block
  }
}

// ---- Embeddings + LayerNorm ----------------------------------------------------------------------------

void compare_embedding(int64_t B, int64_t T, int64_t E, torch::ScalarType dtype, double p, bool type_ids, bool position) {
  const std::string tag = std::string(dtype == torch::kFloat ? "fp32" : "bf16") + " embedding B=" + std::to_string(B) +
                          " T=" + std::to_string(T) + " E=" + std::to_string(E) + " p=" + std::to_string(p) +
                          (type_ids ? " type_ids" : "") + (position ? " position" : "");
  SCOPED_TRACE(tag);
  std::cout << tag << "\n";
  torch::manual_seed(12);
  auto o = torch::TensorOptions().device(cuda());
  EmbeddingInputs in;
  in.ids = torch::randint(0, 1000, {B, T}, o.dtype(torch::kLong));
  in.word = torch::randn({1000, E}, o).to(dtype).requires_grad_();
  in.type = torch::randn({2, E}, o).to(dtype).requires_grad_();
  if (type_ids) in.type_ids = torch::randint(0, 2, {B, T}, o.dtype(torch::kLong));
  if (position) in.position = torch::randn({T + 4, E}, o).to(dtype).requires_grad_();
  in.position_offset = position ? 2 : 0;
  in.padding_idx = 0;
  auto gamma = (1 + 0.5 * torch::randn({E}, o)).to(dtype).requires_grad_();
  auto beta = (0.1 * torch::randn({E}, o)).to(dtype).requires_grad_();
  auto dy = torch::randn({B, T, E}, o);
  ASSERT_EQ(triton_embedding_unsupported(in, gamma, beta), std::nullopt);
  std::vector<Tensor> inputs = {in.word, in.type, gamma, beta};
  if (position) inputs.push_back(in.position);
  const auto state = get_rng_state();
  auto run = [&](Backend backend, const Tensor& keep) {
    auto y = embedding_layer_norm(in, gamma, beta, p, 1e-5, backend, keep);
    auto grads = torch::autograd::grad({(y.to(torch::kFloat) * dy).sum()}, inputs, {}, false, false, true);
    grads.insert(grads.begin(), y);
    return grads;  // y, dword, dtype, dgamma, dbeta[, dposition]
  };
  auto got = run(Backend::kTriton, Tensor());
  set_rng_state(state);
  auto keep = p > 0 ? dropout_keep_mask(cuda(), B * T * E, p).view({B, T, E}).to(torch::kBool) : Tensor();
  auto want = run(Backend::kAten, keep);
  const bool f32 = dtype == torch::kFloat;
  const char* names[] = {"y", "dword", "dtype", "dgamma", "dbeta", "dposition"};
  for (size_t i = 0; i < got.size(); ++i)
    expect_close(names[i], got[i], want[i], f32 ? 1e-5 : 1e-2, f32 ? (i == 0 ? 1e-5 : 1e-4) : 2e-2);
}

TEST(KernelsOnCuda, EmbeddingLayerNormMatchesTheAtenPath) {
  REQUIRE_KERNELS();
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    compare_embedding(32, 512, 768, dtype, 0.1, false, false);  // RoFormer-base: word + type row 0
    compare_embedding(3, 7, 48, dtype, 0.1, true, true);        // BERT-style: per-token types, absolute positions
    compare_embedding(2, 9, 128, dtype, 0.0, false, true);
  }
}

// sum(out * w) with out's gradient handed to its op as a contiguous view one element past an
// aligned start (unaligned = true: out enters a cat after one element, and cat's backward slices the
// joined gradient), or as the plain aligned w.
Tensor weighted_sum(const Tensor& out, const Tensor& w, bool unaligned) {
  auto flat = out.reshape(-1);  // in out's dtype: the cast's backward would hand back a fresh tensor
  if (!unaligned) return (flat.to(torch::kFloat) * w.reshape(-1)).sum();
  auto joined = torch::cat({torch::zeros({1}, flat.options()), flat});  // flat's grad: joined's, sliced at 1
  return (joined.to(torch::kFloat) * torch::cat({torch::zeros({1}, w.options()), w.reshape(-1)})).sum();
}

// The backward passes take their incoming gradients as the forwards take their inputs (issue 51): a
// gradient that arrives as a contiguous view at an unaligned offset is copied to an aligned buffer
// first (noted as the op's path), so the gradients equal those of an aligned one bit for bit; without
// the copy the kernels would read it as if aligned (launch_triton now refuses such a launch).
TEST(KernelsOnCuda, BackwardsTakeGradientsAtUnalignedOffsets) {
  REQUIRE_KERNELS();
  reset_op_paths();
  auto o = torch::TensorOptions().device(cuda());
  torch::manual_seed(13);
  {  // residual + LayerNorm, bf16 (2-byte elements: one element is 2 bytes off)
    auto in = ln_inputs(8, 64, torch::kBFloat16, true, false);
    auto w = torch::randn({8, 64}, o);
    std::vector<Tensor> grads[2];
    for (const bool unaligned : {false, true}) {
      auto out = residual_dropout_layer_norm(in.x, in.r, in.gamma, in.beta, 0.0, 1e-5, Backend::kTriton);
      grads[unaligned] = torch::autograd::grad({weighted_sum(out.y, w, unaligned)}, {in.x, in.r, in.gamma, in.beta});
    }
    for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_TRUE(torch::equal(grads[1][i], grads[0][i])) << "layer norm " << i;
  }
  {  // rotary on the packed q|k, fp32
    auto qk = torch::randn({2, 16, 2, 2, 16}, o).requires_grad_();
    auto table = torch::randn({16, 16}, o);
    auto w = torch::randn({2, 16, 2, 2, 16}, o);
    Tensor g[2];
    for (const bool unaligned : {false, true})
      g[unaligned] = torch::autograd::grad({weighted_sum(rotary_qk(qk, table, Backend::kTriton), w, unaligned)}, {qk})[0];
    EXPECT_TRUE(torch::equal(g[1], g[0])) << "rotary";
  }
  {  // embeddings + LayerNorm, bf16
    EmbeddingInputs in;
    in.ids = torch::randint(0, 100, {2, 8}, o.dtype(torch::kLong));
    in.word = torch::randn({100, 32}, o).to(torch::kBFloat16).requires_grad_();
    auto gamma = torch::ones({32}, o).to(torch::kBFloat16).requires_grad_();
    auto beta = torch::zeros({32}, o).to(torch::kBFloat16).requires_grad_();
    auto w = torch::randn({2, 8, 32}, o);
    std::vector<Tensor> grads[2];
    for (const bool unaligned : {false, true}) {
      auto y = embedding_layer_norm(in, gamma, beta, 0.0, 1e-5, Backend::kTriton);
      grads[unaligned] = torch::autograd::grad({weighted_sum(y, w, unaligned)}, {in.word, gamma, beta});
    }
    for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_TRUE(torch::equal(grads[1][i], grads[0][i])) << "embedding " << i;
  }
  const auto paths = op_paths();
  for (const char* op : {"residual_dropout_layer_norm", "rotary_qk", "embedding_layer_norm"}) {
    ASSERT_TRUE(paths.count(op)) << op;
    EXPECT_NE(paths.at(op).find("copied to an aligned buffer"), std::string::npos) << op << ": " << paths.at(op);
    EXPECT_EQ(paths.at(op).find("aten"), std::string::npos) << op << " fell back: " << paths.at(op);
  }
}

// ---- cuBLASLt GEMM epilogues (issue 51) ---------------------------------------------------------------

// linear_epilogue and ffn_gelu_epilogue against ATen's composition (F::linear, the tanh GELU): the
// output and every gradient, fp32 (TF32 off: float rounding, 1e-5) at small shapes and bf16 at
// RoFormer-base's (M 1024 tokens, H 768, I 3072: bf16 rounding, 2e-2), with and without biases; every
// GEMM took its cuBLASLt plan (the op paths say "cublaslt" and nothing else).
TEST(GemmEpiloguesOnCuda, LinearAndFeedForwardMatchAten) {
  if (!gemm_epilogues_built()) GTEST_SKIP() << "this build has no cuBLASLt (a CPU-only LibTorch)";
  reset_op_paths();
  namespace F = torch::nn::functional;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16})
    for (const bool bias : {true, false}) {
      const bool f32 = dtype == torch::kFloat;
      const int64_t M = f32 ? 96 : 1024, H = f32 ? 64 : 768, I = 4 * H;
      const std::string tag = std::string(f32 ? "fp32" : "bf16") + (bias ? " biases" : " no biases");
      SCOPED_TRACE(tag);
      std::cout << "GEMM epilogues " << tag << "\n";
      torch::manual_seed(14);
      auto o = torch::TensorOptions().device(cuda());
      auto param = [&](std::vector<int64_t> shape, double scale) { return (scale * torch::randn(shape, o)).to(dtype).requires_grad_(); };
      auto x = param({2, M / 2, H}, 1.0), w1 = param({I, H}, 0.05), w2 = param({H, I}, 0.02);
      auto b1 = bias ? param({I}, 0.1) : Tensor(), b2 = bias ? param({H}, 0.1) : Tensor();
      auto dy = torch::randn({2, M / 2, H}, o);
      std::vector<Tensor> inputs = {x, w1, w2};
      if (bias) inputs.insert(inputs.end(), {b1, b2});
      auto grads_of = [&](const Tensor& y) {
        auto g = torch::autograd::grad({(y.to(torch::kFloat) * dy).sum()}, inputs);
        g.insert(g.begin(), y);
        return g;  // y, dx, dw1, dw2[, db1, db2]
      };
      const auto got = grads_of(ffn_gelu_epilogue(x, w1, b1, w2, b2));
      const auto want = grads_of(F::linear(torch::gelu(F::linear(x, w1, b1), "tanh"), w2, b2));
      const char* names[] = {"y", "dx", "dw1", "dw2", "db1", "db2"};
      for (size_t i = 0; i < got.size(); ++i) expect_close(std::string("ffn ") + names[i], got[i], want[i], 0, f32 ? 1e-5 : 2e-2);
      // One linear layer: the bias epilogue forward, BGRADB for dW and db.
      std::vector<Tensor> lin_inputs = {x, w1};
      if (bias) lin_inputs.push_back(b1);
      auto lin_grads = [&](const Tensor& y) {
        auto g = torch::autograd::grad({(y.to(torch::kFloat) * torch::ones_like(y, torch::kFloat).cumsum(-1).div(I)).sum()}, lin_inputs);
        g.insert(g.begin(), y);
        return g;  // y, dx, dw[, db]
      };
      const auto lin_got = lin_grads(linear_epilogue(x, w1, b1)), lin_want = lin_grads(F::linear(x, w1, b1));
      const char* lin_names[] = {"y", "dx", "dw", "db"};
      for (size_t i = 0; i < lin_got.size(); ++i)
        expect_close(std::string("linear ") + lin_names[i], lin_got[i], lin_want[i], 0, f32 ? 1e-5 : 2e-2);
    }
  const auto paths = op_paths();
  EXPECT_EQ(paths.at("ffn_gelu_epilogue"), "cublaslt");
  EXPECT_EQ(paths.at("linear_epilogue"), "cublaslt");
}

// FP8 linear layers (train.fp8, issue 51) through _scaled_mm at RoFormer-base's shapes (M 1024 tokens,
// H 768, N 3072), bf16 inputs: the output and every gradient equal the same products of the
// dequantized FP8 operands (x, W in E4M3, dy in E5M2) to bf16/fp32 accumulation rounding (1e-2), and
// stay within FP8's rounding of the bf16 linear (8%); captured in a CUDA graph, a replay with new
// inputs equals the eager call bit for bit (the scales are computed on the device, nothing is read back).
TEST(Fp8OnCuda, LinearIsTheScaledProductOfItsFp8OperandsAndReplaysInAGraph) {
  const auto why = fp8_linear_unsupported(torch::zeros({16, 16}, cuda()), torch::zeros({16, 16}, cuda()));
  if (why) GTEST_SKIP() << *why;
#ifndef ROFORMER_WITH_CUDA
  GTEST_SKIP() << "built without ROFORMER_WITH_CUDA";
#else
  namespace F = torch::nn::functional;
  const int64_t M = 1024, K = 768, N = 3072;
  torch::manual_seed(51);
  auto o = torch::TensorOptions().device(cuda()).dtype(torch::kBFloat16);
  auto x = torch::randn({2, M / 2, K}, o).requires_grad_();
  auto w = (0.05 * torch::randn({N, K}, o)).requires_grad_();
  auto b = (0.1 * torch::randn({N}, o)).requires_grad_();
  auto dy = (1e-3 * torch::randn({2, M / 2, N}, o));
  auto grads_of = [&](const Tensor& y) {
    auto g = torch::autograd::grad({y}, {x, w, b}, {dy});
    g.insert(g.begin(), y);
    return g;  // y, dx, dw, db
  };
  const auto got = grads_of(fp8_linear(x, w, b));
  const auto xq = fp8_quantize(x.detach().reshape({M, K}), Fp8Format::kE4M3).dequantized();
  const auto wq = fp8_quantize(w.detach(), Fp8Format::kE4M3).dequantized();
  const auto gq = fp8_quantize(dy.reshape({M, N}), Fp8Format::kE5M2).dequantized();
  const auto ref_y = (xq.mm(wq.t()) + b.detach().to(torch::kFloat)).view({2, M / 2, N});
  expect_close("fp8 y", got[0], ref_y, 0, 1e-2);
  expect_close("fp8 dx", got[1], gq.mm(wq).view({2, M / 2, K}), 0, 1e-2);
  expect_close("fp8 dw", got[2], gq.t().mm(xq), 0, 1e-2);
  expect_close("fp8 db", got[3], dy.reshape({M, N}).to(torch::kFloat).sum(0), 0, 1e-2);
  const auto bf16 = grads_of(F::linear(x, w, b));
  const char* names[] = {"y vs bf16", "dx vs bf16", "dw vs bf16", "db vs bf16"};
  for (size_t i = 0; i < got.size(); ++i) expect_close(names[i], got[i], bf16[i], 0, 8e-2);
  // Graph capture of forward + backward, replayed with new inputs.
  auto step = [&] { return grads_of(fp8_linear(x, w, b)); };
  auto side = c10::cuda::getStreamFromPool();
  torch::cuda::synchronize();
  at::cuda::CUDAGraph graph;
  std::vector<Tensor> captured;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    step();
    graph.capture_begin();
    captured = step();
    graph.capture_end();
  }
  torch::cuda::synchronize();
  {
    torch::NoGradGuard no_grad;
    x.mul_(3.0);
    w.mul_(0.5);
    dy.mul_(-2.0);
  }
  graph.replay();
  torch::cuda::synchronize();
  const auto eager = step();
  const char* graph_names[] = {"y", "dx", "dw", "db"};
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(torch::equal(eager[i], captured[i])) << "graph replay vs eager: " << graph_names[i];
#endif
}

// What scripts/gpu_check.sh runs under compute-sanitizer: every kernel once, forward and backward,
// at tiny shapes (masked lanes, a last backward program with fewer rows), against the ATen path.
TEST(KernelsOnCuda, TinyShapesForTheSanitizer) {
  REQUIRE_KERNELS();
  compare_layer_norm(3, 16, torch::kFloat, 0.1, true, true);
  compare_layer_norm(5, 48, torch::kBFloat16, 0.1, false, false);
  compare_rotary(2, 3, 1, 16, torch::kBFloat16);
  compare_cross_entropy(3, 80, torch::kFloat);
  compare_embedding(2, 3, 16, torch::kBFloat16, 0.1, true, true);
  auto keep = dropout_keep_mask(cuda(), 1001, 0.5);
  EXPECT_EQ(keep.numel(), 1001);
  EXPECT_LE(keep.max().item<int>(), 1);
}

}  // namespace
