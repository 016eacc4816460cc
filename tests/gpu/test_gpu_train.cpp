// `roformer train`, `eval`, `fill-mask` and `bench` on CUDA through the CLI, on the synthetic corpus:
// CPU vs CUDA parity in fp32, bf16 and fp16 runs that learn, fp16 loss scaling after a forced
// overflow, exact resume with dropout (CUDA generator restored), resume across devices with the
// portable AdamW, devices that do not exist, eval and fill-mask against the CPU, bench figures.
// Runs only where a GPU is visible (gpu_main.cpp reports the binary skipped otherwise).
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "run_dir_util.h"
#include "test_util.h"

using namespace roformer::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Tolerances, stated once. fp32 on CUDA vs CPU: same math, other summation orders (cuBLAS, atomics
// in the embedding backward): losses agree to ~1e-5 relative per step, drifting slowly.
constexpr double kCpuCudaLossRtol = 2e-3;
// eval on CUDA vs CPU (fp32 checkpoint evaluated in fp32 on both).
constexpr double kEvalLossRtol = 1e-4;
constexpr double kEvalAccuracyAbs = 2e-3;  // a handful of near-ties among ~1000 predictions
constexpr double kFillMaskProbAbs = 1e-4;

std::string config_text(const std::string& dir, const std::string& device, const std::string& precision,
                        double dropout, int steps) {
  return "model:\n  hidden_size: 64\n  num_layers: 2\n  num_heads: 2\n  intermediate_size: 128\n"
         "  max_position_embeddings: 64\n  hidden_dropout: " + std::to_string(dropout) +
         "\n  attention_dropout: " + std::to_string(dropout) +
         "\ntokenizer:\n  vocab_size: 120\n"
         "data:\n  train_files: [" + dir + "/train.txt]\n  valid_files: [" + dir + "/valid.txt]\n"
         "  max_seq_len: 32\n  num_workers: 2\n"
         "optimizer:\n  lr: 3.0e-3\nschedule:\n  warmup_steps: 3\n"
         "train:\n  steps: " + std::to_string(steps) + "\n  batch_size: 8\n  precision: " + precision +
         "\n  device: " + device + "\n  seed: 5\n  num_threads: 1\n"
         "checkpoint:\n  every: 6\n  keep_last: 10\nlogging:\n  every: 1\n  progress: plain\n"
         "eval:\n  every: 6\n  max_sequences: 64\n  batch_size: 16\n";
}

class GpuTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(tmp_.str("train.txt"), synthetic_corpus(120, 4, 1));
    write_file(tmp_.str("valid.txt"), synthetic_corpus(12, 3, 2));
  }
  CommandResult train(const std::string& run, const std::string& device, const std::string& precision,
                      double dropout, int steps, const std::string& extra = "") {
    const std::string config = tmp_.str(run + ".yaml");
    write_file(config, config_text(tmp_.str(), device, precision, dropout, steps));
    return run_roformer("train -c " + config + " --run-dir " + tmp_.str(run) + " " + extra);
  }
  std::map<int64_t, json> metrics(const std::string& run, const std::string& type = "train") {
    return read_metrics(tmp_.str(run), type);
  }
  // Each logged step's loss of run `b` within rtol of run `a`'s; returns the largest relative difference.
  double expect_losses_close(const std::string& a, const std::string& b, double rtol) {
    auto ma = metrics(a), mb = metrics(b);
    double worst = 0;
    for (const auto& [step, rec] : ma) {
      const double la = rec["loss"].get<double>(), lb = mb[step]["loss"].get<double>();
      EXPECT_NEAR(lb, la, rtol * la) << "step " << step;
      worst = std::max(worst, std::abs(lb - la) / la);
    }
    return worst;
  }
  TempDir tmp_;
};

TEST_F(GpuTrain, CpuAndCudaAgreeInFp32) {
  auto cpu = train("cpu", "cpu", "fp32", 0.0, 24);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  auto gpu = train("gpu", "cuda", "fp32", 0.0, 24);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_NE(gpu.output.find("device cuda:0"), std::string::npos) << "cuda resolves with its index\n" << gpu.output;
  ASSERT_EQ(metrics("cpu").size(), 24u);
  ASSERT_EQ(metrics("gpu").size(), 24u);
  std::cout << "largest relative loss difference CPU vs CUDA over 24 steps: "
            << expect_losses_close("cpu", "gpu", kCpuCudaLossRtol) << "\n";
}

