// `roformer train` as a data-parallel job: two processes started the way torchrun starts them
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Gloo on loopback, CPU only. Two ranks
// train like one process with the same global batch; a distributed resume continues bit for bit;
// a resume on another number of processes continues the global data position; a signal to one rank
// stops both at the same step with one checkpoint; a killed rank stops the other with a message
// naming it, and the last checkpoint resumes. Every wait is bounded (tests/rank_launcher.h).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/safetensors.h"
#include "rank_launcher.h"
#include "run_dir_util.h"
#include "tensorboard/event_file.h"
#include "test_util.h"
#include "checkpoint/store.h"

using namespace roformer::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The tiny model of test_train (a dozen CPU steps take a second or two). grad_accum 2 so the
// accumulation path of the gradient reducer (no communication until the last micro-batch) runs too.
std::string tiny_config(const std::string& dir, double dropout) {
  return "model:\n  hidden_size: 32\n  num_layers: 2\n  num_heads: 2\n  intermediate_size: 64\n"
         "  max_position_embeddings: 64\n  hidden_dropout: " + std::to_string(dropout) +
         "\n  attention_dropout: " + std::to_string(dropout) + "\n"
         "tokenizer:\n  vocab_size: 120\n"
         "data:\n  train_files: [" + dir + "/train.txt]\n  valid_files: [" + dir + "/valid.txt]\n"
         "  max_seq_len: 32\n  num_workers: 1\n"
         "optimizer:\n  lr: 3.0e-3\nschedule:\n  warmup_steps: 3\n"
         "train:\n  steps: 12\n  batch_size: 2\n  grad_accum: 2\n  precision: fp32\n  device: cpu\n  seed: 5\n"
         "  num_threads: 1\n"
         "checkpoint:\n  every: 6\n  keep_last: 5\nlogging:\n  every: 1\n  progress: plain\n"
         "eval:\n  every: 6\n  max_sequences: 16\n  batch_size: 8\n"
         "distributed:\n  timeout_s: 20\n  bucket_mb: 0.01\n";
}

class TrainDistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(tmp_.str("train.txt"), synthetic_corpus(60, 4, 1));
    write_file(tmp_.str("valid.txt"), synthetic_corpus(6, 3, 2));
    write_file(tmp_.str("tiny.yaml"), tiny_config(tmp_.str(), 0.1));
    write_file(tmp_.str("tiny_nodrop.yaml"), tiny_config(tmp_.str(), 0.0));
  }
  std::vector<std::string> train_args(const std::string& config, const std::string& run,
                                      const std::vector<std::string>& extra = {}) {
    std::vector<std::string> a{"train", "--run-dir", tmp_.str(run)};
    if (!config.empty()) a.insert(a.end(), {"-c", tmp_.str(config)});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // Two ranks of `roformer train`; both must finish within the limit.
  std::vector<Proc> two_ranks(const std::vector<std::string>& args, const std::string& log_prefix) {
    return run_ranks(roformer_bin(), args, 2, tmp_, std::chrono::seconds(180), log_prefix);
  }
  // Two ranks of a run too long to finish, with checkpoints every `checkpoint_every` steps (0: at
  // the end or on a signal). TearDown kills whatever a failed assertion left running.
  std::vector<Proc> start_long_run(const std::string& run, int checkpoint_every) {
    const auto args = train_args("tiny.yaml", run, {"--set", "train.steps=100000", "--set",
                                                    "checkpoint.every=" + std::to_string(checkpoint_every), "--set",
                                                    "eval.every=0"});
    const int port = free_port();
    std::vector<Proc> procs;
    for (int r = 0; r < 2; ++r) {
      procs.push_back(launch_rank(roformer_bin(), args, r, 2, port, tmp_.str(run + ".rank" + std::to_string(r) + ".log")));
      started_.push_back(procs.back().pid);
    }
    return procs;
  }
  void TearDown() override {
    for (const pid_t pid : started_) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == 0) {  // still running (not yet reaped)
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
    }
  }
  Proc single(const std::vector<std::string>& args, const std::string& log) {
    Proc p = launch_rank(roformer_bin(), args, -1, 1, 0, tmp_.str(log));
    wait_until(p, Clock::now() + std::chrono::seconds(180));
    return p;
  }
  // The run `args` (on tiny_nodrop.yaml) on two ranks as run `two` and on one process with their
  // global batch (train.batch_size 4 instead of 2) as run `one`; each must succeed.
  void two_ranks_and_one(const std::string& two, const std::string& one, const std::vector<std::string>& args) {
    const auto procs = two_ranks(train_args("tiny_nodrop.yaml", two, args), two + ".");
    for (size_t r = 0; r < procs.size(); ++r)
      ASSERT_EQ(procs[r].exit_code, 0) << "rank " << r << ":\n" << procs[r].output();
    auto one_args = args;
    one_args.insert(one_args.end(), {"--set", "train.batch_size=4"});
    Proc p = single(train_args("tiny_nodrop.yaml", one, one_args), one + ".log");
    ASSERT_EQ(p.exit_code, 0) << p.output();
  }
  std::map<int64_t, json> metrics(const std::string& run, const std::string& type = "train") {
    return read_metrics(tmp_.str(run), type);
  }
  std::string ckpt(const std::string& run, int64_t step) { return checkpoint_dir(tmp_.str(run), step); }
  json state(const std::string& checkpoint) { return json::parse(read_file(checkpoint + "/trainer_state.json")); }
  TempDir tmp_;
  std::vector<pid_t> started_;
};

