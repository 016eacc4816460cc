// Trainer::train_step on the CPU, through the C++ API with synthetic batches: the fused AdamW kernel
// (at::_fused_adamw_ on torch::optim::AdamW's own state) against torch::optim::AdamW, and the
// sync-free step that CUDA runs between logging steps (device-side clipping, the sticky non-finite
// flag handed to the kernel as found_inf), forced onto the CPU so its logic is tested without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "train_step_util.h"

using namespace roformer::test;

namespace {

roformer::config::Config tiny(bool fused, double grad_clip) { return tiny_step_config(fused, grad_clip); }

}  // namespace

// Same init, same batches, same dropout draws (each trainer reseeds on setup): the fused kernel and
// the per-parameter loop apply the same AdamW update up to float rounding.
TEST(TrainStep, FusedAdamWMatchesTheLoopImplementation) {
  auto loop = make_trainer(tiny(false, 1.0));
  ASSERT_FALSE(loop->uses_fused_adamw());
  const auto init = snapshot(*loop);
  std::vector<double> loop_losses;
  for (int i = 0; i < 6; ++i) loop_losses.push_back(loop->train_step(true).loss);
  const auto after_loop = snapshot(*loop);

  auto fused = make_trainer(tiny(true, 1.0));
  ASSERT_TRUE(fused->uses_fused_adamw());
  expect_close(snapshot(*fused), init, 0, 0);  // the same initialization
  std::vector<double> fused_losses;
  for (int i = 0; i < 6; ++i) fused_losses.push_back(fused->train_step(true).loss);
  const auto after_fused = snapshot(*fused);

  EXPECT_GT(max_change(init, after_loop), 1e-2);  // lr 1e-2 for 6 steps: the parameters moved
  const double worst = expect_close(after_fused, after_loop, 1e-5, 1e-6);
  for (size_t i = 0; i < fused_losses.size(); ++i)
    EXPECT_NEAR(fused_losses[i], loop_losses[i], 1e-5 * loop_losses[i]) << "step " << i + 1;
  EXPECT_LT(fused_losses.back(), fused_losses.front());
  std::cout << "max |fused - loop| after 6 steps: " << worst << "\n";
}

// Clipping active (grad_clip 0.05, far below the gradient norms): sync-free steps clip on the
// device with min(1, clip / (norm + 1e-6)) and must land where host-side clipping lands.
TEST(TrainStep, SyncFreeStepsMatchSyncedSteps) {
  auto synced = make_trainer(tiny(true, 0.05));
  std::vector<double> norms;
  for (int i = 0; i < 5; ++i) {
    const auto r = synced->train_step(true);
    ASSERT_TRUE(r.synced);
    norms.push_back(r.grad_norm);
  }
  for (double n : norms) EXPECT_GT(n, 0.05);  // so every step was clipped
  const auto want = snapshot(*synced);

  auto free = make_trainer(tiny(true, 0.05));
  free->set_sync_free_on_cpu_for_tests(true);
  for (int i = 0; i < 4; ++i) {
    const auto r = free->train_step(false);
    EXPECT_FALSE(r.synced) << "step " << i + 1;
  }
  const auto last = free->train_step(true);  // a logging step reads back as usual
  EXPECT_TRUE(last.synced);
  EXPECT_TRUE(last.finite);
  EXPECT_NEAR(last.grad_norm, norms.back(), 1e-4 * norms.back());
  expect_close(snapshot(*free), want, 1e-5, 1e-6);

  // Without the test switch a CPU step always reads back.
  auto plain = make_trainer(tiny(true, 0.05));
  EXPECT_TRUE(plain->train_step(false).synced);
}

// A non-finite value in a sync-free step: nothing is read back, so the step cannot stop itself; the
// device flag makes the fused kernel skip the update (every parameter keeps its value, bit for
// bit), and the next synced step reports it as coming from an earlier step.
TEST(TrainStep, NonFiniteSyncFreeStepUpdatesNothingAndIsReportedAtTheNextSync) {
  auto t = make_trainer(tiny(true, 1.0));
  t->set_sync_free_on_cpu_for_tests(true);
  ASSERT_FALSE(t->train_step(false).synced);
  // Poison one weight every position uses (the first layer's query projection).
  size_t poisoned = 0;
  {
    const auto named = t->model()->named_parameters();
    while (poisoned < named.size() && named[poisoned].key().find("query.weight") == std::string::npos) ++poisoned;
    ASSERT_LT(poisoned, named.size());
    torch::NoGradGuard no_grad;
    named[poisoned].value().view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  }
  const auto before = snapshot(*t);
  const auto r = t->train_step(false);
  EXPECT_FALSE(r.synced);
  const auto after = snapshot(*t);
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(torch::equal(before[i].nan_to_num(0), after[i].nan_to_num(0))) << "parameter " << i << " was updated";
  EXPECT_TRUE(std::isnan(after[poisoned].view(-1)[0].item<float>()));

  const auto reported = t->train_step(true);
  EXPECT_TRUE(reported.synced);
  EXPECT_FALSE(reported.finite);
  EXPECT_TRUE(reported.nonfinite_earlier);
  const auto still = snapshot(*t);
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(torch::equal(before[i].nan_to_num(0), still[i].nan_to_num(0))) << "parameter " << i;
  // One update was applied (the first step): the count a checkpoint would save says so, not 2.
  EXPECT_EQ(t->adamw_step_count(), 1);
}
