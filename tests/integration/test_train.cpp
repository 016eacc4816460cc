// The training run end to end through the CLI, on a synthetic corpus (always available) and the
// Brown corpus (skipped when absent): exact resume, SIGTERM, SIGKILL during a save, corrupt
// checkpoints, refused config changes, gradient accumulation, a golden loss curve, accuracy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/safetensors.h"
#include "data/corpus.h"
#include "data/loader.h"
#include "run_dir_util.h"
#include "test_util.h"
#include "checkpoint/store.h"

using namespace roformer::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A model small enough that a dozen CPU steps take a second or two; dropout on, so exact resume
// also covers the dropout generator.
std::string tiny_config(const std::string& dir) {
  return "model:\n  hidden_size: 32\n  num_layers: 2\n  num_heads: 2\n  intermediate_size: 64\n"
         "  max_position_embeddings: 64\n  hidden_dropout: 0.1\n  attention_dropout: 0.1\n"
         "tokenizer:\n  vocab_size: 120\n"
         "data:\n  train_files: [" + dir + "/train.txt]\n  valid_files: [" + dir + "/valid.txt]\n"
         "  max_seq_len: 32\n  num_workers: 2\n"
         "optimizer:\n  lr: 3.0e-3\nschedule:\n  warmup_steps: 3\n"
         "train:\n  steps: 12\n  batch_size: 4\n  precision: fp32\n  device: cpu\n  seed: 5\n  num_threads: 1\n"
         "checkpoint:\n  every: 6\n  keep_last: 5\nlogging:\n  every: 1\n  progress: plain\n"
         "eval:\n  every: 6\n  max_sequences: 16\n  batch_size: 8\n";
}

// The log line of a run reading prepared folders (data/prepared_cache.cpp).
std::string fmt_parts(int64_t documents, int64_t tokens) {
  return "train data: 2 prepared directories (" + std::to_string(documents) + " documents, " + std::to_string(tokens) +
         " tokens)";
}

// "PREFIX<a> MIDDLE<b>" with both figures as the log prints them (4 decimals).
std::string fmt_figures(const std::string& prefix, const json& a, const std::string& middle, const json& b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", a.get<double>());
  std::string out = prefix + buf + middle;
  std::snprintf(buf, sizeof buf, "%.4f", b.get<double>());
  return out + buf;
}

class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(tmp_.str("train.txt"), synthetic_corpus(60, 4, 1));
    write_file(tmp_.str("valid.txt"), synthetic_corpus(6, 3, 2));
    config_ = tmp_.str("tiny.yaml");
    write_file(config_, tiny_config(tmp_.str()));
  }
  CommandResult train(const std::string& run, const std::string& extra = "") {
    return run_roformer("train -c " + config_ + " --run-dir " + tmp_.str(run) + " " + extra);
  }
  std::map<int64_t, json> metrics(const std::string& run, const std::string& type = "train") {
    return read_metrics(tmp_.str(run), type);
  }
  std::string ckpt(const std::string& run, int64_t step) { return checkpoint_dir(tmp_.str(run), step); }
  TempDir tmp_;
  std::string config_;
};

}  // namespace

TEST_F(TrainTest, RunWritesCheckpointsMetricsLogAndConfig) {
  auto r = train("a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("eval step 12 | MLM accuracy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("attention, rotary positions)"), std::string::npos) << r.output;  // the `model:` line
  // The log says how a new run reuses this tokenizer and prepared data; one that does trains neither again.
  const std::string reuse = "a new run can reuse this tokenizer and prepared data instead of training and preparing "
                            "them again: --set tokenizer.model=" + tmp_.str("a/tokenizer/tokenizer.model") +
                            " --set data.train_files=[" + tmp_.str("a/data/train") + "] --set data.valid_files=[" +
                            tmp_.str("a/data/valid") + "]";
  ASSERT_NE(r.output.find(reuse), std::string::npos) << r.output;
  auto reused = train("reused", "--set train.steps=5 " + reuse.substr(reuse.find("--set")));
  ASSERT_EQ(reused.exit_code, 0) << reused.output;
  EXPECT_EQ(reused.output.find("training a unigram tokenizer"), std::string::npos) << reused.output;
  EXPECT_EQ(reused.output.find("preparing train data"), std::string::npos) << reused.output;
  EXPECT_EQ(reused.output.find("a new run can reuse"), std::string::npos) << reused.output;
  auto m = metrics("a");
  ASSERT_EQ(m.size(), 12u);
  for (const auto& [step, rec] : m) {
    EXPECT_TRUE(std::isfinite(rec["loss"].get<double>()));
    EXPECT_GT(rec["tokens_per_s"].get<double>(), 0.0);
  }
  EXPECT_EQ(metrics("a", "eval").size(), 2u);  // steps 6 and 12
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(ckpt("a", 6)).ok);
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(ckpt("a", 12)).ok);
  EXPECT_EQ(read_file(tmp_.str("a/checkpoints/latest")), "step_00000012\n");
  EXPECT_TRUE(fs::exists(tmp_.str("a/train.log")));
  EXPECT_NE(read_file(tmp_.str("a/config.yaml")).find("hidden_size: 32"), std::string::npos);
  for (const char* f : {"model.safetensors", "optimizer.pt", "rng.pt", "trainer_state.json", "config.yaml",
                        "tokenizer.model", "metrics.jsonl", "manifest.json"})
    EXPECT_TRUE(fs::exists(ckpt("a", 12) + "/" + f)) << f;
  auto state = json::parse(read_file(ckpt("a", 12) + "/trainer_state.json"));
  EXPECT_EQ(state["step"], 12);
  EXPECT_EQ(state["tokens_seen"], 12 * 4 * 32);
}

