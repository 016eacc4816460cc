// src/dist pieces that need no second process: launcher environment parsing (torchrun, SLURM, none,
// every bad-input message), and the GradientReducer's buckets and sync rules in a world of one.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "dist/env.h"
#include "dist/gradient_reducer.h"
#include "dist/process_group.h"

using namespace roformer::dist;
using roformer::Error;

namespace {

DistEnv detect(const std::map<std::string, std::string>& vars) {
  return detect_dist_env([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    detect(vars);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected roformer::Error";
  return "";
}

const std::map<std::string, std::string> kTorchrun = {
    {"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}};

}  // namespace

TEST(DistEnv, NoVariablesIsASingleProcess) {
  const DistEnv env = detect({});
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_FALSE(env.distributed());
  EXPECT_EQ(env.launcher, "none");
}

TEST(DistEnv, Torchrun) {
  const DistEnv env = detect(kTorchrun);
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_TRUE(env.distributed());
  EXPECT_FALSE(env.is_main());
}

TEST(DistEnv, TorchrunErrorsNameTheVariable) {
  for (const char* missing : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) {
    auto vars = kTorchrun;
    vars.erase(missing);
    const std::string msg = error_of(vars);
    EXPECT_NE(msg.find(std::string("environment variable ") + missing + " is not set"), std::string::npos) << msg;
    EXPECT_NE(msg.find("torchrun"), std::string::npos) << msg;
  }
  auto vars = kTorchrun;
  vars["RANK"] = "8";
  EXPECT_NE(error_of(vars).find("RANK=8 is not below WORLD_SIZE=8"), std::string::npos);
  vars = kTorchrun;
  vars["MASTER_PORT"] = "70000";
  EXPECT_NE(error_of(vars).find("MASTER_PORT=70000 is not an integer in [1, 65535]"), std::string::npos);
  vars = kTorchrun;
  vars["WORLD_SIZE"] = "4x";
  EXPECT_NE(error_of(vars).find("WORLD_SIZE=4x is not an integer"), std::string::npos);
}

TEST(DistEnv, Slurm) {
  std::map<std::string, std::string> vars = {{"SLURM_PROCID", "5"},         {"SLURM_NTASKS", "16"},
                                             {"SLURM_LOCALID", "1"},        {"MASTER_ADDR", "gpu-a01"},
                                             {"MASTER_PORT", "29400"},      {"SLURM_NODELIST", "gpu-a[01-04]"}};
  const DistEnv env = detect(vars);
  EXPECT_EQ(env.launcher, "slurm");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 16);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "gpu-a01");
  EXPECT_EQ(env.master_port, 29400);
  // MASTER_ADDR is required for SLURM, with a hint saying how to set it.
  vars.erase("MASTER_ADDR");
  const std::string msg = error_of(vars);
  EXPECT_NE(msg.find("environment variable MASTER_ADDR is not set"), std::string::npos) << msg;
  EXPECT_NE(msg.find("scontrol show hostnames"), std::string::npos) << msg;
  // A one-task step is a single process and needs nothing else.
  EXPECT_FALSE(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).distributed());
  // torchrun's variables win inside an allocation.
  auto both = kTorchrun;
  both.insert(vars.begin(), vars.end());
  EXPECT_EQ(detect(both).launcher, "torchrun");
}

TEST(GradientReducerLocal, BucketsInReverseOrderWithinTheCap) {
  ProcessGroup group(DistEnv{}, torch::kCPU);
  EXPECT_EQ(group.backend(), "local");
  // 4-byte floats of 1000, 100, 300 and 2000 elements (4000, 400, 1200, 8000 bytes); a cap of 4500 bytes.
  std::vector<torch::Tensor> params;
  for (int64_t n : {1000, 100, 300, 2000}) params.push_back(torch::zeros({n}, torch::requires_grad()));
  GradientReducer reducer(group, params, {4500.0 / (1024.0 * 1024.0)});
  // Reverse order: [3] alone (8000 B > cap), then [2, 1] (1600 B), then [0] (1600 + 4000 > cap).
  const std::vector<std::vector<int64_t>> expected = {{3}, {2, 1}, {0}};
  EXPECT_EQ(reducer.bucket_parameters(), expected);
}

TEST(GradientReducerLocal, AccumulatesAndRejectsTwoSynchronizingBackwards) {
  ProcessGroup group(DistEnv{}, torch::kCPU);
  auto w = torch::ones({3}, torch::requires_grad());
  auto v = torch::ones({2}, torch::requires_grad());
  GradientReducer reducer(group, {w, v});
  reducer.set_sync(false);
  (w * 2).sum().backward();
  reducer.set_sync(true);
  ((w * 3).sum() + v.sum()).backward();
  reducer.finish();  // a world of one: the sum over ranks is the local accumulation
  EXPECT_TRUE(torch::equal(w.grad(), torch::full({3}, 5.0)));
  EXPECT_TRUE(torch::equal(v.grad(), torch::ones({2})));
  EXPECT_EQ(reducer.buckets_started_in_backward(), 1);  // one bucket, started by the last hook
  // A parameter unused in the last backward still counts (its accumulated .grad is kept).
  w.mutable_grad().zero_();
  v.mutable_grad().zero_();
  reducer.set_sync(false);
  v.sum().backward();
  reducer.set_sync(true);
  w.sum().backward();
  reducer.finish();
  EXPECT_TRUE(torch::equal(v.grad(), torch::ones({2})));
  EXPECT_EQ(reducer.buckets_started_in_backward(), 0);  // v's hook never fired: started in finish()
  // Two synchronizing backwards without finish() in between is a usage error.
  w.sum().backward();
  try {
    w.sum().backward();
    ADD_FAILURE() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("arrived twice in one synchronizing step"), std::string::npos) << e.what();
  }
}