void expect_ok(const std::vector<Proc>& procs) {
  for (size_t r = 0; r < procs.size(); ++r)
    ASSERT_EQ(procs[r].exit_code, 0) << "rank " << r << ":\n" << procs[r].output();
}

// Largest |a - b| over the parameters of two model.safetensors, after checking allclose(rtol, atol).
double compare_models(const std::string& a_path, const std::string& b_path, double rtol = 1e-4, double atol = 1e-5) {
  const auto a = roformer::core::load_safetensors(a_path), b = roformer::core::load_safetensors(b_path);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [name, t] : a) {
    if (!b.count(name)) {
      ADD_FAILURE() << name << " missing";
      continue;
    }
    EXPECT_TRUE(torch::allclose(t, b.at(name), rtol, atol)) << name;
    worst = std::max(worst, (t - b.at(name)).abs().max().item<double>());
  }
  return worst;
}

}  // namespace

// 2 ranks x 2 micro-batches of 2 sequences against 1 process x 2 micro-batches of 4: the same 8
// sequences a step (the loader gives each rank its rows of every global batch). Dropout is off,
// since two processes draw two dropout streams. The difference is only the order of floating-point
// sums (per-rank partial gradients, then their sum).
TEST_F(TrainDistTest, TwoProcessesTrainLikeOneWithTheGlobalBatch) {
  auto procs = two_ranks(train_args("tiny_nodrop.yaml", "two"), "two.");
  expect_ok(procs);
  Proc one = single(train_args("tiny_nodrop.yaml", "one", {"--set", "train.batch_size=4"}), "one.log");
  ASSERT_EQ(one.exit_code, 0) << one.output();

  const std::string out0 = procs[0].output(), out1 = procs[1].output();
  EXPECT_NE(out0.find("data-parallel run: 2 processes (launched by torchrun), gloo backend"), std::string::npos) << out0;
  EXPECT_NE(out0.find("8 sequences x 32 tokens per step (2 micro-batch(es) of 2 on each of 2 ranks)"),
            std::string::npos) << out0;
  // Rank 1 logs warnings and errors only; the metrics, log file, event file and checkpoints are rank 0's.
  EXPECT_EQ(out1.find("[info]"), std::string::npos) << out1;
  EXPECT_EQ(roformer::tensorboard::list_event_files(tmp_.str("two")).size(), 1u);
  auto m2 = metrics("two"), m1 = metrics("one");
  ASSERT_EQ(m2.size(), 12u);
  ASSERT_EQ(m1.size(), 12u);
  for (int64_t s = 1; s <= 12; ++s) {
    const double l1 = m1[s]["loss"].get<double>(), l2 = m2[s]["loss"].get<double>();
    EXPECT_NEAR(l2, l1, 1e-5 * std::abs(l1)) << "step " << s;
    EXPECT_NEAR(m2[s]["grad_norm"].get<double>(), m1[s]["grad_norm"].get<double>(),
                1e-4 * m1[s]["grad_norm"].get<double>()) << "step " << s;
    EXPECT_EQ(m2[s]["tokens_seen"], m1[s]["tokens_seen"]) << "step " << s;  // the global count
  }
  EXPECT_LT(m2[12]["loss"].get<double>(), m2[1]["loss"].get<double>() - 0.1);  // it trained
  // Evaluation is sharded over the ranks (every other batch) and summed: the whole validation set.
  const auto e2 = metrics("two", "eval")[12], e1 = metrics("one", "eval")[12];
  EXPECT_EQ(e2["n_predicted"], e1["n_predicted"]);
  EXPECT_EQ(e2["n_sequences"], e1["n_sequences"]);
  EXPECT_NEAR(e2["loss"].get<double>(), e1["loss"].get<double>(), 1e-4);
  EXPECT_NEAR(e2["accuracy"].get<double>(), e1["accuracy"].get<double>(), 1.01 / e1["n_predicted"].get<double>());
  const double worst = compare_models(ckpt("two", 12) + "/model.safetensors", ckpt("one", 12) + "/model.safetensors");
  std::cout << "max |2 processes - 1 process| over the parameters after 12 steps: " << worst << "\n";

  // One checkpoint per save (written by rank 0 after the ranks agreed on their parameters), with
  // every rank's RNG state and the world size.
  ASSERT_TRUE(roformer::checkpoint::verify_checkpoint(ckpt("two", 12)).ok);
  EXPECT_TRUE(fs::exists(ckpt("two", 12) + "/rng.pt"));
  EXPECT_TRUE(fs::exists(ckpt("two", 12) + "/rng_rank1.pt"));
  const auto st = state(ckpt("two", 12));
  EXPECT_EQ(st["world_size"], 2);
  EXPECT_EQ(st["global_batch_size"], 8);
  EXPECT_EQ(st["loader"], state(ckpt("one", 12))["loader"]);
}