// Issue 41: the figures say what they are. The live bar shows one batch ("batch loss") with the
// time elapsed and left; the log line a logging window's means ("mean of N steps"), as metrics.jsonl's
// loss_avg and accuracy_avg; a run that trains to its end closes with a summary (console and
// train.log): wall time, mean tokens/s, the last window's means, the last validation figures, peak
// memory; a resumed run's summary counts its own session.
TEST_F(TrainTest, FiguresSayWhatTheyAreAndTheRunEndsWithASummary) {
  auto r = train("s", "--set train.steps=6 --set logging.every=3 --set logging.progress=bar");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3/6 batch loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" elapsed ETA "), std::string::npos) << r.output;
  const auto m = metrics("s");
  ASSERT_EQ(m.size(), 2u);
  const json& last = m.at(6);
  EXPECT_NE(r.output.find(fmt_figures("step 6/6 | mean of 3 steps: loss ", last["loss_avg"], " acc ", last["accuracy_avg"])),
            std::string::npos) << r.output << last;
  EXPECT_NE(r.output.find(" elapsed | ETA "), std::string::npos) << r.output;
  const json eval = metrics("s", "eval").at(6);
  for (const std::string& text : {read_file(tmp_.str("s/train.log")), r.output}) {
    EXPECT_NE(text.find("summary: 6 steps, 6 of them in this session, in "), std::string::npos) << text;
    EXPECT_NE(text.find(" tok/s mean over the steps"), std::string::npos) << text;
    EXPECT_NE(text.find(fmt_figures("summary: final train loss ", last["loss_avg"], " acc ", last["accuracy_avg"]) +
                        " (mean of 3 steps to step 6) | " +
                        fmt_figures("validation loss ", eval["loss"], " acc ", eval["accuracy"]) + " (step 6)"),
              std::string::npos) << text;
    EXPECT_NE(text.find(" MiB (process peak RSS)"), std::string::npos) << text;
  }
  EXPECT_EQ(r.output.find("MFU"), std::string::npos) << "no MFU on the CPU: its peak is not known";
  // Resumed to train.steps 12: the summary counts this session's 6 steps.
  auto resumed = run_roformer("train --run-dir " + tmp_.str("s") + " --resume auto --set train.steps=12");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("summary: 12 steps, 6 of them in this session"), std::string::npos) << resumed.output;
}

TEST_F(TrainTest, ResumeContinuesBitForBit) {
  auto a = train("a");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  // Pretend run "b" stopped right after its step-6 checkpoint.
  fs::copy(tmp_.str("a"), tmp_.str("b"), fs::copy_options::recursive);
  roformer::core::remove_tree(ckpt("b", 12));
  auto b = run_roformer("train --run-dir " + tmp_.str("b") + " --resume auto");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("resumed from " + ckpt("b", 6) + " at step 6"), std::string::npos) << b.output;
  auto ma = metrics("a"), mb = metrics("b");
  ASSERT_EQ(mb.size(), 12u);
  for (int64_t s = 7; s <= 12; ++s) {
    EXPECT_EQ(ma[s]["loss"].dump(), mb[s]["loss"].dump()) << "step " << s;
    EXPECT_EQ(ma[s]["grad_norm"].dump(), mb[s]["grad_norm"].dump()) << "step " << s;
  }
  EXPECT_EQ(metrics("a", "eval")[12]["loss"].dump(), metrics("b", "eval")[12]["loss"].dump());
  // metrics.jsonl went back to the checkpoint's records (steps 7-12 of the copied file dropped) and
  // continued: the same lines as the uninterrupted run, none twice.
  auto lines = [](const std::string& path) {
    const std::string text = read_file(path);
    return std::count(text.begin(), text.end(), '\n');
  };
  EXPECT_EQ(lines(tmp_.str("b/metrics.jsonl")), lines(tmp_.str("a/metrics.jsonl")));
  // The final weights are identical, byte for byte (the optimizer archive is not compared as bytes:
  // LibTorch's archive layout is not canonical; its moments shaped these weights).
  EXPECT_EQ(roformer::core::file_checksum(ckpt("a", 12) + "/model.safetensors"),
            roformer::core::file_checksum(ckpt("b", 12) + "/model.safetensors"));
}

// Each model.position trains and resumes exactly (rotary, the default, is the test above), dropout
// included (disentangled attention also drops out its relative embeddings, the decoder runs the last
// layer twice). The checkpoint holds the option's own position parameters. The last case puts the
// decoder on every other path at once: pre-LN, a factorized embedding, gradient checkpointing and
// bf16 parameters with fp32 masters.
TEST_F(TrainTest, EachPositionOptionResumesBitForBit) {
  const std::string relative = "--set model.position=disentangled --set model.position_buckets=16";
  const std::string emd = relative + " --set model.enhanced_mask_decoder=true";
  // The `model:` log line names the scheme, with what sets it apart.
  const std::map<std::string, std::string> described = {
      {"absolute", "attention, absolute positions (64 learned rows))"},
      {"none", "attention, no positions)"},
      {"disentangled", "attention, disentangled positions (c2p+p2c, 16 buckets))"},
      {"emd", "attention, disentangled positions (c2p+p2c, 16 buckets, enhanced mask decoder))"}};
  const std::vector<std::pair<std::string, std::string>> options = {
      {"absolute", "--set model.position=absolute"},
      {"none", "--set model.position=none"},
      {"disentangled", relative},
      {"emd", emd},
      {"emd_all", emd + " --set model.norm=pre --set model.embedding_size=16 --set model.gradient_checkpointing=true "
                        "--set train.precision=bf16 --set train.param_dtype=bf16"}};
  for (const auto& [name, position] : options) {
    SCOPED_TRACE(name);
    const std::string a = name + "_a", b = name + "_b";
    auto first = train(a, position + " --set train.steps=6 --set checkpoint.every=3 "
                       "--set eval.every=3 --set schedule.warmup_steps=2");
    ASSERT_EQ(first.exit_code, 0) << first.output;
    if (described.count(name)) {
      EXPECT_NE(first.output.find(described.at(name)), std::string::npos) << first.output;
    }
    fs::copy(tmp_.str(a), tmp_.str(b), fs::copy_options::recursive);
    roformer::core::remove_tree(ckpt(b, 6));
    auto second = run_roformer("train --run-dir " + tmp_.str(b) + " --resume auto");
    ASSERT_EQ(second.exit_code, 0) << second.output;
    EXPECT_NE(second.output.find("resumed from " + ckpt(b, 3) + " at step 3"), std::string::npos) << second.output;
    auto ma = metrics(a), mb = metrics(b);
    ASSERT_EQ(mb.size(), 6u);
    for (int64_t s = 4; s <= 6; ++s) EXPECT_EQ(ma[s]["loss"].dump(), mb[s]["loss"].dump()) << "step " << s;
    EXPECT_LT(ma[6]["loss"].get<double>(), ma[1]["loss"].get<double>());  // it trains
    EXPECT_EQ(roformer::core::file_checksum(ckpt(a, 6) + "/model.safetensors"),
              roformer::core::file_checksum(ckpt(b, 6) + "/model.safetensors"));
    const auto weights = roformer::core::load_safetensors(ckpt(a, 6) + "/model.safetensors");
    EXPECT_EQ(weights.count("roformer.embeddings.position_embeddings.weight"),
              name == "absolute" || name.rfind("emd", 0) == 0 ? 1u : 0u);
    EXPECT_EQ(weights.count("roformer.encoder.rel_embeddings.weight"), name == "absolute" || name == "none" ? 0u : 1u);
    EXPECT_EQ(weights.count("roformer.encoder.embed_positions.weight"), 0u);
  }
}