TEST(ProcessGroupLocal, WorldOfOneIsTheIdentityAndValidates) {
  ProcessGroup group(DistEnv{}, torch::kCPU);
  auto t = torch::tensor({1.0, 2.0});
  group.all_reduce_sum(t);
  group.barrier();
  EXPECT_TRUE(torch::equal(t, torch::tensor({1.0, 2.0})));
  EXPECT_EQ(group.all_gather(4.5), std::vector<double>{4.5});
  DistEnv bad;
  bad.rank = 2;
  bad.world_size = 2;
  EXPECT_THROW({ ProcessGroup g(bad, torch::kCPU); }, Error);
  DistEnv two;
  two.world_size = 2;
  two.master_addr = "127.0.0.1";
  two.master_port = 1;
  ProcessGroupOptions o;
  o.backend = "nccl";
  try {
    ProcessGroup g(two, torch::kCPU, o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the nccl backend needs a CUDA device"), std::string::npos) << e.what();
  }
}

// ProcessGroupOptions::one_rank_backend (issue 51's test switch; tests/gpu/test_gpu_dist runs NCCL
// with it): a world of one with its backend, gloo on the CPU here. Every collective goes through the
// backend (an asynchronous all-reduce returns a real work object), a sum over one rank leaves the
// values, and make_gradient_reducer now makes a reducer whose buckets are summed through it. The
// plain world of one makes none.
TEST(ProcessGroupLocal, OneRankBackendRunsTheCollectivesThroughTheBackend) {
  ProcessGroup plain(DistEnv{}, torch::kCPU);
  EXPECT_FALSE(plain.communicates());
  auto p = torch::ones({3}, torch::requires_grad());
  EXPECT_EQ(make_gradient_reducer(plain, {p}, {}), nullptr);

  ProcessGroupOptions o;
  o.one_rank_backend = true;  // backend auto: gloo for the CPU
  ProcessGroup group(DistEnv{}, torch::kCPU, o);
  EXPECT_EQ(group.backend(), "gloo");
  EXPECT_TRUE(group.communicates());
  auto t = torch::tensor({1.0, 2.0});
  auto work = group.all_reduce_sum_async(t);
  ASSERT_TRUE(work) << "the all-reduce went through the backend";
  group.wait(work, "all_reduce");
  EXPECT_TRUE(torch::equal(t, torch::tensor({1.0, 2.0})));
  group.barrier();
  std::vector<torch::Tensor> b = {torch::tensor({3.0})};
  group.broadcast(b, 0);
  EXPECT_TRUE(torch::equal(b[0], torch::tensor({3.0})));
  EXPECT_EQ(group.all_gather(4.5), std::vector<double>{4.5});

  auto w = torch::ones({1000}, torch::requires_grad()), v = torch::ones({10}, torch::requires_grad());
  auto reducer = make_gradient_reducer(group, {w, v}, {1000.0 / (1024.0 * 1024.0)});  // two buckets
  ASSERT_NE(reducer, nullptr);
  EXPECT_EQ(reducer->num_buckets(), 2);
  reducer->set_sync(false);
  (w * 2).sum().backward();
  reducer->set_sync(true);
  ((w * 3).sum() + (v * 4).sum()).backward();
  reducer->finish();
  EXPECT_TRUE(torch::equal(w.grad(), torch::full({1000}, 5.0)));
  EXPECT_TRUE(torch::equal(v.grad(), torch::full({10}, 4.0)));
  EXPECT_EQ(reducer->buckets_started_in_backward(), 2);
}