TEST_F(GpuTrain, MixedPrecisionRunsLearnAndFp16RecoversFromAnOverflow) {
  for (const std::string precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    const std::string fault = precision == "fp16" ? "ROFORMER_FAULT_NONFINITE_GRAD_AT_STEP=5 " : "";
    const std::string config = tmp_.str(precision + ".yaml");
    write_file(config, config_text(tmp_.str(), "cuda", precision, 0.1, 60));
    auto r = run_command(fault + roformer_bin() + " train -c " + config + " --run-dir " + tmp_.str(precision));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto m = metrics(precision);
    ASSERT_EQ(m.size(), 60u);
    // train.param_dtype auto, as config.yaml records it: bf16 parameters for bf16 on CUDA, autocast for fp16.
    EXPECT_NE(read_file(tmp_.str(precision) + "/config.yaml")
                  .find(std::string("param_dtype: ") + (precision == "bf16" ? "bf16" : "fp32")),
              std::string::npos);
    EXPECT_LT(m[60]["loss_avg"].get<double>(), 0.8 * m[1]["loss"].get<double>()) << r.output;
    if (precision == "fp16") {
      EXPECT_NE(r.output.find("step 5: non-finite fp16 gradient, step skipped, loss scale now"), std::string::npos)
          << r.output;
      EXPECT_TRUE(std::isfinite(m[60]["loss"].get<double>()));
      // The scale in the metrics record (and TensorBoard's train/loss_scale): halved by the skip.
      EXPECT_EQ(m[4]["loss_scale"].get<double>(), 65536.0);
      EXPECT_EQ(m[5]["loss_scale"].get<double>(), 32768.0);
    } else {
      EXPECT_FALSE(m[60].contains("loss_scale"));
    }
    if (m[60].contains("mfu")) {  // on a GPU whose peak is known (core/device.h)
      EXPECT_GT(m[60]["mfu"].get<double>(), 0.0);
      EXPECT_LT(m[60]["mfu"].get<double>(), 1.0);
    }
  }
}

// Between logging steps a CUDA step does not read back: a non-finite gradient at step 7 stops the
// updates at once (device flag) and is reported at the next logging step, naming the steps between.
TEST_F(GpuTrain, ANonFiniteGradientBetweenLoggingStepsIsReportedWithItsStepRange) {
  const std::string config = tmp_.str("nan.yaml");
  write_file(config, config_text(tmp_.str(), "cuda", "bf16", 0.0, 20));
  auto r = run_command("ROFORMER_FAULT_NONFINITE_GRAD_AT_STEP=7 " + roformer_bin() + " train -c " + config +
                       " --run-dir " + tmp_.str("nan") + " --set logging.every=5 --set checkpoint.every=0 "
                       "--set eval.every=0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("non-finite loss or gradient norm between steps 6 and 10 (found at step 10"),
            std::string::npos) << r.output;
}

// Dropout on: the resumed step draws the same CUDA dropout masks as the uninterrupted run, so its
// loss (a forward from identical weights) is identical; later steps carry the float noise of CUDA's
// atomic-add backward kernels.
TEST_F(GpuTrain, ResumeOnCudaRestoresTheDropoutStream) {
  auto a = train("a", "cuda", "fp32", 0.1, 12);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  fs::copy(tmp_.str("a"), tmp_.str("b"), fs::copy_options::recursive);
  roformer::core::remove_tree(checkpoint_dir(tmp_.str("b"), 12));
  auto b = run_roformer("train --run-dir " + tmp_.str("b") + " --resume auto");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto ma = metrics("a"), mb = metrics("b");
  EXPECT_EQ(ma[7]["loss"].dump(), mb[7]["loss"].dump()) << "first resumed step";
  for (int64_t s = 8; s <= 12; ++s)
    EXPECT_NEAR(mb[s]["loss"].get<double>(), ma[s]["loss"].get<double>(), 1e-4 * ma[s]["loss"].get<double>())
        << "step " << s;
}

// `roformer train` with CUDA graphs (the default) and without, on the loader's padded batches (several
// batch shapes, each captured once): the same losses, within the float noise of CUDA's atomic-add
// backward kernels (as the resume test above), and both runs say which they used.
TEST_F(GpuTrain, CudaGraphAndEagerRunsAgree) {
  for (const std::string graph : {"true", "false"}) {
    auto r = train("graph_" + graph, "cuda", "bf16", 0.1, 24,
                   "--set train.param_dtype=bf16 --set logging.every=4 --set train.cuda_graph=" + graph);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(graph == "true" ? "CUDA graphs: on" : "step 4"), std::string::npos) << r.output;
    if (graph == "false") {
      EXPECT_EQ(r.output.find("CUDA graphs: on"), std::string::npos) << r.output;
    }
  }
  ASSERT_EQ(metrics("graph_true").size(), 6u);
  ASSERT_EQ(metrics("graph_false").size(), 6u);
  std::cout << "largest relative loss difference, CUDA graphs vs eager, over 24 steps: "
            << expect_losses_close("graph_false", "graph_true", 1e-4) << "\n";
}