// optimizer.fused (at::_fused_adamw_, the default) and the torch::optim::AdamW loop keep the same
// state in optimizer.pt: a run saved by one resumes on the other and continues to float rounding.
TEST_F(TrainTest, ResumeSwitchesBetweenFusedAndLoopAdamW) {
  auto a = train("a", "--set model.hidden_dropout=0 --set model.attention_dropout=0");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  fs::copy(tmp_.str("a"), tmp_.str("b"), fs::copy_options::recursive);
  roformer::core::remove_tree(ckpt("b", 12));
  auto b = run_roformer("train --run-dir " + tmp_.str("b") + " --resume auto --set optimizer.fused=false");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("applying config change optimizer.fused: true -> false"), std::string::npos) << b.output;
  auto ma = metrics("a"), mb = metrics("b");
  for (int64_t s = 7; s <= 12; ++s) {
    const double la = ma[s]["loss"].get<double>();
    EXPECT_NEAR(mb[s]["loss"].get<double>(), la, 1e-5 * la) << "step " << s;
  }
  const auto wa = roformer::core::load_safetensors(ckpt("a", 12) + "/model.safetensors");
  const auto wb = roformer::core::load_safetensors(ckpt("b", 12) + "/model.safetensors");
  for (const auto& [name, t] : wa) EXPECT_TRUE(torch::allclose(t, wb.at(name), 1e-4, 1e-5)) << name;
}

TEST_F(TrainTest, SigtermSavesAndExitsCleanly) {
  const std::string run = tmp_.str("t");
  const std::string script =
      roformer_bin() + " train -c " + config_ + " --run-dir " + run +
      " --set train.steps=100000 --set checkpoint.every=0 > " + tmp_.str("t.log") + " 2>&1 & pid=$!; "
      "for i in $(seq 1 1200); do grep -q '\"step\":3,' " + run + "/metrics.jsonl 2>/dev/null && break; sleep 0.05; done; "
      "kill -TERM $pid; wait $pid; echo \"rc=$?\"";
  auto r = run_command(script);
  const std::string log = read_file(tmp_.str("t.log"));
  EXPECT_NE(r.output.find("rc=0"), std::string::npos) << r.output << log;
  EXPECT_NE(log.find("stopped by signal 15"), std::string::npos) << log;
  EXPECT_NE(log.find("Resume with: roformer train --run-dir " + run + " --resume auto"), std::string::npos) << log;
  auto all = roformer::checkpoint::list_checkpoints(run + "/checkpoints");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(all[0]).ok);
  auto state = json::parse(read_file(all[0] + "/trainer_state.json"));
  EXPECT_GE(state["step"].get<int64_t>(), 3);
}

TEST_F(TrainTest, KillDuringCheckpointWriteKeepsPreviousAndResumes) {
  auto r = run_roformer("train -c " + config_ + " --run-dir " + tmp_.str("k"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Run again from scratch in another dir, dying (SIGKILL) in the middle of the step-12 save.
  auto killed = run_command("ROFORMER_FAULT_KILL_IN_SAVE_AT_STEP=12 " + roformer_bin() + " train -c " + config_ +
                            " --run-dir " + tmp_.str("c"));
  EXPECT_EQ(killed.exit_code, 128 + 9) << killed.output;
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(ckpt("c", 6)).ok);
  EXPECT_FALSE(fs::exists(ckpt("c", 12)));
  EXPECT_EQ(read_file(tmp_.str("c/checkpoints/latest")), "step_00000006\n");
  auto resumed = run_roformer("train --run-dir " + tmp_.str("c") + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + ckpt("c", 6)), std::string::npos) << resumed.output;
  // ... and ends exactly where the uninterrupted run ended.
  EXPECT_EQ(roformer::core::file_checksum(ckpt("k", 12) + "/model.safetensors"),
            roformer::core::file_checksum(ckpt("c", 12) + "/model.safetensors"));
}