// bf16 parameters with fp32 masters: the ranks sum the masters' fp32 gradients after the last
// micro-batch (the reducer over the masters, which no backward reaches). Against one process with
// the same global batch the bf16 forward and backward run on other batch shapes (2 sequences a rank
// instead of 4), so the figures agree to bf16 rounding, not to fp32 summation order. Ranks that
// applied only their own gradients would drift apart and fail the parameter check of the save.
TEST_F(TrainDistTest, TwoProcessesWithBf16ParametersTrainLikeOne) {
  const std::vector<std::string> bf16 = {"--set", "train.precision=bf16", "--set", "train.param_dtype=bf16"};
  ASSERT_NO_FATAL_FAILURE(two_ranks_and_one("two16", "one16", bf16));
  auto m2 = metrics("two16"), m1 = metrics("one16");
  ASSERT_EQ(m2.size(), 12u);
  ASSERT_EQ(m1.size(), 12u);
  double worst = 0;
  for (int64_t s = 1; s <= 12; ++s) {
    const double l1 = m1[s]["loss"].get<double>(), l2 = m2[s]["loss"].get<double>();
    worst = std::max(worst, std::abs(l2 - l1) / l1);
    EXPECT_NEAR(l2, l1, 1e-3 * l1) << "step " << s;  // measured 4.6e-5
  }
  EXPECT_LT(m2[12]["loss"].get<double>(), m2[1]["loss"].get<double>() - 0.1);  // it trained
  std::cout << "largest relative loss difference, 2 processes vs 1, bf16 parameters: " << worst << "\n";
  const double apart = compare_models(ckpt("two16", 12) + "/model.safetensors", ckpt("one16", 12) + "/model.safetensors",
                                      /*rtol=*/0, /*atol=*/1e-2);  // measured 9.5e-4
  std::cout << "max |2 processes - 1 process| over the parameters: " << apart << "\n";
  for (const auto& [name, t] : roformer::core::load_safetensors(ckpt("two16", 12) + "/model.safetensors"))
    EXPECT_EQ(t.scalar_type(), torch::kFloat32) << name;
}

