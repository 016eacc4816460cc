// `roformer bench -c CONFIG` through the CLI: the JSON record of a few synthetic steps is complete
// and consistent (tokens, FLOPs from mlm_train_flops_per_step, breakdown within the step time,
// MFU from --peak-tflops), the kernel policy's variants change what they should, prepared data
// works, the measurement front's other modes (`bench data`, `bench kernels`) answer, and bad options
// fail with a message saying what to change. Figures are never compared with a time limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "model/flops.h"
#include "model/kernel_policy.h"
#include "model/options.h"
#include "run_dir_util.h"
#include "test_util.h"

using namespace roformer::test;
using nlohmann::json;

namespace {

constexpr int64_t kB = 4, kT = 32, kV = 200;

std::string bench_config(const std::string& dir) {
  return "model:\n  vocab_size: 200\n  hidden_size: 32\n  num_layers: 2\n  num_heads: 2\n  intermediate_size: 64\n"
         "  max_position_embeddings: 64\n"
         "tokenizer:\n  vocab_size: 120\n"
         "data:\n  train_files: [" + dir + "/train.txt]\n  max_seq_len: 32\n  num_workers: 1\n"
         "train:\n  batch_size: 4\n  precision: fp32\n  device: cpu\n  num_threads: 1\n  run_dir: " + dir + "/run\n"
         "logging:\n  level: warn\n";
}

class BenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(tmp_.str("train.txt"), synthetic_corpus(40, 4, 3));
    write_file(tmp_.str("bench.yaml"), bench_config(tmp_.str()));
  }
  std::string cfg() const { return "-c " + tmp_.str("bench.yaml"); }
  double expected_flops(int64_t n_pred) const {
    const auto c = roformer::config::load_config(tmp_.str("bench.yaml"));
    return roformer::model::mlm_train_flops_per_step(roformer::model::RoFormerOptions(c.model, kV), kB, kT, n_pred);
  }
  TempDir tmp_;
};

TEST_F(BenchTest, SyntheticJsonRecordIsCompleteAndConsistent) {
  const int64_t steps = 4;
  auto r = run_roformer("bench " + cfg() + " --synthetic --steps 4 --warmup 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = last_json(r.output);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("device"), "cpu");
  EXPECT_EQ(j.at("data"), "synthetic");
  EXPECT_EQ(j.at("head"), "sparse");
  EXPECT_EQ(j.at("rotary"), "elementwise");
  EXPECT_EQ(j.at("fused_adamw"), true);  // optimizer.fused defaults to true, on CPU too
  EXPECT_EQ(j.at("num_threads"), 1);
  EXPECT_EQ(j.at("steps"), steps);
  // Synthetic batches: no padding, round(0.15 * (T - 2)) = 5 predicted positions per sequence.
  EXPECT_EQ(j.at("tokens").get<int64_t>(), steps * kB * kT);
  EXPECT_DOUBLE_EQ(j.at("n_pred_per_step").get<double>(), static_cast<double>(kB * 5));
  EXPECT_DOUBLE_EQ(j.at("flops_per_step").get<double>(), expected_flops(kB * 5));
  const double seconds = j.at("seconds").get<double>();
  ASSERT_GT(seconds, 0);
  EXPECT_GT(j.at("tokens_per_s").get<double>(), 0);
  EXPECT_NEAR(j.at("tokens_per_s").get<double>(), static_cast<double>(steps * kB * kT) / seconds, 1e-6 * seconds);
  const double mean_ms = j.at("ms_per_step_mean").get<double>();
  EXPECT_NEAR(mean_ms, 1000.0 * seconds / steps, 1e-6);
  EXPECT_GT(j.at("ms_per_step_min").get<double>(), 0);
  EXPECT_LE(j.at("ms_per_step_min").get<double>(), mean_ms + 1e-9);
  EXPECT_NEAR(j.at("achieved_tflops").get<double>(), expected_flops(kB * 5) / (mean_ms * 1e-3) / 1e12, 1e-9);
  // The phases are timed inside each step: together at most the whole step (+ rounding).
  const json& b = j.at("breakdown_ms");
  ASSERT_TRUE(b.is_object()) << j.dump();
  double sum = 0;
  for (const char* phase : {"data", "forward", "backward", "optimizer"}) {
    ASSERT_TRUE(b.contains(phase)) << phase;
    EXPECT_GE(b.at(phase).get<double>(), 0) << phase;
    sum += b.at(phase).get<double>();
  }
  EXPECT_GT(b.at("forward").get<double>(), 0);
  EXPECT_GT(b.at("backward").get<double>(), 0);
  EXPECT_GT(b.at("optimizer").get<double>(), 0);
  EXPECT_LE(sum, mean_ms * 1.001 + 1e-3);
  EXPECT_GT(sum, 0.5 * mean_ms);  // the phases cover most of the step
  EXPECT_TRUE(j.at("mfu").is_null());  // CPU and no --peak-tflops: no MFU
  EXPECT_GT(j.at("peak_memory_bytes").get<int64_t>(), 10 << 20);  // RSS holds at least LibTorch
  EXPECT_EQ(j.at("peak_memory_kind"), "process peak RSS");
  const double loss = j.at("final_loss").get<double>();
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, std::log(static_cast<double>(kV)), 1.5);  // near-uniform predictions at the start
}