// Out of device memory is a setting to change: exit 1 with one line naming the keys, not exit 2.
// The allocator's error is injected at step 8 (a real one needs a device); the step-6 checkpoint
// stays and the run resumes from it.
TEST_F(TrainTest, OutOfDeviceMemoryIsAUserErrorNamingWhatToLower) {
  auto r = run_command("ROFORMER_FAULT_OOM_AT_STEP=8 " + roformer_bin() + " train -c " + config_ + " --run-dir " +
                       tmp_.str("oom"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("out of device memory (CUDA out of memory): lower train.batch_size (raise "
                          "train.grad_accum to keep the global batch), set model.gradient_checkpointing: true"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(ckpt("oom", 6)).ok);
  auto resumed = run_roformer("train --run-dir " + tmp_.str("oom") + " --resume auto");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

TEST_F(TrainTest, CorruptCheckpointIsSkippedOrReported) {
  ASSERT_EQ(train("a").exit_code, 0);
  {
    std::fstream f(ckpt("a", 12) + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  auto explicit_resume = run_roformer("train --run-dir " + tmp_.str("a") + " --resume " + ckpt("a", 12));
  EXPECT_EQ(explicit_resume.exit_code, 1);
  EXPECT_NE(explicit_resume.output.find("model.safetensors does not match its checksum (corrupted)"), std::string::npos)
      << explicit_resume.output;
  auto r = run_roformer("train --run-dir " + tmp_.str("a") + " --resume auto --set train.steps=14");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipping checkpoint " + ckpt("a", 12)), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from " + ckpt("a", 6) + " at step 6"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("applying config change train.steps: 12 -> 14"), std::string::npos) << r.output;
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(ckpt("a", 14)).ok);
}

TEST_F(TrainTest, ResumeRefusesModelOrDataChanges) {
  ASSERT_EQ(train("a").exit_code, 0);
  auto r = run_roformer("train --run-dir " + tmp_.str("a") + " --resume auto --set model.hidden_size=64 --set "
                        "data.max_seq_len=48 --set train.steps=20");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the config changes the model or the data"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.hidden_size: 32 -> 64"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("data.max_seq_len: 32 -> 48"), std::string::npos) << r.output;
  auto none = run_roformer("train --run-dir " + tmp_.str("nothing") + " --resume auto");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.output.find("no complete checkpoint"), std::string::npos) << none.output;
}

TEST_F(TrainTest, GradientAccumulationEqualsOneLargeBatch) {
  const std::string common = "--set model.hidden_dropout=0 --set model.attention_dropout=0 --set train.steps=4 "
                             "--set checkpoint.every=0 --set eval.every=0 ";
  auto one = train("one", common + "--set train.batch_size=4 --set train.grad_accum=1");
  auto two = train("two", common + "--set train.batch_size=2 --set train.grad_accum=2");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(two.exit_code, 0) << two.output;
  auto m1 = metrics("one"), m2 = metrics("two");
  ASSERT_EQ(m1.size(), 4u);
  ASSERT_EQ(m2.size(), 4u);
  for (int64_t s = 1; s <= 4; ++s) {
    const double l1 = m1[s]["loss"].get<double>(), l2 = m2[s]["loss"].get<double>();
    EXPECT_NEAR(l1, l2, 1e-5 * std::abs(l1)) << "step " << s;
    EXPECT_NEAR(m1[s]["grad_norm"].get<double>(), m2[s]["grad_norm"].get<double>(),
                1e-4 * m1[s]["grad_norm"].get<double>()) << "step " << s;
  }
}

// The first losses of a fixed tiny CPU run, so unintended changes to the math show up.
// Regenerate (after an intended change) with ROFORMER_UPDATE_GOLDEN=1 ./build/tests/test_train.
TEST_F(TrainTest, GoldenLossCurve) {
  const std::string golden = source_dir() + "/tests/golden/train_losses_tiny.json";
  auto r = train("g", "--set train.steps=10 --set checkpoint.every=0 --set eval.every=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto m = metrics("g");
  json losses = json::array();
  for (const auto& [step, rec] : m) losses.push_back(rec["loss"]);
  if (std::getenv("ROFORMER_UPDATE_GOLDEN")) {
    write_file(golden, json({{"config", "tests/integration/test_train.cpp tiny_config, steps 10, 1 thread"},
                             {"losses", losses}}).dump(2) + "\n");
    GTEST_SKIP() << "wrote " << golden;
  }
  ASSERT_TRUE(fs::exists(golden)) << "missing " << golden;
  auto expected = json::parse(read_file(golden))["losses"];
  ASSERT_EQ(expected.size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i)
    EXPECT_NEAR(losses[i].get<double>(), expected[i].get<double>(), 1e-4 * expected[i].get<double>())
        << "step " << i + 1;
}

TEST_F(TrainTest, NonFiniteLossSavesNothingAndSaysThereIsNoCheckpointToResume) {
  // An absurd learning rate without clipping turns the weights non-finite after the first update;
  // the step-1 checkpoint holds those weights, so it is no state to resume from.
  auto r = train("nf", "--set optimizer.lr=1e30 --set optimizer.grad_clip=0 --set checkpoint.every=1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("non-finite loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("at step 2. No checkpoint from before the failure exists to resume from"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("start a new run in another --run-dir after lowering optimizer.lr"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(ckpt("nf", 2)));
}

TEST_F(TrainTest, NonFiniteLossAdvisesTheNewestCheckpointFromBeforeTheFailure) {
  auto good = train("g", "--set train.steps=2 --set schedule.warmup_steps=0 --set checkpoint.every=1 "
                         "--set eval.every=0");
  ASSERT_EQ(good.exit_code, 0) << good.output;
  // The rescue keys are accepted on resume, with a warning; here they make it diverge at step 4.
  auto r = run_roformer("train --run-dir " + tmp_.str("g") + " --resume auto --set train.steps=6 "
                        "--set optimizer.lr=1e30 --set optimizer.grad_clip=0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("optimizer.lr: 0.003 -> 1e+30; the run is no longer an exact continuation"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("at step 4. Nothing was saved (that state would fail the same way). Resume from " +
                          ckpt("g", 2) + ", the newest checkpoint from before the failure"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("roformer train --run-dir " + tmp_.str("g") + " --resume " + ckpt("g", 2)),
            std::string::npos) << r.output;
}

TEST_F(TrainTest, ResumeBeyondTrainStepsIsAnErrorNotDone) {
  auto a = train("s", "--set train.steps=2 --set schedule.warmup_steps=0 --set eval.every=0");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto r = run_roformer("train --run-dir " + tmp_.str("s") + " --resume auto --set train.steps=1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("checkpoint " + ckpt("s", 2) + " is at step 2, beyond train.steps = 1: there is nothing "
                          "to train. Raise train.steps above 2"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("done:"), std::string::npos) << r.output;
}

TEST_F(TrainTest, HugeValuesAreRefusedWithTheFigureAndTheKey) {
  auto batch = train("hb", "--set train.batch_size=2000000000");
  EXPECT_EQ(batch.exit_code, 1) << batch.output;
  EXPECT_NE(batch.output.find("the run needs at least"), std::string::npos) << batch.output;
  EXPECT_NE(batch.output.find("GiB but cpu has"), std::string::npos) << batch.output;
  EXPECT_NE(batch.output.find("Lower train.batch_size (the largest share)"), std::string::npos) << batch.output;
  auto hidden = train("hh", "--set model.hidden_size=2000000000");
  EXPECT_EQ(hidden.exit_code, 1) << hidden.output;
  EXPECT_NE(hidden.output.find("Lower model.hidden_size (the largest share)"), std::string::npos) << hidden.output;
  auto overflow = train("ho", "--set train.steps=99999999999999999999");
  EXPECT_EQ(overflow.exit_code, 1) << overflow.output;
  EXPECT_NE(overflow.output.find("train.steps = 99999999999999999999 is too large for a 64-bit integer"),
            std::string::npos) << overflow.output;
}

// Issue 40: every tensor whose size a key sets is in the memory estimate, so a position table no
// machine holds (1e12 rows) is refused before anything is built, naming the key, where it used to
// abort inside LibTorch (exit 134, "tried to allocate ... bytes"): the rotary table, the absolute
// one, disentangled attention's relative table (set by its buckets, or without buckets by
// max_relative_positions) and the enhanced mask decoder's absolute table. bench builds the same model.
TEST_F(TrainTest, HugePositionTablesAreRefusedNamingTheKey) {
  const std::string huge = "1000000000000";
  const std::string relative = "--set model.position=disentangled ";
  struct Case {
    std::string overrides, key;
  };
  const std::vector<Case> cases = {
      {"--set model.max_position_embeddings=" + huge, "model.max_position_embeddings"},
      {"--set model.position=absolute --set model.max_position_embeddings=" + huge, "model.max_position_embeddings"},
      {relative + "--set model.position_buckets=" + huge + " --set model.max_relative_positions=4" + huge,
       "model.position_buckets"},
      {relative + "--set model.position_buckets=0 --set model.max_relative_positions=" + huge,
       "model.max_relative_positions"},
      {relative + "--set model.enhanced_mask_decoder=true --set model.max_position_embeddings=" + huge,
       "model.max_position_embeddings"}};
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.overrides);
    const std::string run = "huge" + std::to_string(n++);
    auto r = train(run, c.overrides);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("the run needs at least"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("Lower " + c.key + " (the largest share)"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(tmp_.str(run + "/tokenizer"))) << "refused before the data is prepared";
  }
  auto bench = run_roformer("bench -c " + config_ + " --synthetic --steps 1 --warmup 0 --set model.vocab_size=120 " +
                            cases.front().overrides);
  EXPECT_EQ(bench.exit_code, 1) << bench.output;
  EXPECT_NE(bench.output.find("Lower model.max_position_embeddings (the largest share)"), std::string::npos)
      << bench.output;
}

// Issue 40: a hand-edited trainer_state.json (re-checksummed in the manifest, so that it verifies)
// with a wrong JSON type stops the resume with one line naming the file, the key and what to do.
TEST_F(TrainTest, HandEditedTrainerStateIsOneLineNamingTheKey) {
  auto a = train("ts", "--set train.steps=6 --set eval.every=0");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::string dir = ckpt("ts", 6), state = dir + "/trainer_state.json";
  auto j = json::parse(read_file(state));
  j["tokens_seen"] = "many";
  rewrite_checkpoint_file(dir, "trainer_state.json", j.dump(2));
  auto r = run_roformer("train --run-dir " + tmp_.str("ts") + " --resume " + dir + " --set train.steps=8");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("trainer_state.json: \"tokens_seen\" is \"many\" (a string) but must be a count (an integer >= 0); "
                          "the checkpoint is damaged"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("type_error"), std::string::npos) << r.output;
}

// Issue 40: a prepared corpus's meta.json with a wrong JSON type is one line naming the file and
// the key, never a raw JSON type error.
TEST_F(TrainTest, HandEditedPreparedMetaIsOneLineNamingTheKey) {
  auto t = run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 120 --out " + tmp_.str("tok"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  auto p = run_roformer("prepare --tokenizer " + tmp_.str("tok/tokenizer.model") + " --input " + tmp_.str("train.txt") +
                        " --out " + tmp_.str("prepared"));
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const std::string meta = tmp_.str("prepared/meta.json");
  auto j = json::parse(read_file(meta));
  j["vocab_size"] = "120";
  write_file(meta, j.dump(2));
  auto r = train("pm", "--set tokenizer.model=" + tmp_.str("tok/tokenizer.model") + " --set data.train_files=[" +
                 tmp_.str("prepared") + "] --set train.steps=2 --set schedule.warmup_steps=0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("meta.json: \"vocab_size\" is \"120\" (a string) but must be a count (an integer >= 0); "
                          "re-run `roformer prepare`"), std::string::npos) << r.output;
}

TEST_F(TrainTest, ChangedTrainingTextOnResumeWarnsThatTheRunIsNoLongerExact) {
  auto a = train("c", "--set train.steps=2 --set schedule.warmup_steps=0 --set eval.every=0");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  write_file(tmp_.str("train.txt"), synthetic_corpus(70, 4, 9));
  auto r = run_roformer("train --run-dir " + tmp_.str("c") + " --resume auto --set train.steps=3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data.train_files changed since " + tmp_.str("c") + "/data/train was prepared"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("The resumed run is no longer an exact continuation of the original"), std::string::npos)
      << r.output;
}

TEST_F(TrainTest, ChangedFileInAListedFolderOnResumeIsNoticed) {
  write_file(tmp_.str("corpus/part1.txt"), synthetic_corpus(30, 4, 1));
  write_file(tmp_.str("corpus/part2.txt"), synthetic_corpus(30, 4, 3));
  auto a = train("cf", "--set data.train_files=[" + tmp_.str("corpus") + "] --set train.steps=2 "
                 "--set schedule.warmup_steps=0 --set eval.every=0");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto same = run_roformer("train --run-dir " + tmp_.str("cf") + " --resume auto --set train.steps=3");
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("using prepared train data in " + tmp_.str("cf") + "/data/train"), std::string::npos)
      << same.output;
  write_file(tmp_.str("corpus/part2.txt"), synthetic_corpus(31, 4, 3));
  auto r = run_roformer("train --run-dir " + tmp_.str("cf") + " --resume auto --set train.steps=4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data.train_files changed since " + tmp_.str("cf") + "/data/train was prepared"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("preparing train data (2 file(s))"), std::string::npos) << r.output;
}

