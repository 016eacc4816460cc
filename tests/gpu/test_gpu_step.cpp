// The CUDA training step through the C++ API (synthetic batches): fused AdamW against the loop,
// no host synchronization between logging steps (PyTorch's sync-debug mode set to error), CUDA-graph
// steps against eager ones, the attention kernel for bf16 batches, disentangled attention's bias
// path and ModernBERT's local layers against the CPU, the kernel policy's fused entries (Triton
// kernels) against the default step, DeBERTa's relative index across length changes under CUDA graphs.
// Runs only where a GPU is visible (gpu_main.cpp reports the binary skipped otherwise).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <utility>
#include <vector>

#include "core/device.h"
#include "kernels/fp8_linear.h"
#include "kernels/op_paths.h"
#include "model/autocast.h"
#include "model/kernel_policy.h"
#include "model/roformer.h"
#include "model_util.h"
#include "train/batch_source.h"
#include "train/synthetic.h"
#include "train_step_util.h"

using namespace roformer::test;

namespace {

// Tolerances: fp32 kernels on CUDA (TF32 off) agree to float rounding, accumulated over 6 steps.
constexpr double kFp32Rtol = 1e-4, kFp32Atol = 1e-5;

// The losses of `steps` steps of `t`, each read back and expected finite.
std::vector<double> finite_losses(StepUnderTest& t, int steps) {
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) {
    const auto r = t.run(true);
    EXPECT_TRUE(r.finite) << "step " << i + 1;
    out.push_back(r.loss);
  }
  return out;
}

// One trainer after the other, as on the CPU: each reseeds the CUDA generator on setup, so both
// draw the same batches and dropout masks (interleaved steps would share the generator's stream).
TEST(GpuStep, FusedAdamWOnCudaEqualsTheLoop) {
  auto loop = make_step(tiny_step_config(false, 1.0, "cuda"));
  ASSERT_TRUE(loop->step->device().is_cuda());
  const auto init = snapshot(*loop);
  std::vector<double> loop_losses;
  for (int i = 0; i < 6; ++i) loop_losses.push_back(loop->run(true).loss);
  const auto after_loop = snapshot(*loop);

  auto fused = make_step(tiny_step_config(true, 1.0, "cuda"));
  ASSERT_TRUE(fused->step->optimizer().fused());
  expect_close(snapshot(*fused), init, 0, 0);
  for (int i = 0; i < 6; ++i) {
    const double b = fused->run(true).loss;
    EXPECT_NEAR(b, loop_losses[i], kFp32Rtol * loop_losses[i]) << "step " << i + 1;
  }
  EXPECT_GT(max_change(init, after_loop), 1e-2);
  std::cout << "max |fused - loop| after 6 CUDA steps: "
            << expect_close(snapshot(*fused), after_loop, kFp32Rtol, kFp32Atol) << "\n";
}

// Between logging steps a step must not read anything back: sync-debug mode "error" turns any
// synchronizing call (item(), a blocking copy, stream or device synchronize) into an exception.
TEST(GpuStep, NoHostSyncInsideANonLoggingStep) {
  // bf16 with param_dtype auto: bf16 parameters and fp32 masters; bf16 with fp32 parameters: autocast.
  for (const auto& [precision, param_dtype] : std::vector<std::pair<std::string, std::string>>{
           {"bf16", "auto"}, {"bf16", "fp32"}, {"fp32", "auto"}}) {
    SCOPED_TRACE(precision + ", param_dtype " + param_dtype);
    auto t = make_step(tiny_step_config(true, 0.5, "cuda", precision,
                                           {"model.hidden_dropout=0.1", "model.attention_dropout=0.1",
                                            "train.param_dtype=" + param_dtype}));
    EXPECT_EQ(t->step->compute_model().ptr() != t->step->model().ptr(), precision == "bf16" && param_dtype == "auto");
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(t->run(true).finite);  // warm-up: lazy inits may sync
    roformer::core::set_cuda_sync_debug_mode(2);
    std::string error;
    try {
      for (int i = 0; i < 3; ++i) EXPECT_FALSE(t->run(false).synced);
    } catch (const std::exception& e) {
      error = e.what();
    }
    roformer::core::set_cuda_sync_debug_mode(0);
    EXPECT_EQ(error, "") << "a non-logging step synchronized with the host";
    const auto r = t->run(true);  // the logging step reads back as usual
    EXPECT_TRUE(r.synced);
    EXPECT_TRUE(r.finite);
    // Those steps were CUDA graphs (train.cuda_graph is on by default): the micro-batch's, captured
    // in the first step, and the update's, captured in the fourth (the third warmed it up).
    ASSERT_NE(t->step->cuda_graphs(), nullptr);
    EXPECT_EQ(t->step->cuda_graphs()->captured(), 2);
  }
}