// DeBERTa's relative attention with its enhanced mask decoder (the last layer run twice, the
// relative and absolute tables shared by the layers) reduces its gradients like any model: two
// ranks train like one process with the global batch.
TEST_F(TrainDistTest, DisentangledWithTheDecoderTrainsLikeOneProcess) {
  const std::vector<std::string> deberta = {"--set", "model.position=disentangled", "--set", "model.position_buckets=16",
                                            "--set", "model.enhanced_mask_decoder=true", "--set", "train.steps=6",
                                            "--set", "eval.every=0"};
  ASSERT_NO_FATAL_FAILURE(two_ranks_and_one("two", "one", deberta));
  auto m2 = metrics("two"), m1 = metrics("one");
  ASSERT_EQ(m2.size(), 6u);
  for (int64_t s = 1; s <= 6; ++s)
    EXPECT_NEAR(m2[s]["loss"].get<double>(), m1[s]["loss"].get<double>(), 1e-5 * m1[s]["loss"].get<double>()) << s;
  const double worst = compare_models(ckpt("two", 6) + "/model.safetensors", ckpt("one", 6) + "/model.safetensors");
  std::cout << "disentangled + decoder: max |2 processes - 1 process| over the parameters after 6 steps: " << worst
            << "\n";
}

// Dropout on: each rank's own dropout stream must be restored for the resumed run to continue
// exactly (rank 1's comes from rng_rank1.pt).
TEST_F(TrainDistTest, DistributedResumeContinuesBitForBit) {
  expect_ok(two_ranks(train_args("tiny.yaml", "a"), "a."));
  fs::copy(tmp_.str("a"), tmp_.str("b"), fs::copy_options::recursive);
  roformer::core::remove_tree(ckpt("b", 12));
  auto procs = two_ranks(train_args("", "b", {"--resume", "auto"}), "b.");
  expect_ok(procs);
  EXPECT_NE(procs[0].output().find("resumed from " + ckpt("b", 6) + " at step 6"), std::string::npos)
      << procs[0].output();
  auto ma = metrics("a"), mb = metrics("b");
  ASSERT_EQ(mb.size(), 12u);
  for (int64_t s = 7; s <= 12; ++s) {
    EXPECT_EQ(ma[s]["loss"].dump(), mb[s]["loss"].dump()) << "step " << s;
    EXPECT_EQ(ma[s]["grad_norm"].dump(), mb[s]["grad_norm"].dump()) << "step " << s;
  }
  EXPECT_EQ(roformer::core::file_checksum(ckpt("a", 12) + "/model.safetensors"),
            roformer::core::file_checksum(ckpt("b", 12) + "/model.safetensors"));
}

// A 2-process checkpoint resumed by 1 process with the same global batch (batch_size 2 -> 4, a
// change the resume accepts with a warning) continues the same global sample sequence: its steps
// 7-12 equal the 2-process run's (dropout off; fp32 summation order only).
TEST_F(TrainDistTest, ResumeOnAnotherNumberOfProcessesContinuesTheGlobalPosition) {
  expect_ok(two_ranks(train_args("tiny_nodrop.yaml", "a"), "a."));
  fs::copy(tmp_.str("a"), tmp_.str("b"), fs::copy_options::recursive);
  roformer::core::remove_tree(ckpt("b", 12));
  Proc one = single(train_args("", "b", {"--resume", "auto", "--set", "train.batch_size=4"}), "b.log");
  ASSERT_EQ(one.exit_code, 0) << one.output();
  const std::string out = one.output();
  EXPECT_NE(out.find("resuming a checkpoint written by 2 process(es) with 1"), std::string::npos) << out;
  EXPECT_NE(out.find("applying train.batch_size: 2 -> 4"), std::string::npos) << out;
  EXPECT_EQ(out.find("the global batch is now"), std::string::npos) << out;  // 2 x 2 x 2 == 4 x 2 x 1
  EXPECT_EQ(state(ckpt("b", 12))["loader"], state(ckpt("a", 12))["loader"]);
  auto ma = metrics("a"), mb = metrics("b");
  for (int64_t s = 7; s <= 12; ++s) {
    const double la = ma[s]["loss"].get<double>();
    EXPECT_NEAR(mb[s]["loss"].get<double>(), la, 1e-5 * std::abs(la)) << "step " << s;
  }
  compare_models(ckpt("a", 12) + "/model.safetensors", ckpt("b", 12) + "/model.safetensors");

  // A global batch that changes is said out loud.
  Proc other = single(train_args("", "c", {"--resume", ckpt("a", 6), "--set", "train.steps=7"}), "c.log");
  ASSERT_EQ(other.exit_code, 0) << other.output();
  EXPECT_NE(other.output().find("the global batch is now 4 sequences per step"), std::string::npos) << other.output();
}