TEST_F(BenchTest, PeakTflopsGivesMfuAndTableIsPrinted) {
  auto r = run_roformer("bench " + cfg() + " --synthetic --steps 2 --warmup 0 --json --peak-tflops 0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = last_json(r.output);
  EXPECT_DOUBLE_EQ(j.at("peak_tflops").get<double>(), 0.5);
  EXPECT_NEAR(j.at("mfu").get<double>(), j.at("achieved_tflops").get<double>() / 0.5, 1e-12);

  auto t = run_roformer("bench " + cfg() + " --synthetic --steps 2 --warmup 0 --peak-tflops 0.5");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  for (const char* row : {"| tokens/s |", "| ms/step (mean) |", "| data wait ms/step |", "| forward + loss ms/step |",
                          "| backward ms/step |", "| optimizer ms/step |", "| model FLOPs/step |",
                          "| achieved TFLOP/s |", "| MFU (peak 0.5 TFLOP/s", "| peak memory (process peak RSS) |"})
    EXPECT_NE(t.output.find(row), std::string::npos) << row << "\n" << t.output;
}

// The kernel policy's alternatives, set by the flags: the fused rotation on the CPU, the dense head.
TEST_F(BenchTest, DenseHeadAndFusedRotaryVariants) {
  auto r = run_roformer("bench " + cfg() + " --synthetic --steps 2 --warmup 0 --json --dense-head --rotary fused");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = last_json(r.output);
  EXPECT_EQ(j.at("head"), "dense");
  EXPECT_EQ(j.at("rotary"), "fused");
  EXPECT_EQ(j.at("qkv"), "separate");  // the CPU's only path
  EXPECT_EQ(j.at("bias"), "separate add");
  // The dense head's decoder runs at every position: FLOPs count B*T head rows.
  EXPECT_DOUBLE_EQ(j.at("flops_per_step").get<double>(), expected_flops(kB * kT));
  EXPECT_TRUE(std::isfinite(j.at("final_loss").get<double>()));
}

// The fused ops' entries (issue 38): off in the default record, each flag sets its own, --fused-all
// the four; the step trains with them (their ATen paths on the CPU) to the default's loss.
TEST_F(BenchTest, FusedOpFlagsAreRecorded) {
  std::vector<std::string> keys;  // the fused rows of the kernel policy's table
  for (const auto& row : roformer::model::kernel_alternatives())
    if (std::string(row.group) == "fused") keys.push_back(row.record_key);
  ASSERT_GE(keys.size(), 4u);
  // Without dropout the CPU's ATen paths compute the default's losses (the masks are drawn otherwise).
  const std::string run = "bench " + cfg() + " --synthetic --steps 2 --warmup 0 --json --set model.hidden_dropout=0";
  auto r = run_roformer(run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json plain = last_json(r.output);
  for (const auto& key : keys) EXPECT_EQ(plain.at(key), false) << key;
  for (const auto& key : keys) {
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    r = run_roformer(run + " " + flag);
    ASSERT_EQ(r.exit_code, 0) << flag << "\n" << r.output;
    const json j = last_json(r.output);
    for (const auto& other : keys) EXPECT_EQ(j.at(other), other == key) << flag << " " << other;
  }
  r = run_roformer(run + " --fused-all --set logging.level=info");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json all = last_json(r.output);
  for (const auto& key : keys) EXPECT_EQ(all.at(key), true) << key;
  EXPECT_NEAR(all.at("final_loss").get<double>(), plain.at("final_loss").get<double>(),
              1e-4 * plain.at("final_loss").get<double>());
  // Which path each op ran (issue 51): the record names it, the log says it once per op and path.
  EXPECT_EQ(plain.at("kernel_paths"), json::object()) << "no fused op ran";
  const json expected_paths = {{"cross_entropy_sum", "aten (the CPU)"},
                               {"embedding_layer_norm", "aten (the CPU)"},
                               {"residual_dropout_layer_norm", "aten (the CPU)"},
                               {"rotary_qk", "aten (the CPU)"}};
  EXPECT_EQ(all.at("kernel_paths"), expected_paths) << all.dump();
  const std::string line = "fused op residual_dropout_layer_norm: aten (the CPU)";
  const auto first = r.output.find(line);
  EXPECT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(line, first + 1), std::string::npos) << "said once, not per call:\n" << r.output;
  // Issue 51's cuBLASLt epilogues: recorded, and on the CPU the ATen path with the default's loss.
  r = run_roformer(run + " --gemm-epilogues");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json epilogues = last_json(r.output);
  EXPECT_EQ(epilogues.at("gemm_epilogues"), true);
  EXPECT_EQ(plain.at("gemm_epilogues"), false);
  EXPECT_EQ(epilogues.at("kernel_paths").at("linear_epilogue"), "aten (the CPU)") << epilogues.dump();
  EXPECT_EQ(epilogues.at("final_loss"), plain.at("final_loss"));
}

// train.fp8 dynamic (issue 51): recorded, on the CPU every encoder GEMM through _scaled_mm ("fp8" the
// only path), a finite loss within FP8's rounding of the bf16 step's; off by default; with precision
// fp32 one line saying what to set, exit 1.
TEST_F(BenchTest, Fp8LinearLayersAreRecordedAndTrainLikeBf16) {
  const std::string run = "bench " + cfg() + " --synthetic --steps 2 --warmup 0 --json --set model.hidden_dropout=0 "
                          "--set train.precision=bf16";
  auto r = run_roformer(run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json bf16 = last_json(r.output);
  EXPECT_EQ(bf16.at("fp8"), "off");
  EXPECT_FALSE(bf16.at("kernel_paths").contains("fp8_linear")) << bf16.dump();
  r = run_roformer(run + " --set train.fp8=dynamic");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json fp8 = last_json(r.output);
  EXPECT_EQ(fp8.at("fp8"), "dynamic");
  EXPECT_EQ(fp8.at("kernel_paths").at("fp8_linear"), "fp8") << fp8.dump();
  const double a = fp8.at("final_loss").get<double>(), b = bf16.at("final_loss").get<double>();
  EXPECT_TRUE(std::isfinite(a));
  EXPECT_NE(a, b) << "the FP8 GEMMs changed nothing";
  EXPECT_NEAR(a, b, 2e-2 * b);
  r = run_roformer("bench " + cfg() + " --synthetic --steps 1 --warmup 0 --set train.fp8=dynamic");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("train.fp8 dynamic"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("set train.precision: bf16, or train.fp8: off"), std::string::npos) << r.output;
}

// The kernel policy's table (model/kernel_policy.cpp) is the one declaration of an alternative: every
// row's flag is in `bench --help` with its help, sets its record key, and is measured by a row of
// `bench --list-variants` (what scripts/gpu_check.sh runs); a choice outside an option's is refused.
TEST_F(BenchTest, KernelAlternativesComeFromTheTable) {
  const auto help = run_roformer("bench --help");
  ASSERT_EQ(help.exit_code, 0) << help.output;
  const auto all = run_roformer("bench --list-variants all");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  const auto kernels = run_roformer("bench --list-variants kernels");
  ASSERT_EQ(kernels.exit_code, 0) << kernels.output;
  for (const auto& row : roformer::model::kernel_alternatives()) {
    EXPECT_NE(help.output.find(row.flag), std::string::npos) << row.flag << "\n" << help.output;
    EXPECT_NE(help.output.find(std::string(row.help).substr(0, 30)), std::string::npos) << row.flag;
    if (*row.variant) {
      EXPECT_NE(all.output.find(std::string(row.variant) + "|"), std::string::npos) << row.variant;
    }
    if (*row.group) {
      EXPECT_NE(kernels.output.find("|" + std::string(row.flag) + "\n"), std::string::npos) << row.flag;
    }
    if (!*row.record_key) continue;
    const std::string args = row.choices.empty() ? std::string(row.flag) : std::string(row.flag) + " " + row.choices.back();
    auto r = run_roformer("bench " + cfg() + " --synthetic --steps 1 --warmup 0 --json " + args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_TRUE(last_json(r.output).contains(row.record_key)) << row.record_key;
  }
  // Every line is name|arguments (kernels: seq|name|arguments), the reference first.
  EXPECT_EQ(all.output.rfind("reference (", 0), 0u) << all.output;
  EXPECT_NE(all.output.find("fused QKV only|--rotary elementwise --separate-bias-add\n"), std::string::npos)
      << all.output;
  EXPECT_NE(all.output.find("all + every fused op|--fused-all\n"), std::string::npos) << all.output;
  EXPECT_EQ(kernels.output.rfind("512|default|\n512|all fused|--fused-all\n128|default|\n", 0), 0u) << kernels.output;
  const auto bad = run_roformer("bench --list-variants most");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("--list-variants takes all or kernels, got 'most'"), std::string::npos) << bad.output;
  const auto bare = run_roformer("bench --list-variants");  // a value always (kernels is also a sub-mode's name)
  EXPECT_EQ(bare.exit_code, 1) << bare.output;
  EXPECT_NE(bare.output.find("--list-variants"), std::string::npos) << bare.output;
}

// --profile writes a Chrome trace of extra steps (outside the measured ones) that the summary
// script reads; on the CPU it lists the host operators, the matrix products among them.
TEST_F(BenchTest, ProfileWritesATraceTheSummaryReads) {
  const std::string trace = tmp_.str("prof/trace.json");
  auto r = run_roformer("bench " + cfg() + " --synthetic --steps 1 --warmup 0 --json --profile " + trace +
                        " --profile-steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(last_json(r.output).at("steps"), 1);  // the profiled steps are not in the figures
  ASSERT_TRUE(fs::exists(trace)) << r.output;
  const json t = json::parse(read_file(trace));
  int ops = 0;
  for (const auto& e : t.at("traceEvents")) ops += e.value("cat", "") == "cpu_op";
  EXPECT_GT(ops, 100);
  if (python().empty()) GTEST_SKIP() << "no Python configured for scripts/profile_summary.py";
  auto s = run_command(python() + " " + source_dir() + "/scripts/profile_summary.py " + trace + " --steps 2");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("host ops over 2 step(s)"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("aten::"), std::string::npos) << s.output;
}

TEST_F(BenchTest, PreparedDataThroughTheTrainingSetup) {
  auto r = run_roformer("bench " + cfg() + " --steps 3 --warmup 1 --json --set model.vocab_size=0 --set "
                        "logging.level=info --run-dir " + tmp_.str("benchrun"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = last_json(r.output);
  EXPECT_EQ(j.at("data"), "prepared");
  EXPECT_NE(r.output.find("bench: warm-up done in "), std::string::npos) << r.output;  // then 3 measured steps
  EXPECT_NE(r.output.find("; measuring 3 step(s), about "), std::string::npos) << r.output;
  EXPECT_EQ(j.at("tokens").get<int64_t>(), 3 * kB * kT);  // full packing: no padding
  EXPECT_GT(j.at("tokens_per_s").get<double>(), 0);
  // The tokenizer and the prepared shards land in --run-dir, as `roformer train` would make them.
  EXPECT_TRUE(fs::exists(tmp_.str("benchrun/tokenizer/tokenizer.model")));
  EXPECT_TRUE(fs::exists(tmp_.str("benchrun/data/train")));
  EXPECT_FALSE(fs::exists(tmp_.str("run")));  // the config's run dir is left alone
}

TEST_F(BenchTest, BadOptionsSayWhatToChange) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"bench " + cfg() + " --synthetic --rotary spiral", "--rotary must be auto, elementwise or fused, got 'spiral'"},
      {"bench " + cfg() + " --synthetic --rotary matrix",
       "got 'matrix' (the naive rotation matrices are no path of the model, only the tests' reference"},
      {"bench " + cfg() + " --synthetic --attention-kernel fast",
       "--attention-kernel must be auto, flash, cudnn, efficient or math, got 'fast'"},
      {"bench " + cfg() + " --synthetic --profile-steps 0", "--profile-steps must be at least 1"},
      {"bench " + cfg() + " --synthetic --steps 0", "--steps must be at least 1"},
      {"bench " + cfg() + " --synthetic --set model.vocab_size=0", "--synthetic needs model.vocab_size"},
      {"bench --synthetic", "roformer bench needs a config: -c"},
      {"bench " + cfg() + " --synthetic --bogus", "--bogus"},
      {"bench " + cfg() + " --synthetic --set model.hiden=3", "unknown config key model.hiden"},
  };
  for (const auto& c : cases) {
    auto r = run_roformer(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find('{'), std::string::npos) << "no record on failure: " << c.args;
  }
}

// One front: `roformer bench` times the step, its sub-modes the data and the kernels.
TEST_F(BenchTest, TheMeasurementFrontHasItsThreeModes) {
  auto r = run_roformer("bench --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* mode : {"`bench -c CONFIG` times training steps", "`bench data` the data pipeline",
                           "`bench kernels` the fused kernels against their ATen paths"})
    EXPECT_NE(r.output.find(mode), std::string::npos) << mode << "\n" << r.output;
  r = run_roformer("bench kernels --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--bandwidth"), std::string::npos) << r.output;
  r = run_roformer("bench data --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--threads-list"), std::string::npos) << r.output;
  // Its thread counts are checked before anything is read: whole numbers of at least 1.
  for (const auto& [list, message] : std::vector<std::pair<std::string, std::string>>{
           {"1x", "--threads-list must be comma-separated integers, got 1x"},
           {"2,,4", "--threads-list must be comma-separated integers, got 2,,4"},
           {"1,0", "--threads-list entries must be at least 1"}}) {
    r = run_roformer("bench data --input " + tmp_.str("train.txt") + " --threads-list " + list);
    EXPECT_EQ(r.exit_code, 1) << list << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << list << "\n" << r.output;
  }
}