// train.cuda_graph replays the very kernels the eager step launches, dropout included (the graph
// draws the generator's offsets as the eager ops do): the same losses and weights, step by step,
// with logging (synced) steps between graphed updates, micro-batches accumulated (grad_accum 2), for
// autocast and for bf16 parameters with fp32 masters. Tolerance: 1e-6 relative; measured figures printed.
TEST(GpuStep, CudaGraphStepsMatchTheEagerStep) {
  for (const std::string param_dtype : {"fp32", "bf16"}) {
    SCOPED_TRACE(param_dtype);
    auto config = [&](bool graph) {
      return tiny_step_config(true, 0.5, "cuda", "bf16",
                              {"model.hidden_dropout=0.1", "model.attention_dropout=0.1",
                               "train.param_dtype=" + param_dtype, std::string("train.cuda_graph=") + (graph ? "true" : "false")});
    };
    auto run = [&](bool graph, std::vector<double>& losses) {
      auto t = make_step(config(graph));
      EXPECT_EQ(t->step->cuda_graphs() != nullptr, graph);
      for (int i = 0; i < 12; ++i) {
        const auto r = t->run(/*host_sync=*/i % 4 == 3);
        if (r.synced) losses.push_back(r.loss);
      }
      if (graph) {
        EXPECT_EQ(t->step->cuda_graphs()->captured(), 2);       // one batch shape, one update
        EXPECT_EQ(t->step->cuda_graphs()->replayed(), 23 + 8);  // 24 micro-batches less the warm-up; 9 sync-free updates less the warm-up
      }
      return snapshot(*t);
    };
    std::vector<double> eager_losses, graph_losses;
    const auto eager = run(false, eager_losses);
    const auto graphed = run(true, graph_losses);
    ASSERT_EQ(eager_losses.size(), 3u);
    ASSERT_EQ(graph_losses.size(), 3u);
    double worst_loss = 0;
    for (size_t i = 0; i < eager_losses.size(); ++i) {
      EXPECT_NEAR(graph_losses[i], eager_losses[i], 1e-6 * eager_losses[i]) << "logged step " << 4 * (i + 1);
      worst_loss = std::max(worst_loss, std::abs(graph_losses[i] - eager_losses[i]));
    }
    std::cout << param_dtype << " parameters: |graph - eager| loss " << worst_loss << ", weights "
              << expect_close(graphed, eager, 1e-6, 1e-7) << " after 12 steps\n";
  }
}

TEST(GpuStep, UnpaddedBf16AttentionRunsAFusedKernel) {
  // RoFormer-base's attention shape: 12 heads of 64.
  roformer::config::ModelConfig base;
  base.num_layers = 1;
  roformer::model::RoFormerForMaskedLM model(roformer::model::RoFormerOptions(base, 1000));
  model->to(torch::kCUDA);
  model->train();
  for (int64_t T : {128, 512}) {
    const std::string backend = model->attention_backend(8, T, torch::kBFloat16, false);
    std::cout << "bf16 T=" << T << ": " << backend << " (padded: "
              << model->attention_backend(8, T, torch::kBFloat16, true) << ")\n";
    EXPECT_TRUE(backend == "flash" || backend == "cudnn") << "T=" << T << ": " << backend;
  }
}

