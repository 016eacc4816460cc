// NCCL on one GPU (issue 51): ProcessGroupOptions::one_rank_backend gives a world of one its NCCL
// backend, so the data-parallel path runs where one GPU is lent: the collectives on CUDA tensors, the
// gradient reducer's buckets started during backward and summed by NCCL, and the training step with
// its reducer (sync-free and eager, as a data-parallel rank runs) against the plain world of one.
// Runs only where a GPU is visible (gpu_main.cpp reports the binary skipped otherwise).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>
#include <vector>

#include "dist/env.h"
#include "dist/gradient_reducer.h"
#include "dist/process_group.h"
#include "train_step_util.h"

namespace {

using namespace roformer::dist;
using namespace roformer::test;

ProcessGroupOptions nccl_one_rank() {
  ProcessGroupOptions o;
  o.backend = "nccl";
  o.one_rank_backend = true;
  o.timeout = std::chrono::seconds(60);  // NCCL's watchdog aborts a collective that hangs longer
  return o;
}

TEST(GpuDist, NcclCollectivesOnOneRank) {
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL backend (CMake found no nccl.h)";
  const torch::Device cuda(torch::kCUDA, 0);
  ProcessGroup group(DistEnv{}, cuda, nccl_one_rank());
  ASSERT_EQ(group.backend(), "nccl");
  ASSERT_TRUE(group.communicates());
  auto t = torch::arange(1, 1001, torch::TensorOptions().dtype(torch::kFloat).device(cuda));
  const auto want = t.clone();
  auto work = group.all_reduce_sum_async(t);
  ASSERT_TRUE(work) << "the all-reduce went through NCCL";
  group.wait(work, "all_reduce");  // the current stream waits for NCCL's
  EXPECT_TRUE(torch::equal(t, want));
  auto bf = torch::full({7}, 0.5, torch::TensorOptions().dtype(torch::kBFloat16).device(cuda));
  group.all_reduce_sum(bf);
  EXPECT_TRUE(torch::equal(bf.cpu(), torch::full({7}, 0.5, torch::kBFloat16)));
  std::vector<torch::Tensor> b = {torch::full({3}, 2.0, torch::TensorOptions().device(cuda))};
  group.broadcast(b, 0);
  EXPECT_TRUE(torch::equal(b[0].cpu(), torch::full({3}, 2.0)));
  group.barrier();
  EXPECT_EQ(group.all_gather(4.5), std::vector<double>{4.5});
}

// The reducer over a small MLP's CUDA parameters, buckets small enough for several: gradients
// accumulated over two micro-batches and summed by NCCL over one rank equal the plain backward's;
// the buckets started during backward (the overlap that a data-parallel step relies on).
TEST(GpuDist, GradientReducerSumsThroughNcclDuringBackward) {
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL backend (CMake found no nccl.h)";
  const torch::Device cuda(torch::kCUDA, 0);
  ProcessGroup group(DistEnv{}, cuda, nccl_one_rank());
  torch::manual_seed(4);
  torch::nn::Sequential mlp(torch::nn::Linear(64, 256), torch::nn::GELU(), torch::nn::Linear(256, 256),
                            torch::nn::GELU(), torch::nn::Linear(256, 8));
  mlp->to(cuda);
  auto x1 = torch::randn({32, 64}, cuda), x2 = torch::randn({32, 64}, cuda);
  auto loss = [&](const torch::Tensor& x) { return mlp->forward(x).pow(2).mean(); };
  loss(x1).backward();
  loss(x2).backward();
  std::vector<torch::Tensor> want;
  for (const auto& p : mlp->parameters()) want.push_back(p.grad().clone());
  mlp->zero_grad();
  auto reducer = make_gradient_reducer(group, mlp->parameters(), {64.0 * 1024.0 / (1024.0 * 1024.0)});  // 64 KiB
  ASSERT_NE(reducer, nullptr);
  EXPECT_GT(reducer->num_buckets(), 2);
  reducer->set_sync(false);
  loss(x1).backward();
  reducer->set_sync(true);
  loss(x2).backward();
  reducer->finish();
  const auto params = mlp->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::allclose(params[i].grad(), want[i], 1e-6, 1e-7)) << "parameter " << i;
  EXPECT_GT(reducer->buckets_started_in_backward(), 0);
  std::cout << reducer->num_buckets() << " buckets, " << reducer->buckets_started_in_backward()
            << " started during backward\n";
}

// The training step as a data-parallel rank runs it, on one GPU: NCCL group, reducer, sync-free and
// eager (no CUDA graphs with a communicating group), bf16 parameters with fp32 masters. Over one rank
// the sums change nothing: the losses of the plain world of one (graphs and all) to 1e-5 relative.
TEST(GpuDist, TrainingStepThroughNcclMatchesTheWorldOfOne) {
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL backend (CMake found no nccl.h)";
  const auto cfg = tiny_step_config(true, 1.0, "cuda", "bf16", {"model.hidden_dropout=0", "model.attention_dropout=0"});
  auto run = [&](bool nccl) {
    auto t = make_step(cfg, {}, nccl);
    EXPECT_EQ(t->placement->group().communicates(), nccl);
    if (nccl) {
      EXPECT_EQ(t->placement->group().backend(), "nccl");
      EXPECT_EQ(t->step->mode(), roformer::train::StepMode::kSyncFree);
    }
    std::vector<double> losses;
    for (int i = 0; i < 6; ++i) {
      const auto r = t->run(/*host_sync=*/i % 3 == 2);
      if (r.synced) losses.push_back(r.loss);
    }
    return losses;
  };
  const auto plain = run(false), nccl = run(true);
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(nccl.size(), 2u);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(nccl[i], plain[i], 1e-5 * plain[i]) << "logged step " << 3 * (i + 1);
  std::cout << "one-rank NCCL step: losses " << nccl.front() << ", " << nccl.back() << " (plain " << plain.front()
            << ", " << plain.back() << ")\n";
}

}  // namespace
