// The CUDA training step through the C++ API (synthetic batches): fused AdamW against the loop,
// no host synchronization between logging steps (PyTorch's sync-debug mode set to error), the
// attention kernel for bf16 batches.
// Runs only where a GPU is visible (gpu_main.cpp reports the binary skipped otherwise).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>

#include "core/device.h"
#include "model/roformer.h"
#include "train_step_util.h"

using namespace roformer::test;

namespace {

// Tolerances: fp32 kernels on CUDA (TF32 off) agree to float rounding, accumulated over 6 steps.
constexpr double kFp32Rtol = 1e-4, kFp32Atol = 1e-5;

TEST(GpuStep, FusedAdamWOnCudaEqualsTheLoop) {
  auto loop = make_trainer(tiny_step_config(false, 1.0, "cuda"));
  auto fused = make_trainer(tiny_step_config(true, 1.0, "cuda"));
  ASSERT_TRUE(loop->device().is_cuda());
  ASSERT_TRUE(fused->uses_fused_adamw());
  const auto init = snapshot(*loop);
  expect_close(snapshot(*fused), init, 0, 0);
  for (int i = 0; i < 6; ++i) {
    const double a = loop->train_step(true).loss, b = fused->train_step(true).loss;
    EXPECT_NEAR(b, a, kFp32Rtol * a) << "step " << i + 1;
  }
  EXPECT_GT(max_change(init, snapshot(*loop)), 1e-2);
  std::cout << "max |fused - loop| after 6 CUDA steps: "
            << expect_close(snapshot(*fused), snapshot(*loop), kFp32Rtol, kFp32Atol) << "\n";
}

// Between logging steps a step must not read anything back: sync-debug mode "error" turns any
// synchronizing call (item(), a blocking copy, stream or device synchronize) into an exception.
TEST(GpuStep, NoHostSyncInsideANonLoggingStep) {
  for (const std::string precision : {"bf16", "fp32"}) {
    SCOPED_TRACE(precision);
    auto t = make_trainer(tiny_step_config(true, 0.5, "cuda", precision,
                                           {"model.hidden_dropout=0.1", "model.attention_dropout=0.1"}));
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(t->train_step(true).finite);  // warm-up: lazy inits may sync
    roformer::core::set_cuda_sync_debug_mode(2);
    std::string error;
    try {
      for (int i = 0; i < 3; ++i) EXPECT_FALSE(t->train_step(false).synced);
    } catch (const std::exception& e) {
      error = e.what();
    }
    roformer::core::set_cuda_sync_debug_mode(0);
    EXPECT_EQ(error, "") << "a non-logging step synchronized with the host";
    const auto r = t->train_step(true);  // the logging step reads back as usual
    EXPECT_TRUE(r.synced);
    EXPECT_TRUE(r.finite);
  }
}

TEST(GpuStep, UnpaddedBf16AttentionRunsAFusedKernel) {
  // RoFormer-base's attention shape: 12 heads of 64.
  auto options = roformer::model::RoFormerOptions().vocab_size(1000).num_layers(1);
  roformer::model::RoFormerForMaskedLM model(options);
  model->to(torch::kCUDA);
  model->train();
  for (int64_t T : {128, 512}) {
    const std::string backend = model->attention_backend(8, T, torch::kBFloat16, false);
    std::cout << "bf16 T=" << T << ": " << backend << " (padded: "
              << model->attention_backend(8, T, torch::kBFloat16, true) << ")\n";
    EXPECT_TRUE(backend == "flash" || backend == "cudnn") << "T=" << T << ": " << backend;
  }
}

}  // namespace