// The CUDA fast paths of issue 13 (one QKV GEMM; the rotation as one fp32 complex multiply; biases
// inside the GEMMs) against the reference path (three GEMMs; the element-wise chain; `+= bias`): the same weights and batch, logits and
// every gradient. Tolerances: fp32, float rounding (GEMM blocking differs): 1e-4 relative. bf16:
// the reference rounds q and k to bf16 after each of its five rotary operations, the fused form once,
// so they differ by bf16 rounding (2^-8 relative) carried through the layers: the bound is 3% of the
// largest logit and a 5% relative L1 difference per gradient (measured: see the printed figures).
TEST(GpuStep, FusedQkvAndFusedRotaryMatchTheReferencePath) {
  using namespace roformer::model;
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const roformer::config::ModelConfig m = roformer::test::two_layer_model_config(128, 4, 256, 64);
    KernelPolicy reference_policy, fast_policy;  // the fast one is the default
    reference_policy.rotary = RotaryImpl::kElementwise;
    reference_policy.fused_qkv = false;
    reference_policy.bias_in_gemm = false;
    torch::manual_seed(5);
    RoFormerForMaskedLM reference(RoFormerOptions(m, 300));
    torch::manual_seed(5);
    RoFormerForMaskedLM fast(RoFormerOptions(m, 300));
    reference->to(torch::kCUDA);
    fast->to(torch::kCUDA);
    // to() keeps q, k and v side by side: the fused GEMM reads them without a concatenation.
    EXPECT_TRUE(std::dynamic_pointer_cast<RoFormerLayerImpl>(fast->encoder->layers->ptr(0))->self_attention->qkv_packed());
    auto ids = torch::randint(5, 300, {4, 48}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
    auto run = [&](RoFormerForMaskedLM& m, const KernelPolicy& policy) {
      const ScopedKernelPolicy scoped(policy);
      AutocastScope autocast(torch::kCUDA, precision == "bf16" ? roformer::config::Precision::kBf16
                                                               : roformer::config::Precision::kFp32);
      auto logits = m->forward(ids, {}, {});
      logits.to(torch::kFloat).pow(2).mean().backward();
      return logits.to(torch::kFloat);
    };
    auto a = run(reference, reference_policy), b = run(fast, fast_policy);
    const double logit_diff = (a - b).abs().max().item<double>(), logit_scale = a.abs().max().item<double>();
    double worst_grad = 0;
    auto pa = reference->parameters(), pb = fast->parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      const double rel = (pa[i].grad() - pb[i].grad()).abs().sum().item<double>() /
                         std::max(pa[i].grad().abs().sum().item<double>(), 1e-30);
      worst_grad = std::max(worst_grad, rel);
    }
    std::cout << precision << ": max |logit difference| " << logit_diff << " (largest logit " << logit_scale
              << "), worst relative L1 gradient difference " << worst_grad << "\n";
    if (precision == "fp32") {
      EXPECT_LT(logit_diff, 1e-4 * logit_scale);
      EXPECT_LT(worst_grad, 1e-4);
    } else {
      EXPECT_LT(logit_diff, 0.03 * logit_scale);
      EXPECT_LT(worst_grad, 0.05);
    }
  }
}