// docs/data.md, "Corpora larger than one machine": prepare a subset of the files on each machine
// with one tokenizer, then train once over the prepared folders.
TEST_F(TrainTest, TrainsOnACorpusPreparedInParts) {
  auto t = run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 120 --out " + tmp_.str("tok"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  write_file(tmp_.str("half1.txt"), synthetic_corpus(30, 4, 1));
  write_file(tmp_.str("half2.txt"), synthetic_corpus(30, 4, 3));
  for (const std::string half : {"1", "2"}) {
    auto p = run_roformer("prepare --tokenizer " + tmp_.str("tok/tokenizer.model") + " --input " +
                          tmp_.str("half" + half + ".txt") + " --out " + tmp_.str("prepared" + half));
    ASSERT_EQ(p.exit_code, 0) << p.output;
  }
  const auto one = roformer::data::PreparedCorpus::open(tmp_.str("prepared1"));
  const auto two = roformer::data::PreparedCorpus::open(tmp_.str("prepared2"));
  auto r = train("parts", "--set tokenizer.model=" + tmp_.str("tok/tokenizer.model") + " --set data.train_files=[" +
                 tmp_.str("prepared1") + "," + tmp_.str("prepared2") + "] --set train.steps=2 --set schedule.warmup_steps=0 "
                 "--set eval.every=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(fmt_parts(one->num_documents() + two->num_documents(), one->num_tokens() + two->num_tokens())),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(tmp_.str("parts/data/train"))) << "prepared folders are read in place";
}

TEST_F(TrainTest, DamagedShardInTheRunsCacheIsPreparedAgain) {
  auto a = train("d", "--set train.steps=2 --set schedule.warmup_steps=0 --set eval.every=0");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::string shard = tmp_.str("d") + "/data/train/shard_00000.tok";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64);  // the first token id, after the header: beyond the 120-piece vocabulary
    const char bad[2] = {'\xff', '\xff'};
    f.write(bad, 2);
  }
  auto r = run_roformer("train --run-dir " + tmp_.str("d") + " --resume auto --set train.steps=3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the prepared train data in " + tmp_.str("d") + "/data/train is damaged (shard " + shard +
                          " holds token id 65535"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("preparing it again from data.train_files"), std::string::npos) << r.output;
}