// train.phases on CUDA (issue 39): the second phase's shape is captured as a graph when it comes,
// and the phased run with graphs trains what the eager one trains; a resume across the boundary
// continues it (dropout off: the atomic-add backward kernels are the only noise).
TEST_F(GpuTrain, LengthPhasesCaptureTheNewShapeAndAgreeWithEager) {
  const std::string phases = "--set 'train.phases=[{from_step: 12, max_seq_len: 64, batch_size: 4}]' "
                             "--set train.param_dtype=bf16 --set logging.every=4 --set checkpoint.every=12 ";
  for (const std::string graph : {"true", "false"}) {
    auto r = train("phases_" + graph, "cuda", "bf16", 0.0, 24, phases + "--set train.cuda_graph=" + graph);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("length phase 2 of 2 from step 13 to 24"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("summary: phase 2 (steps 13-24, 4 x 64 tokens per step)"), std::string::npos) << r.output;
  }
  auto graphed = metrics("phases_true");
  EXPECT_EQ(graphed[24]["seq_len"], 64);
  EXPECT_EQ(graphed[24]["phase"], 2);
  std::cout << "largest relative loss difference, phases with CUDA graphs vs eager: "
            << expect_losses_close("phases_false", "phases_true", 1e-4) << "\n";
  fs::copy(tmp_.str("phases_true"), tmp_.str("resumed"), fs::copy_options::recursive);
  roformer::core::remove_tree(checkpoint_dir(tmp_.str("resumed"), 24));
  auto resumed = run_roformer("train --run-dir " + tmp_.str("resumed") + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_losses_close("phases_true", "resumed", 1e-4);
}

// train.device may change on resume; the portable AdamW needs its moments on the new device.
TEST_F(GpuTrain, ResumeAcrossDevicesWithThePortableAdamW) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{{"cpu", "cuda"}, {"cuda", "cpu"}}) {
    SCOPED_TRACE(from + " -> " + to);
    const std::string run = from + "_to_" + to;
    auto first = train(run, from, "fp32", 0.0, 6, "--set optimizer.fused=false");
    ASSERT_EQ(first.exit_code, 0) << first.output;
    auto resumed = run_roformer("train --run-dir " + tmp_.str(run) + " --resume auto --set train.steps=12 --set train.device=" + to);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    auto m = metrics(run);
    ASSERT_EQ(m.size(), 12u);
    EXPECT_LT(m[12]["loss"].get<double>(), m[1]["loss"].get<double>());
  }
}

TEST_F(GpuTrain, AbsentCudaDeviceIsRefusedNamingTheKey) {
  const std::string absent = "cuda:" + std::to_string(torch::cuda::device_count());
  auto r = train("absent", absent, "fp32", 0.0, 6);  // a valid config (warmup 3 <= steps): only the device is wrong
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("train.device is '" + absent + "' but this machine has"), std::string::npos) << r.output;
  auto e = run_roformer("eval --device " + absent + " --checkpoint " + tmp_.str("absent"));
  EXPECT_EQ(e.exit_code, 1) << e.output;
}

TEST_F(GpuTrain, EvalAndFillMaskOnCudaAgreeWithTheCpu) {
  auto t = train("t", "cpu", "fp32", 0.0, 60);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string eval = "eval --json --checkpoint " + tmp_.str("t") + " --data " + tmp_.str("valid.txt");
  auto cpu = run_roformer(eval + " --device cpu");
  auto gpu = run_roformer(eval + " --device cuda");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  const json a = last_json(cpu.output), b = last_json(gpu.output);
  EXPECT_EQ(a["n_predicted"], b["n_predicted"]);
  EXPECT_NEAR(b["loss"].get<double>(), a["loss"].get<double>(), kEvalLossRtol * a["loss"].get<double>());
  EXPECT_NEAR(b["accuracy"].get<double>(), a["accuracy"].get<double>(), kEvalAccuracyAbs);

  const std::string fill = "fill-mask --json --top-k 3 --checkpoint " + tmp_.str("t") + " \"the red [MASK] sees a dog.\"";
  auto fc = run_roformer(fill + " --device cpu"), fg = run_roformer(fill + " --device cuda");
  ASSERT_EQ(fc.exit_code, 0) << fc.output;
  ASSERT_EQ(fg.exit_code, 0) << fg.output;
  const auto pc = last_json(fc.output)["masks"][0]["predictions"], pg = last_json(fg.output)["masks"][0]["predictions"];
  ASSERT_EQ(pc.size(), pg.size());
  EXPECT_EQ(pc[0]["id"], pg[0]["id"]);
  for (size_t i = 0; i < pc.size(); ++i)
    EXPECT_NEAR(pg[i]["probability"].get<double>(), pc[i]["probability"].get<double>(), kFillMaskProbAbs) << i;
}

TEST_F(GpuTrain, BenchReportsTheDeviceItUsedPeakMemoryAndTheAttentionKernel) {
  const std::string config = tmp_.str("bench.yaml");
  write_file(config, config_text(tmp_.str(), "cuda", "bf16", 0.1, 10));
  auto r = run_roformer("bench -c " + config + " --set model.vocab_size=512 --synthetic --steps 5 --warmup 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json rec = last_json(r.output);
  EXPECT_EQ(rec["device"], "cuda:0");
  EXPECT_NE(rec["device_name"].get<std::string>().find("NVIDIA"), std::string::npos) << rec.dump();
  EXPECT_GT(rec["peak_memory_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(rec["peak_memory_kind"], "CUDA allocator peak allocated");
  const std::string backend = rec["attention_backend"];
  EXPECT_TRUE(backend == "flash" || backend == "cudnn") << backend;
  EXPECT_GT(rec["tokens_per_s"].get<double>(), 0.0);
}

}  // namespace