// The model of `m` built alike (seed 5) on the CPU and on CUDA, run on 4 x 48 random ids (row 2 padded
// from `padded_from`) with the mean squared logit as the loss: CUDA in fp32 within float rounding of
// the CPU (TF32 off: logits within 1e-4 of the largest, every parameter's gradient within 1e-4
// relative L1), in bf16 finite and within 3% of the largest logit, its gradients finite. Prints the
// figures under `label`; returns the CUDA model.
roformer::model::RoFormerForMaskedLM expect_cuda_matches_cpu(const roformer::config::ModelConfig& m,
                                                             int64_t padded_from, const std::string& label) {
  using namespace roformer::model;
  torch::manual_seed(5);
  RoFormerForMaskedLM cpu(RoFormerOptions(m, 300));
  torch::manual_seed(5);
  RoFormerForMaskedLM cuda(RoFormerOptions(m, 300));
  cuda->to(torch::kCUDA);
  auto ids = torch::randint(5, 300, {4, 48}, torch::kLong);
  auto mask = torch::ones({4, 48}, torch::kLong);
  mask.index_put_({2, torch::indexing::Slice(padded_from, torch::indexing::None)}, 0);
  auto run = [&](RoFormerForMaskedLM& model, const torch::Device& device, roformer::config::Precision precision) {
    model->zero_grad();
    torch::Tensor logits;
    {
      AutocastScope autocast(device.type(), precision);
      logits = model->forward(ids.to(device), mask.to(device), {});
    }
    auto real = logits.to(torch::kCPU, torch::kFloat).index({mask.to(torch::kBool)});  // (tokens, V)
    logits.to(torch::kFloat).pow(2).mean().backward();
    return real;
  };
  const auto fp32 = roformer::config::Precision::kFp32;
  auto a = run(cpu, torch::kCPU, fp32), b = run(cuda, torch::kCUDA, fp32);
  const double logit_diff = (a - b).abs().max().item<double>(), logit_scale = a.abs().max().item<double>();
  double worst_grad = 0;
  auto pa = cpu->parameters(), pb = cuda->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto gb = pb[i].grad().to(torch::kCPU);
    worst_grad = std::max(worst_grad, (pa[i].grad() - gb).abs().sum().item<double>() /
                                          std::max(pa[i].grad().abs().sum().item<double>(), 1e-30));
  }
  std::cout << label << " fp32 CPU vs CUDA: max |logit difference| " << logit_diff << " (largest logit "
            << logit_scale << "), worst relative L1 gradient difference " << worst_grad << "\n";
  EXPECT_LT(logit_diff, 1e-4 * logit_scale);
  EXPECT_LT(worst_grad, 1e-4);
  auto c = run(cuda, torch::kCUDA, roformer::config::Precision::kBf16);
  EXPECT_TRUE(torch::isfinite(c).all().item<bool>());
  std::cout << label << " bf16 CUDA vs fp32 CPU: max |logit difference| " << (a - c).abs().max().item<double>() << "\n";
  EXPECT_LT((a - c).abs().max().item<double>(), 0.03 * logit_scale);
  for (auto& p : cuda->parameters()) EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
  return cuda;
}

// Disentangled attention on CUDA: the relative scores enter SDPA as a float bias (B, N, T, T) with
// -inf at padded keys, which the memory-efficient kernel takes with its gradient. The same weights
// and a padded batch on the CPU (math kernel) and on CUDA: fp32 logits and every gradient agree to
// float rounding (TF32 off: 1e-4 relative), the enhanced mask decoder included; a bf16 step is
// finite and close (3% of the largest logit); the selector reports the kernel it picks.
TEST(GpuStep, DisentangledAttentionBiasOnCudaMatchesTheCpu) {
  using namespace roformer::model;
  roformer::config::ModelConfig m = roformer::test::two_layer_model_config(128, 4, 256, 64);
  m.position = roformer::config::Position::kDisentangled;
  m.position_buckets = 16;
  m.enhanced_mask_decoder = true;
  auto cuda = expect_cuda_matches_cpu(m, 30, "disentangled");
  // A fused kernel that takes the bias and its gradient (memory-efficient, or cuDNN's where LibTorch
  // prefers it), not the math fallback that materializes the probabilities twice.
  cuda->train();
  const std::string backend = cuda->attention_backend(8, 512, torch::kBFloat16, false);
  std::cout << "disentangled bf16 T=512 attention kernel: " << backend << "\n";
  EXPECT_TRUE(backend == "efficient" || backend == "cudnn") << backend;
}