TEST_F(TrainTest, DataErrorsNameTheKeyAndTheFile) {
  write_file(tmp_.str("empty.txt"), "\n\n");
  auto empty = train("e", "--set data.valid_files=[" + tmp_.str("empty.txt") + "]");
  EXPECT_EQ(empty.exit_code, 1) << empty.output;
  EXPECT_NE(empty.output.find("data.valid_files: the corpus is empty: no text in " + tmp_.str("empty.txt")),
            std::string::npos) << empty.output;
  // A directory without meta.json (a plain folder, or a prepared one whose prepare did not finish).
  fs::create_directories(tmp_.str("folder"));
  write_file(tmp_.str("folder/shard_00000.tok"), "x");
  auto dir = train("f", "--set data.valid_files=[" + tmp_.str("folder") + "]");
  EXPECT_EQ(dir.exit_code, 1) << dir.output;
  EXPECT_NE(dir.output.find("data.valid_files: input folder " + tmp_.str("folder") + " holds no corpus files"),
            std::string::npos) << dir.output;
  EXPECT_NE(dir.output.find("it looks like a prepared corpus whose meta.json is missing"), std::string::npos)
      << dir.output;
  auto as_train = train("f2", "--set data.train_files=[" + tmp_.str("folder") + "]");
  EXPECT_EQ(as_train.exit_code, 1) << as_train.output;
  EXPECT_NE(as_train.output.find("data.train_files: input folder " + tmp_.str("folder") + " holds no corpus files"),
            std::string::npos) << as_train.output;
  auto vocab = train("v", "--set tokenizer.vocab_size=40");
  EXPECT_EQ(vocab.exit_code, 1) << vocab.output;
  EXPECT_NE(vocab.output.find("tokenizer.vocab_size = 40 is too small for this text"), std::string::npos)
      << vocab.output;
  EXPECT_NE(vocab.output.find("raise tokenizer.vocab_size to at least"), std::string::npos) << vocab.output;
}