// SIGTERM to rank 1 only: the ranks agree to stop, both save the same step (one checkpoint) and exit 0.
TEST_F(TrainDistTest, SignalToOneRankStopsBothAtTheSameStep) {
  auto procs = start_long_run("s", 0);
  ASSERT_TRUE(wait_for_text(procs[0], "step 3/100000", Clock::now() + std::chrono::seconds(120))) << procs[0].output();
  kill(procs[1].pid, SIGTERM);
  for (auto& p : procs) wait_until(p, Clock::now() + std::chrono::seconds(60));
  expect_ok(procs);
  const std::string out0 = procs[0].output();
  EXPECT_NE(out0.find("stopped by a signal to another rank at step"), std::string::npos) << out0;
  EXPECT_NE(out0.find("Resume by launching the same 2 processes with"), std::string::npos) << out0;
  const auto all = roformer::checkpoint::list_checkpoints(tmp_.str("s/checkpoints"));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(all[0]).ok);
  EXPECT_GE(state(all[0])["step"].get<int64_t>(), 3);
  EXPECT_TRUE(fs::exists(all[0] + "/rng_rank1.pt"));
}

// SIGKILL of rank 1 mid-run: rank 0 exits non-zero within the collective timeout (distributed.timeout_s
// 20 s here; a dead peer is usually detected at once), naming rank 1; the last checkpoint is intact
// and a new 2-process launch resumes from it.
TEST_F(TrainDistTest, KilledRankStopsTheOtherWithAMessageAndTheCheckpointResumes) {
  auto procs = start_long_run("k", 2);
  ASSERT_TRUE(wait_for_text(procs[0], "step 5/100000", Clock::now() + std::chrono::seconds(120))) << procs[0].output();
  kill(procs[1].pid, SIGKILL);
  const auto killed_at = Clock::now();
  wait_until(procs[1], killed_at + std::chrono::seconds(10));
  ASSERT_TRUE(wait_until(procs[0], killed_at + std::chrono::seconds(60)));
  const double took = std::chrono::duration<double>(Clock::now() - killed_at).count();
  const std::string out0 = procs[0].output();
  EXPECT_EQ(procs[0].exit_code, 1) << out0;
  EXPECT_NE(out0.find("rank 1 stopped responding"), std::string::npos) << out0;
  EXPECT_LT(took, 40.0) << out0;

  const std::string latest = roformer::checkpoint::find_latest_valid_checkpoint(tmp_.str("k/checkpoints"), nullptr);
  ASSERT_FALSE(latest.empty());
  const int64_t step = state(latest)["step"].get<int64_t>();
  EXPECT_GE(step, 4);
  auto resumed = two_ranks(train_args("", "k", {"--resume", "auto", "--set", "train.steps=" + std::to_string(step + 2)}),
                           "k2.");
  expect_ok(resumed);
  EXPECT_NE(resumed[0].output().find("resumed from " + latest), std::string::npos) << resumed[0].output();
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(ckpt("k", step + 2)).ok);
}

// Ranks launched with different overrides (or resuming from different checkpoints) stop before
// training, both with a message naming the odd rank.
TEST_F(TrainDistTest, RanksThatResolveDifferentConfigsRefuseToStart) {
  const int port = free_port();
  std::vector<Proc> procs;
  procs.push_back(launch_rank(roformer_bin(), train_args("tiny.yaml", "d"), 0, 2, port, tmp_.str("d.rank0.log")));
  procs.push_back(launch_rank(roformer_bin(), train_args("tiny.yaml", "d", {"--set", "optimizer.lr=1e-3"}), 1, 2, port,
                              tmp_.str("d.rank1.log")));
  for (auto& p : procs) wait_until(p, Clock::now() + std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r) {
    const std::string out = procs[static_cast<size_t>(r)].output();
    EXPECT_EQ(procs[static_cast<size_t>(r)].exit_code, 1) << out;
    EXPECT_NE(out.find("rank(s) 1 resolved another config or checkpoint than rank 0"), std::string::npos) << out;
    EXPECT_NE(out.find("every rank must run the same command"), std::string::npos) << out;
  }
  EXPECT_NE(procs[1].output().find("[rank 1]"), std::string::npos) << procs[1].output();
  EXPECT_FALSE(fs::exists(tmp_.str("d/checkpoints")));  // nothing was trained
}
