// The training step (train/step.h) through the C++ API on synthetic batches, without a run, shared by
// tests/unit/test_train_step (CPU) and tests/gpu (CUDA): a tiny config, a step set up on it,
// parameter snapshots and comparisons.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "model/kernel_policy.h"
#include "train/optimizer.h"
#include "train/placement.h"
#include "train/step.h"
#include "train/synthetic.h"

namespace roformer::test {

constexpr int64_t kStepVocab = 64;

// A two-layer model on 4 x 2 sequences of 32 tokens per step, constant lr 1e-2, the config's
// default dropout (model.hidden_dropout and attention_dropout 0.1) unless the extra overrides change it.
inline config::Config tiny_step_config(bool fused, double grad_clip, const std::string& device = "cpu",
                                       const std::string& precision = "fp32",
                                       const std::vector<std::string>& extra = {}) {
  std::vector<std::string> overrides = {
      "model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.intermediate_size=64",
      "model.max_position_embeddings=64", "data.max_seq_len=32", "train.batch_size=4", "train.grad_accum=2",
      "train.precision=" + precision, "train.device=" + device, "train.seed=3", "train.steps=100",
      "schedule.warmup_steps=0", "schedule.type=constant", "optimizer.lr=1e-2",
      "optimizer.fused=" + std::string(fused ? "true" : "false"), "optimizer.grad_clip=" + std::to_string(grad_clip)};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return config::parse_config("", overrides);
}

// A step as `roformer bench` builds one: its device and process group (a world of one), synthetic
// batches of kStepVocab ids, and the step; no run, nothing written.
struct StepUnderTest {
  config::Config cfg;  // train.param_dtype resolved for the device
  std::unique_ptr<train::Placement> placement;
  std::unique_ptr<train::SyntheticBatches> batches;
  std::unique_ptr<train::TrainStep> step;

  train::StepResult run(bool host_sync) { return step->run(*batches, host_sync); }
};

// options: the step's own (sync_free_on_cpu: CPU steps take the CUDA path's sync-free update; faults).
// one_rank_backend: the world of one gets its process group's backend (gloo, nccl) and a gradient
// reducer, as a data-parallel rank does.
inline std::unique_ptr<StepUnderTest> make_step(const config::Config& cfg, train::StepOptions options = {},
                                                bool one_rank_backend = false) {
  auto t = std::make_unique<StepUnderTest>();
  t->cfg = cfg;
  t->cfg.model.vocab_size = kStepVocab;
  t->placement = std::make_unique<train::Placement>(t->cfg, dist::DistEnv{}, one_rank_backend);
  t->batches = std::make_unique<train::SyntheticBatches>(t->cfg, t->placement->device().is_cuda());
  t->step = std::make_unique<train::TrainStep>(t->cfg, kStepVocab, *t->placement, std::move(options));
  return t;
}

inline train::StepOptions sync_free_on_cpu() {
  train::StepOptions o;
  o.sync_free_on_cpu = true;
  return o;
}

// The parameters, copied to the CPU.
inline std::vector<torch::Tensor> snapshot(StepUnderTest& t) {
  std::vector<torch::Tensor> out;
  for (const auto& p : t.step->model()->parameters()) out.push_back(p.detach().to(torch::kCPU).clone());
  return out;
}

// Largest |a - b| over all parameters, after asserting allclose.
inline double expect_close(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double rtol,
                           double atol) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], rtol, atol)) << "parameter " << i;
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  }
  return worst;
}

inline double max_change(const std::vector<torch::Tensor>& before, const std::vector<torch::Tensor>& after) {
  double worst = 0;
  for (size_t i = 0; i < before.size(); ++i) worst = std::max(worst, (after[i] - before[i]).abs().max().item<double>());
  return worst;
}

// The kernel policy's fused entries (issue 38) as the tests turn them on: each alone, then all of
// them; the rows of group "fused" in model::kernel_alternatives(), so a new one is tested unasked.
struct FusedEntry {
  std::string name;
  std::function<void(model::KernelPolicy&)> set;
  model::KernelPolicy policy() const {
    model::KernelPolicy p;
    set(p);
    return p;
  }
};
inline const std::vector<FusedEntry>& fused_entries() {
  static const std::vector<FusedEntry> all = [] {
    std::vector<FusedEntry> out;
    std::vector<const model::KernelAlternative*> fused;
    for (const auto& row : model::kernel_alternatives())
      if (std::string(row.group) == "fused") fused.push_back(&row);
    for (const auto* row : fused) out.push_back({row->entry, [row](model::KernelPolicy& p) { row->set(p, ""); }});
    out.push_back({"all", [fused](model::KernelPolicy& p) {
                     for (const auto* row : fused) row->set(p, "");
                   }});
    // Issue 51's cuBLASLt epilogues: the same function as the default path (not one of the four --fused-all ops).
    const auto* epilogues = model::find_kernel_alternative("gemm_epilogues");
    out.push_back({epilogues->entry, [epilogues](model::KernelPolicy& p) { epilogues->set(p, ""); }});
    return out;
  }();
  return all;
}

}  // namespace roformer::test