TEST_F(TrainTest, EmptyConfigFileWarns) {
  write_file(tmp_.str("empty.yaml"), "# nothing yet\n");
  auto r = run_roformer("config print -c " + tmp_.str("empty.yaml"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("config file '" + tmp_.str("empty.yaml") + "' is empty: every key keeps its default"),
            std::string::npos) << r.output;
  auto dir = run_roformer("train -c " + tmp_.str() + " --set train.steps=1");
  EXPECT_EQ(dir.exit_code, 1) << dir.output;
  EXPECT_NE(dir.output.find("config '" + tmp_.str() + "' is a directory, not a YAML file"), std::string::npos)
      << dir.output;
}

TEST_F(TrainTest, Bf16AutocastOnCpuTrains) {
  auto r = train("bf", "--set train.precision=bf16 --set train.steps=3 --set checkpoint.every=0 --set eval.every=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto m = metrics("bf");
  ASSERT_EQ(m.size(), 3u);
  for (const auto& [step, rec] : m) EXPECT_TRUE(std::isfinite(rec["loss"].get<double>())) << step;
  EXPECT_NE(r.output.find("precision bf16"), std::string::npos);
}

// bf16 parameters with fp32 master weights: the run trains, its checkpoints hold the fp32 masters
// (so export and --init-from see fp32 weights), a resume continues bit for bit (the bf16 copy is
// rebuilt from the masters), and the checkpoint resumes under autocast too (the format is one).
TEST_F(TrainTest, Bf16ParametersResumeBitForBitFromFp32Masters) {
  const std::string bf16 = "--set train.precision=bf16 --set train.param_dtype=bf16";
  auto a = train("pa", bf16);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto ma = metrics("pa");
  ASSERT_EQ(ma.size(), 12u);
  EXPECT_LT(ma[12]["loss"].get<double>(), ma[1]["loss"].get<double>());  // it trains
  const auto weights = roformer::core::load_safetensors(ckpt("pa", 12) + "/model.safetensors");
  ASSERT_FALSE(weights.empty());
  for (const auto& [name, t] : weights) EXPECT_EQ(t.scalar_type(), torch::kFloat32) << name;
  // Masters, not rounded copies: most values are not representable in bf16.
  const auto& w = weights.at("roformer.encoder.layer.0.attention.self.query.weight");
  EXPECT_GT(w.ne(w.to(torch::kBFloat16).to(torch::kFloat32)).to(torch::kFloat32).mean().item<double>(), 0.9);

  fs::copy(tmp_.str("pa"), tmp_.str("pb"), fs::copy_options::recursive);
  roformer::core::remove_tree(ckpt("pb", 12));
  auto b = run_roformer("train --run-dir " + tmp_.str("pb") + " --resume auto");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("resumed from " + ckpt("pb", 6) + " at step 6"), std::string::npos) << b.output;
  auto mb = metrics("pb");
  for (int64_t s = 7; s <= 12; ++s) {
    EXPECT_EQ(ma[s]["loss"].dump(), mb[s]["loss"].dump()) << "step " << s;
    EXPECT_EQ(ma[s]["grad_norm"].dump(), mb[s]["grad_norm"].dump()) << "step " << s;
  }
  EXPECT_EQ(metrics("pa", "eval")[12]["loss"].dump(), metrics("pb", "eval")[12]["loss"].dump());
  EXPECT_EQ(roformer::core::file_checksum(ckpt("pa", 12) + "/model.safetensors"),
            roformer::core::file_checksum(ckpt("pb", 12) + "/model.safetensors"));

  fs::copy(tmp_.str("pa"), tmp_.str("pc"), fs::copy_options::recursive);
  roformer::core::remove_tree(ckpt("pc", 12));
  auto c = run_roformer("train --run-dir " + tmp_.str("pc") + " --resume auto --set train.param_dtype=fp32");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("resume: applying train.param_dtype: bf16 -> fp32; the run is no longer an exact "
                          "continuation"), std::string::npos) << c.output;
  const double lb = mb[12]["loss"].get<double>(), lc = metrics("pc")[12]["loss"].get<double>();
  EXPECT_NEAR(lc, lb, 0.05 * lb);  // autocast from the same masters: close, not equal
}

TEST_F(TrainTest, MissingTrainingFileIsAClearError) {
  auto r = train("m", "--set data.train_files=[" + tmp_.str("nope.txt") + "] --set tokenizer.model=");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("nope.txt"), std::string::npos) << r.output;
}