// `bench kernels` without a GPU (or with --dry-run): each fused op's bytes and their floor at
// --bandwidth, per call and per step, in the table and one JSON record per op. The rotary's bytes
// worked out here: q and k read and written, forward and backward, at 16384 tokens x 768 in bf16.
TEST_F(BenchTest, KernelsPrintsEachFusedOpsFloorAndItsRecord) {
  write_file(tmp_.str("k.json"), "an earlier run's records");  // replaced whole, nothing left beside it
  auto r = run_roformer("bench kernels --dry-run --bandwidth 1.5e12 --json " + tmp_.str("k.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* row : {"| residual + dropout + LayerNorm |", "| rotary of q and k |", "| cross-entropy (loss, hits, dlogits) |",
                          "| embeddings + LayerNorm + dropout |", "floor us @1.5 TB/s", "step floor of these ops:"})
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
  EXPECT_EQ(r.output.find("fused us"), std::string::npos) << "a dry run times nothing\n" << r.output;
  const json records = json::parse(read_file(tmp_.str("k.json")));
  for (const auto& entry : fs::directory_iterator(tmp_.path()))
    EXPECT_EQ(entry.path().filename().string().rfind("k.json.", 0), std::string::npos) << entry.path();
  ASSERT_EQ(records.size(), 4u) << records.dump(1);
  const double rotary_bytes = 8.0 * 16384 * 768 * 2;
  bool rotary = false;
  for (const auto& rec : records) {
    EXPECT_NEAR(rec["floor_us"].get<double>(), rec["bytes"].get<double>() / 1.5e12 * 1e6, 1e-6) << rec.dump();
    EXPECT_GE(rec["per_step"].get<int64_t>(), 1) << rec.dump();
    EXPECT_FALSE(rec.contains("fused_us")) << rec.dump();
    if (rec["op"] == "rotary of q and k") {
      rotary = true;
      EXPECT_DOUBLE_EQ(rec["bytes"].get<double>(), rotary_bytes);
      EXPECT_EQ(rec["per_step"].get<int64_t>(), 12);  // one per layer of RoFormer-base
    }
  }
  EXPECT_TRUE(rotary) << records.dump(1);
}

TEST_F(BenchTest, KernelsBadOptionsSayWhatToChange) {
  fs::create_directories(tmp_.path() / "out");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bench kernels --iters 0", "--iters must be at least 1, got 0"},
      {"bench kernels --warmup -1", "--warmup must be at least 0, got -1"},
      {"bench kernels --bandwidth 0", "--bandwidth must be a positive number of bytes per second"},
      {"bench kernels --json " + tmp_.str("out"), "is a directory; give a file name, e.g. --json"},
      {"bench kernels --dry-run --json " + tmp_.str("missing/k.json"), "k.json: there is no folder " + tmp_.str("missing")},
  };
  for (const auto& [args, message] : cases) {
    auto r = run_roformer(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