// ModernBERT's layers on CUDA (issue 54): GeGLU, pre-LN without layer 0's attention norm, no biases,
// local layers (every layer but 0 and 3) attending within +-8 through a band mask (B, 1, T, T) with
// their own rotary base, through the default CUDA step's paths (one QKV GEMM, the fused rotation).
// The same weights and a padded batch of 48 tokens on the CPU and on CUDA: fp32 logits and every
// gradient agree to float rounding (TF32 off: 1e-4 relative), a bf16 forward is finite and close
// (3% of the largest logit), and the local layers' band runs a fused kernel that takes a mask.
TEST(GpuStep, ModernBertLocalAttentionOnCudaMatchesTheCpu) {
  using namespace roformer::model;
  roformer::config::ModelConfig m = roformer::test::two_layer_model_config(128, 4, 256, 64);
  m.num_layers = 4;
  m.type_vocab_size = 0;
  m.norm = roformer::config::Norm::kPre;
  m.first_attention_norm = false;
  m.feed_forward = roformer::config::FeedForward::kGlu;
  m.bias = false;
  m.local_attention = 16;
  m.global_attention_every = 3;
  m.rotary_base = 160000.0;
  m.local_rotary_base = 10000.0;
  auto cuda = expect_cuda_matches_cpu(m, 20, "modernbert");
  // Layer 0 (global, unpadded) may take flash; a local layer's band is a mask: a kernel that takes one.
  cuda->train();
  auto layer = std::dynamic_pointer_cast<RoFormerLayerImpl>(cuda->encoder->layers->ptr(1));
  const std::string backend =
      layer->self_attention->attention_backend(8, 512, torch::kBFloat16, torch::Device(torch::kCUDA), false);
  std::cout << "modernbert local layer bf16 T=512 attention kernel: " << backend << "\n";
  EXPECT_TRUE(backend == "efficient" || backend == "cudnn") << backend;
}

}  // namespace

// The kernel policy's fused entries (issue 38) on CUDA, where they run the Triton kernels: a
// training step with each entry on (and all four) against the default step from the same
// initialization, where both draw the same dropout masks, i.e. none: fp32 and bf16 parameters
// (CUDA graphs, the default GPU step) without dropout, the same losses to float rounding (fp32,
// three steps) and to bf16 rounding (six steps, 1% then 3%). With dropout the kernels draw their own
// masks, which no ATen op reproduces (test_gpu_kernels replays them against ATen op by op): there the
// fused step with CUDA graphs is compared with the same fused step eager, which draws the same masks
// from the same generator offsets (1e-5 relative over six steps), so the graph-safe dropout of the
// kernels is what is checked.
TEST(GpuStep, FusedEntriesTrainLikeTheDefaultStep) {
  using namespace roformer::model;
  const std::vector<std::string> no_dropout = {"model.hidden_dropout=0", "model.attention_dropout=0"};
  struct Case {
    std::string name;
    roformer::config::Config cfg;
    int steps;
    double first_rtol, last_rtol;
  };
  const std::vector<Case> cases = {
      {"fp32", tiny_step_config(true, 1.0, "cuda", "fp32", no_dropout), 3, kFp32Rtol, kFp32Rtol},
      {"bf16", tiny_step_config(true, 1.0, "cuda", "bf16", no_dropout), 6, 1e-2, 3e-2}};
  for (const auto& c : cases) {
    auto plain = make_step(c.cfg);
    std::vector<double> plain_losses;
    for (int i = 0; i < c.steps; ++i) plain_losses.push_back(plain->run(true).loss);
    for (const auto& e : fused_entries()) {
      const std::string& name = e.name;
      SCOPED_TRACE(c.name + " " + name);
      const ScopedKernelPolicy scoped(e.policy());
      auto fused = make_step(c.cfg);
      std::vector<double> losses;
      for (int i = 0; i < c.steps; ++i) {
        const auto r = fused->run(true);
        ASSERT_TRUE(r.finite) << "step " << i + 1;
        losses.push_back(r.loss);
      }
      EXPECT_NEAR(losses.front(), plain_losses.front(), c.first_rtol * plain_losses.front());
      EXPECT_NEAR(losses.back(), plain_losses.back(), c.last_rtol * plain_losses.back());
      std::cout << c.name << " " << name << ": losses " << losses.front() << " .. " << losses.back()
                << " (default " << plain_losses.front() << " .. " << plain_losses.back() << ")\n";
    }
  }
  // Dropout 0.1, bf16 parameters: graphed against eager, every entry on.
  KernelPolicy every;  // the four Triton ops
  for (const auto& e : fused_entries())
    if (e.name == "all") every = e.policy();
  ASSERT_TRUE(every.fused_layer_norm && every.fused_embedding);
  const ScopedKernelPolicy all(every);
  auto dropout_losses = [&](bool graph) {
    auto t = make_step(tiny_step_config(true, 1.0, "cuda", "bf16",
                                        {"model.hidden_dropout=0.1", "model.attention_dropout=0.1",
                                         std::string("train.cuda_graph=") + (graph ? "true" : "false")}));
    EXPECT_EQ(t->step->cuda_graphs() != nullptr, graph);
    return finite_losses(*t, 6);
  };
  const auto eager = dropout_losses(false), graphed = dropout_losses(true);
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_NEAR(graphed[i], eager[i], 1e-5 * eager[i]) << "dropout 0.1, every fused entry, step " << i + 1;
  std::cout << "every fused entry, dropout 0.1: graphed " << graphed.front() << " .. " << graphed.back() << ", eager "
            << eager.front() << " .. " << eager.back() << "\n";
}