// A short run on the Brown corpus beats the unigram baseline (the most frequent piece among the
// evaluated positions, an upper bound of any unigram predictor on these masks) by a wide margin.
TEST(TrainBrown, ValidationAccuracyAboveUnigramBaseline) {
  ROFORMER_REQUIRE_BROWN();
  TempDir tmp;
  const std::string b = brown_dir();
  const std::string cfg = tmp.str("brown.yaml");
  write_file(cfg,
             "model:\n  hidden_size: 128\n  num_layers: 2\n  num_heads: 2\n  intermediate_size: 512\n"
             "  max_position_embeddings: 64\n  hidden_dropout: 0.0\n  attention_dropout: 0.0\n"
             "tokenizer:\n  vocab_size: 2000\n  input_sentence_size: 20000\n"
             "data:\n  train_files: [" + b + "/train.txt]\n  valid_files: [" + b + "/valid.txt]\n  max_seq_len: 64\n"
             "optimizer:\n  lr: 5.0e-3\nschedule:\n  warmup_steps: 20\n"
             "train:\n  steps: 400\n  batch_size: 32\n  precision: fp32\n  device: cpu\n  num_threads: 1\n"
             "checkpoint:\n  every: 0\nlogging:\n  every: 100\n  progress: plain\n"
             "eval:\n  every: 0\n  max_sequences: 256\n  batch_size: 64\n");
  auto r = run_roformer("train -c " + cfg + " --run-dir " + tmp.str("run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  double acc = -1;
  std::ifstream in(tmp.str("run/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto rec = json::parse(line);
    if (rec["type"] == "eval") acc = rec["accuracy"].get<double>();
  }
  // The same evaluation masks as the run (eval.seed 0, first 256 sequences of 64 tokens).
  roformer::config::Config c;
  c.data.max_seq_len = 64;
  auto batches = roformer::data::make_eval_batches(roformer::data::PreparedCorpus::open(tmp.str("run/data/valid")),
                                                   roformer::data::loader_options_from_config(c, 64), 256, 64, 0);
  std::map<int64_t, int64_t> counts;
  int64_t n = 0, best = 0;
  for (const auto& batch : batches)
    for (int64_t i = 0; i < batch.pred_labels.numel(); ++i, ++n)
      best = std::max(best, ++counts[batch.pred_labels[i].item<int64_t>()]);
  const double unigram = static_cast<double>(best) / static_cast<double>(n);
  std::cout << "validation MLM accuracy " << acc << ", unigram baseline " << unigram << "\n";
  // Measured: 0.112 vs a baseline of 0.042 (docs/benchmarks.md, "Training: accuracy on Brown").
  EXPECT_GT(acc, unigram + 0.05) << r.output;
}

// Issue 55: a loader of a later phase names that phase's key, not data.max_seq_len: here the
// validation text is too short for one sequence of the length training ends with (the last phase's).
TEST_F(TrainTest, ALaterPhasesLengthIsNamedByItsKey) {
  write_file(tmp_.str("valid.txt"), "A short line.\n");
  auto r = train("short", "--set 'train.phases=[{from_step: 6, max_seq_len: 64, batch_size: 2}]'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("fewer than one sequence of train.phases[0].max_seq_len=64; lower "
                          "train.phases[0].max_seq_len or add text"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("data.max_seq_len="), std::string::npos) << r.output;
}

// train.phases: steps 1-6 at 32 tokens x 4 sequences, 7-12 at 64 x 2, one run. A kill just before
// the boundary, at it and just after it resumes bit for bit (the checkpoint records which phase its
// data position belongs to); the records say the phase and length of each logging step, evaluation
// runs at the length training ends with, and the summary gives tokens/s per phase.
TEST_F(TrainTest, LengthPhasesResumeBitForBitAcrossTheBoundary) {
  const std::string phases = "--set 'train.phases=[{from_step: 6, max_seq_len: 64, batch_size: 2}]' "
                             "--set checkpoint.every=1 --set checkpoint.keep_last=20";
  auto a = train("a", phases);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("length phases (train.phases; sequences x tokens per step): steps 1-6: 4 x 32, steps 7-12: "
                          "2 x 64"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("length phase 2 of 2 from step 7 to 12: 2 sequences x 64 tokens per step"),
            std::string::npos) << a.output;
  EXPECT_NE(a.output.find("summary: phase 1 (steps 1-6, 4 x 32 tokens per step)"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("summary: phase 2 (steps 7-12, 2 x 64 tokens per step)"), std::string::npos) << a.output;
  auto ma = metrics("a");
  for (int64_t s = 1; s <= 12; ++s) {
    EXPECT_EQ(ma[s]["seq_len"], s <= 6 ? 32 : 64) << s;
    EXPECT_EQ(ma[s]["phase"], s <= 6 ? 1 : 2) << s;
    EXPECT_TRUE(ma[s]["phase"].is_number_integer()) << ma[s].dump();  // "phase": 2, not 2.0 (issue 55)
  }
  EXPECT_EQ(ma[12]["tokens_seen"], 6 * 4 * 32 + 6 * 2 * 64);
  // Logging every 4 steps, a record also closes each phase's last step (6): no window spans two
  // phases. Its means are those of the steps since the previous record (the same training as a's).
  auto w = train("w", "--set 'train.phases=[{from_step: 6, max_seq_len: 64, batch_size: 2}]' --set logging.every=4");
  ASSERT_EQ(w.exit_code, 0) << w.output;
  auto mw = metrics("w");
  std::vector<int64_t> logged;
  for (const auto& [s, rec] : mw) logged.push_back(s);
  EXPECT_EQ(logged, (std::vector<int64_t>{4, 6, 8, 12}));
  const auto mean_loss = [&](int64_t from, int64_t to) {
    double sum = 0;
    for (int64_t s = from; s <= to; ++s) sum += ma[s]["loss"].get<double>();
    return sum / static_cast<double>(to - from + 1);
  };
  EXPECT_DOUBLE_EQ(mw[6]["loss_avg"].get<double>(), mean_loss(5, 6));
  EXPECT_DOUBLE_EQ(mw[8]["loss_avg"].get<double>(), mean_loss(7, 8));
  EXPECT_EQ(mw[6]["seq_len"], 32);
  EXPECT_EQ(mw[8]["seq_len"], 64);
  auto eval = metrics("a", "eval");
  ASSERT_TRUE(eval.count(12));
  EXPECT_EQ(eval[12]["n_tokens"].get<int64_t>(), 64 * eval[12]["n_sequences"].get<int64_t>());
  EXPECT_EQ(json::parse(read_file(ckpt("a", 6) + "/trainer_state.json"))["loader"]["phase"], 0);
  EXPECT_EQ(json::parse(read_file(ckpt("a", 7) + "/trainer_state.json"))["loader"]["phase"], 1);
  auto evaluated = run_roformer("eval --device cpu --json --max-sequences 16 --checkpoint " + ckpt("a", 12));
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  EXPECT_EQ(last_json(evaluated.output)["seq_len"], 64);
  EXPECT_EQ(last_json(evaluated.output)["accuracy"], eval[12]["accuracy"]);  // the run's own evaluation
  for (const int64_t stop : {5, 6, 7}) {
    SCOPED_TRACE(stop);
    const std::string b = "b" + std::to_string(stop);
    fs::copy(tmp_.str("a"), tmp_.str(b), fs::copy_options::recursive);
    for (int64_t s = stop + 1; s <= 12; ++s) roformer::core::remove_tree(ckpt(b, s));
    auto resumed = run_roformer("train --run-dir " + tmp_.str(b) + " --resume auto");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resumed from " + ckpt(b, stop)), std::string::npos) << resumed.output;
    auto mb = metrics(b);
    for (int64_t s = stop + 1; s <= 12; ++s) EXPECT_EQ(ma[s]["loss"].dump(), mb[s]["loss"].dump()) << "step " << s;
    EXPECT_EQ(roformer::core::file_checksum(ckpt("a", 12) + "/model.safetensors"),
              roformer::core::file_checksum(ckpt(b, 12) + "/model.safetensors"));
  }
  // Issue 55: from step 7 on no step reads train.batch_size or data.max_seq_len (phase 2 sets its own):
  // changing them is applied as an exact continuation, and it is one. Before the boundary the same
  // change of train.batch_size still warns.
  for (const int64_t stop : {7, 5}) {
    const std::string c = "c" + std::to_string(stop);
    fs::copy(tmp_.str("a"), tmp_.str(c), fs::copy_options::recursive);
    for (int64_t s = stop + 1; s <= 12; ++s) roformer::core::remove_tree(ckpt(c, s));
    auto resumed = run_roformer("train -c " + config_ + " --run-dir " + tmp_.str(c) + " --resume auto " + phases +
                                " --set train.batch_size=8" + (stop == 7 ? " --set data.max_seq_len=16" : ""));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    const bool warned = resumed.output.find("no longer an exact continuation") != std::string::npos;
    EXPECT_EQ(warned, stop == 5) << resumed.output;
    if (stop != 7) continue;
    EXPECT_NE(resumed.output.find("resume: applying config change train.batch_size: 4 -> 8; no step from here on uses "
                                  "it"), std::string::npos) << resumed.output;
    auto mc = metrics(c);
    for (int64_t s = 8; s <= 12; ++s) EXPECT_EQ(ma[s]["loss"].dump(), mc[s]["loss"].dump()) << "step " << s;
  }
  // The phases are part of the data order: a resume that changes them is refused.
  auto changed = run_roformer("train --run-dir " + tmp_.str("b5") + " --resume " + ckpt("b5", 6) +
                              " --set 'train.phases=[{from_step: 8, max_seq_len: 64}]'");
  EXPECT_EQ(changed.exit_code, 1) << changed.output;
  EXPECT_NE(changed.output.find("train.phases: [{from_step: 6, max_seq_len: 64, batch_size: 2}] -> [{from_step: 8, "
                                "max_seq_len: 64}]"), std::string::npos) << changed.output;
}
