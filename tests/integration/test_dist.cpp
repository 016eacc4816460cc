// Distributed building blocks with real processes: tests/dist_worker.cpp launched once per rank on
// loopback with Gloo (no GPU needed). Collectives give the right values; 2 ranks training with
// GradientReducer end bit-identical to each other and equal (fp32 tolerance) to 1 process on the same
// global batch; a killed (SIGKILL) or stopped (SIGSTOP) rank makes the survivor exit non-zero within
// the timeout with a message naming the rank. Every wait is bounded: a rank still running at its
// deadline is killed and the test fails.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <sstream>

#include "core/safetensors.h"
#include "rank_launcher.h"
#include "test_util.h"

namespace rt = roformer::test;
using rt::Clock;
using rt::Proc;
using rt::free_port;
using rt::wait_for_text;
using rt::wait_until;

namespace {

Proc launch(const std::vector<std::string>& args, int rank, int world, int port, const std::string& log) {
  return rt::launch_rank(rt::dist_worker_bin(), args, rank, world, port, log);
}

std::vector<Proc> run_ranks(const std::vector<std::string>& args, int world, const rt::TempDir& dir,
                            std::chrono::seconds limit) {
  return rt::run_ranks(rt::dist_worker_bin(), args, world, dir, limit);
}

// The value of the first `key=value` line of a rank's output.
std::string value_of(const std::string& output, const std::string& key) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  return "<missing " + key + ">";
}

// The losses of the `step=K loss=X` lines.
std::vector<double> losses_of(const std::string& output) {
  std::istringstream in(output);
  std::string line;
  std::vector<double> out;
  while (std::getline(in, line))
    if (line.rfind("step=", 0) == 0) out.push_back(std::stod(line.substr(line.find("loss=") + 5)));
  return out;
}

}  // namespace

TEST(Dist, CollectivesOnTwoRanks) {
  rt::TempDir dir;
  auto procs = run_ranks({"collectives"}, 2, dir, std::chrono::seconds(60));
  for (int r = 0; r < 2; ++r) {
    const std::string out = procs[static_cast<size_t>(r)].output();
    SCOPED_TRACE("rank " + std::to_string(r) + " output:\n" + out);
    ASSERT_EQ(procs[static_cast<size_t>(r)].exit_code, 0);
    EXPECT_NE(out.find("backend=gloo rank=" + std::to_string(r) + " world=2"), std::string::npos);
    EXPECT_EQ(value_of(out, "all_reduce_f32"), "3.000000,30.000000,300.000000");  // (1 + 2) * [1, 10, 100]
    EXPECT_EQ(value_of(out, "all_reduce_i64"), "1.000000");                        // 0 + 1
    EXPECT_EQ(value_of(out, "broadcast"), "1.500000,1.500000,1.500000,1.500000");  // rank 1's values
    EXPECT_EQ(value_of(out, "barrier"), "passed");
    EXPECT_EQ(value_of(out, "all_gather"), "0.250000,1.750000");  // 1.5 r + 0.25 by rank
    EXPECT_EQ(value_of(out, "agree_same"), "parameters agree on all 2 ranks");
    EXPECT_EQ(value_of(out, "agree_perturbed"),
              "parameters of rank(s) 1 differ from rank 0's (checksums differ): the ranks have diverged");
    EXPECT_EQ(value_of(out, "agree_after_broadcast"), "parameters agree on all 2 ranks");
  }
}

// 2 ranks x 2 micro-batches of 3 sequences vs 1 process x 2 micro-batches of 6, the same 12
// sequences a step, 6 AdamW steps. The ranks must agree bit for bit; against the single process the
// only difference is the order of floating-point sums (per-rank partial gradients, then their sum),
// so parameters agree to fp32 rounding amplified by 6 Adam steps: |a - b| <= 1e-5 + 1e-4 |b|
// (observed: 6e-7; normalizing by each rank's own token count instead of the global one gives 3e-2).
TEST(Dist, TwoRanksTrainLikeOneProcessWithTheGlobalBatch) {
  rt::TempDir dir;
  const std::string steps = "6", accum = "2";
  // A small bucket cap (0.01 MiB) gives many buckets, so some start during backward.
  auto procs = run_ranks({"train", dir.str(), steps, accum, "0.01"}, 2, dir, std::chrono::seconds(120));
  for (auto& p : procs) ASSERT_EQ(p.exit_code, 0) << p.output();
  std::filesystem::create_directories(dir.str("single"));
  Proc single = launch({"train", dir.str("single"), steps, accum, "0.01"}, -1, 1, 0, dir.str("single.log"));
  ASSERT_TRUE(wait_until(single, Clock::now() + std::chrono::seconds(120)));
  ASSERT_EQ(single.exit_code, 0) << single.output();

  const std::string out0 = procs[0].output();
  EXPECT_EQ(value_of(out0, "agreement"), "parameters agree on all 2 ranks") << out0;
  EXPECT_GT(std::stoll(value_of(out0, "buckets")), 3) << out0;
  EXPECT_GT(std::stoll(value_of(out0, "buckets_started_in_backward")), 0) << "no overlap with backward\n" << out0;

  const auto rank0 = roformer::core::load_safetensors(dir.str("params_rank0.safetensors"));
  const auto rank1 = roformer::core::load_safetensors(dir.str("params_rank1.safetensors"));
  const auto one = roformer::core::load_safetensors(dir.str("single/params_rank0.safetensors"));
  ASSERT_EQ(rank0.size(), one.size());
  double max_diff = 0;
  for (const auto& [name, t] : one) {
    ASSERT_TRUE(rank0.count(name) && rank1.count(name)) << name;
    EXPECT_TRUE(torch::equal(rank0.at(name), rank1.at(name))) << name << " differs between ranks";
    EXPECT_TRUE(torch::allclose(rank0.at(name), t, /*rtol=*/1e-4, /*atol=*/1e-5)) << name;
    max_diff = std::max(max_diff, (rank0.at(name) - t).abs().max().item<double>());
  }
  // The run trained (a no-op training would pass the comparisons above trivially), and both runs
  // report the same global losses.
  const auto losses = losses_of(out0), single_losses = losses_of(single.output());
  ASSERT_EQ(losses.size(), 6u) << out0;
  ASSERT_EQ(single_losses.size(), 6u) << single.output();
  EXPECT_LT(losses.back(), losses.front() - 0.05) << out0;
  for (size_t k = 0; k < losses.size(); ++k) EXPECT_NEAR(losses[k], single_losses[k], 1e-4) << "step " << k;
  std::cout << "max |2 ranks - 1 process| = " << max_diff << "\n" << out0 << single.output();
}