namespace {

// Micro-batches of several lengths in a fixed order, one synthetic source per length.
class LengthsInTurn final : public roformer::train::BatchSource {
 public:
  LengthsInTurn(roformer::config::Config cfg, const std::vector<int64_t>& lengths, std::vector<size_t> order)
      : order_(std::move(order)) {
    for (const int64_t T : lengths) {
      cfg.data.max_seq_len = T;
      sources_.push_back(std::make_unique<roformer::train::SyntheticBatches>(cfg, /*pin_memory=*/true));
    }
  }
  roformer::data::Batch next() override { return sources_.at(order_.at(n_++ % order_.size()))->next(); }
  int64_t vocab_size() const override { return kStepVocab; }

 private:
  std::vector<std::unique_ptr<roformer::train::SyntheticBatches>> sources_;
  std::vector<size_t> order_;
  size_t n_ = 0;
};

}  // namespace

// DeBERTa's relative positions under CUDA graphs when the length changes (length phases; issue 51):
// lengths 32 and 16 in turn, so 32 is warmed up, then 16, then 32 is captured (its relative index
// must exist outside the capture: no copy from the host inside it) and replayed after 16's capture
// (its index must still be the one it captured). fp32 without dropout: the same losses as the eager
// step, to the float noise of atomic-add backward kernels.
TEST(GpuStep, DisentangledLengthChangesUnderCudaGraphsMatchEager) {
  const std::vector<size_t> order = {0, 1, 0, 1, 0, 0, 1, 1, 0};
  auto losses = [&](bool graph) {
    auto cfg = tiny_step_config(true, 1.0, "cuda", "fp32",
                                {"model.position=disentangled", "model.position_buckets=8", "model.hidden_dropout=0",
                                 "model.attention_dropout=0", "train.grad_accum=1",
                                 std::string("train.cuda_graph=") + (graph ? "true" : "false")});
    cfg.model.vocab_size = kStepVocab;
    roformer::train::Placement placement(cfg, roformer::dist::DistEnv{});
    LengthsInTurn batches(cfg, {32, 16}, order);
    roformer::train::TrainStep step(cfg, kStepVocab, placement);
    std::vector<double> out;
    for (size_t i = 0; i < order.size(); ++i) {
      const auto r = step.run(batches, /*host_sync=*/true);
      EXPECT_TRUE(r.finite) << "step " << i + 1;
      out.push_back(r.loss);
    }
    if (graph) {
      EXPECT_NE(step.cuda_graphs(), nullptr);
      if (step.cuda_graphs()) {
        EXPECT_EQ(step.cuda_graphs()->captured(), 2) << "one graph per length";
      }
    }
    return out;
  };
  const auto eager = losses(false), graphed = losses(true);
  double worst = 0;
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_NEAR(graphed[i], eager[i], 1e-5 * eager[i]) << "step " << i + 1 << ", length " << (order[i] ? 16 : 32);
    worst = std::max(worst, std::abs(graphed[i] - eager[i]));
  }
  std::cout << "disentangled, lengths 32/16 in turn: |graph - eager| loss at most " << worst << "\n";
}

// The cuBLASLt epilogues (issue 51) in the training step, tanh GELU so the feed-forward block takes
// its fused form too: bf16 parameters without dropout, CUDA graphs (the epilogue GEMMs captured with
// ATen's workspace) against the same step eager (1e-5 relative: the same kernels), and against the
// default step (bf16 rounding: 1% then 3% over six steps).
TEST(GpuStep, GemmEpiloguesTrainUnderCudaGraphsLikeTheDefaultStep) {
  using namespace roformer::model;
  auto losses = [&](bool epilogues, bool graph) {
    KernelPolicy policy;
    policy.gemm_epilogues = epilogues;
    const ScopedKernelPolicy scoped(policy);
    auto t = make_step(tiny_step_config(true, 1.0, "cuda", "bf16",
                                        {"model.hidden_act=gelu_tanh", "model.hidden_dropout=0", "model.attention_dropout=0",
                                         std::string("train.cuda_graph=") + (graph ? "true" : "false")}));
    return finite_losses(*t, 6);
  };
  const auto plain = losses(false, true), eager = losses(true, false), graphed = losses(true, true);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(graphed[i], eager[i], 1e-5 * eager[i]) << "step " << i + 1;
  EXPECT_NEAR(graphed.front(), plain.front(), 1e-2 * plain.front());
  EXPECT_NEAR(graphed.back(), plain.back(), 3e-2 * plain.back());
  std::cout << "GEMM epilogues, tanh GELU: graphed " << graphed.front() << " .. " << graphed.back() << ", eager "
            << eager.front() << " .. " << eager.back() << ", default " << plain.front() << " .. " << plain.back() << "\n";
}

// train.fp8 dynamic (issue 51): the encoder's linear layers as FP8 GEMMs, bf16 parameters without
// dropout, at a width FP8 takes (H 64, I 256, 128 tokens per micro-batch). Under CUDA graphs against
// the same step eager (1e-5 relative: the same kernels; the scales never leave the device), and
// against the bf16 step (FP8's rounding: 3% then 6% over six steps); every layer took FP8.
TEST(GpuStep, Fp8TrainsUnderCudaGraphsLikeTheBf16Step) {
  const auto probe = roformer::kernels::fp8_linear_unsupported(torch::zeros({16, 16}, torch::kCUDA),
                                                              torch::zeros({16, 16}, torch::kCUDA));
  if (probe) GTEST_SKIP() << *probe;
  auto losses = [&](bool fp8, bool graph) {
    roformer::kernels::reset_op_paths();
    auto t = make_step(tiny_step_config(true, 1.0, "cuda", "bf16",
                                        {"model.hidden_size=64", "model.intermediate_size=256", "model.hidden_dropout=0",
                                         "model.attention_dropout=0", std::string("train.fp8=") + (fp8 ? "dynamic" : "off"),
                                         std::string("train.cuda_graph=") + (graph ? "true" : "false")}));
    const std::vector<double> out = finite_losses(*t, 6);
    if (fp8) {
      EXPECT_EQ(roformer::kernels::op_paths().at("fp8_linear"), "fp8");
    }
    return out;
  };
  const auto plain = losses(false, true), eager = losses(true, false), graphed = losses(true, true);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(graphed[i], eager[i], 1e-5 * eager[i]) << "step " << i + 1;
  EXPECT_NEAR(graphed.front(), plain.front(), 3e-2 * plain.front());
  EXPECT_NEAR(graphed.back(), plain.back(), 6e-2 * plain.back());
  std::cout << "FP8: graphed " << graphed.front() << " .. " << graphed.back() << ", eager " << eager.front() << " .. "
            << eager.back() << ", bf16 " << plain.front() << " .. " << plain.back() << "\n";
}