// Rank 1 is killed with SIGKILL mid-run: rank 0 must exit non-zero within the timeout, naming rank 1.
TEST(Dist, KilledRankMakesTheOtherExitWithAMessage) {
  for (const int victim : {1, 0}) {
    SCOPED_TRACE("victim rank " + std::to_string(victim));
    rt::TempDir dir;
    const int port = free_port();
    std::vector<Proc> procs;
    for (int r = 0; r < 2; ++r)
      procs.push_back(launch({"loop", "10000"}, r, 2, port, dir.str("rank" + std::to_string(r) + ".log")));
    for (auto& p : procs) ASSERT_TRUE(wait_for_text(p, "ready", Clock::now() + std::chrono::seconds(60))) << p.output();
    Proc& dead = procs[static_cast<size_t>(victim)];
    Proc& survivor = procs[static_cast<size_t>(1 - victim)];
    kill(dead.pid, SIGKILL);
    const auto killed_at = Clock::now();
    wait_until(dead, killed_at + std::chrono::seconds(5));
    // Collective timeout 10 s + failure grace 2 s, plus slack for a loaded machine.
    ASSERT_TRUE(wait_until(survivor, killed_at + std::chrono::seconds(30)));
    const double took = std::chrono::duration<double>(Clock::now() - killed_at).count();
    const std::string out = survivor.output();
    EXPECT_NE(survivor.exit_code, 0) << out;
    EXPECT_NE(out.find("rank " + std::to_string(victim) + " stopped responding"), std::string::npos) << out;
    EXPECT_NE(out.find("rank " + std::to_string(1 - victim) + ": distributed all_reduce"), std::string::npos) << out;
    EXPECT_LT(took, 20.0) << out;
  }
}

// Rank 1 hangs (SIGSTOP, alive but silent): rank 0 gives up after the collective timeout (3 s) and
// names rank 1.
TEST(Dist, HungRankMakesTheOtherTimeOut) {
  rt::TempDir dir;
  const int port = free_port();
  std::vector<Proc> procs;
  for (int r = 0; r < 2; ++r) procs.push_back(launch({"loop", "3000"}, r, 2, port, dir.str("rank" + std::to_string(r) + ".log")));
  for (auto& p : procs) ASSERT_TRUE(wait_for_text(p, "ready", Clock::now() + std::chrono::seconds(60))) << p.output();
  kill(procs[1].pid, SIGSTOP);
  const auto stopped_at = Clock::now();
  const bool exited = wait_until(procs[0], stopped_at + std::chrono::seconds(30));
  const double took = std::chrono::duration<double>(Clock::now() - stopped_at).count();
  kill(procs[1].pid, SIGKILL);
  wait_until(procs[1], Clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(exited);
  const std::string out = procs[0].output();
  EXPECT_NE(procs[0].exit_code, 0) << out;
  EXPECT_NE(out.find("rank 1 stopped responding"), std::string::npos) << out;
  EXPECT_GE(took, 2.5) << "failed before the timeout\n" << out;
  EXPECT_LT(took, 20.0) << out;
}

// A rendezvous that never completes (rank 1 never starts) fails within the timeout, naming the address.
TEST(Dist, MissingRankFailsTheRendezvous) {
  rt::TempDir dir;
  Proc alone = launch({"loop", "2000"}, 0, 2, free_port(), dir.str("rank0.log"));
  ASSERT_TRUE(wait_until(alone, Clock::now() + std::chrono::seconds(30)));
  const std::string out = alone.output();
  EXPECT_NE(alone.exit_code, 0) << out;
  EXPECT_NE(out.find("rendezvous at 127.0.0.1:"), std::string::npos) << out;
}
