// Run directories are the user's data (src/checkpoint/run_dir.h), through the CLI on the synthetic
// corpus: a second run into a directory with checkpoints is refused (--overwrite starts over), a
// resume from an earlier checkpoint moves the later ones aside so `--resume auto` and pruning follow
// the history being continued, a directory whose checkpoints are all damaged is not overwritten, one
// process at a time (a stale lock is taken over), a file-size limit is an error and not a kill.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <thread>

#include "run_dir_util.h"
#include "test_util.h"

using namespace roformer::test;
namespace fs = std::filesystem;

namespace {

class RunDirTest : public TinyRunTest {
 protected:
  std::string ckpt(const std::string& run, int64_t step) { return checkpoint_dir(tmp_.str(run), step); }
  std::vector<std::string> names(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST_F(RunDirTest, ASecondRunIntoADirectoryWithCheckpointsIsRefusedUnlessOverwrite) {
  ASSERT_EQ(train("r").exit_code, 0);
  const std::string model = read_file(ckpt("r", 12) + "/model.safetensors");
  auto again = train("r", "--set train.steps=6");
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("already holds 4 checkpoint(s)"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("--resume auto"), std::string::npos) << again.output;
  EXPECT_EQ(read_file(ckpt("r", 12) + "/model.safetensors"), model) << "nothing was touched";
  EXPECT_EQ(read_metrics(tmp_.str("r")).size(), 4u);

  // One line says what --overwrite deleted, counted, on the console and in the new run's train.log.
  const std::string earlier_metrics = read_file(tmp_.str("r/metrics.jsonl"));
  const std::string said = "--overwrite: deleted 4 checkpoint(s) (step_00000003, step_00000006, step_00000009, "
                           "step_00000012), metrics.jsonl (" +
                           std::to_string(std::count(earlier_metrics.begin(), earlier_metrics.end(), '\n')) +
                           " record(s)) and 1 TensorBoard event file(s) of the earlier run in " + tmp_.str("r");
  auto over = train("r", "--set train.steps=6 --overwrite");
  ASSERT_EQ(over.exit_code, 0) << over.output;
  EXPECT_NE(over.output.find(said), std::string::npos) << over.output;
  const std::string log = read_file(tmp_.str("r/train.log"));
  EXPECT_NE(log.find(said), std::string::npos) << log;
  EXPECT_LT(log.find(said), log.rfind("run directory " + tmp_.str("r"))) << "said in the new run's part of the log";
  EXPECT_EQ(names(tmp_.str("r/checkpoints")), (std::vector<std::string>{"latest", "step_00000003", "step_00000006"}));
  EXPECT_EQ(read_metrics(tmp_.str("r")).size(), 2u) << "metrics of the new run only";
  EXPECT_EQ(train("r", "--resume auto --overwrite").exit_code, 1);
}

TEST_F(RunDirTest, ResumingAnEarlierCheckpointMovesTheLaterOnesAsideAndAutoFollowsTheNewHistory) {
  ASSERT_EQ(train("r").exit_code, 0);
  auto r = run_roformer("train --run-dir " + tmp_.str("r") + " --resume " + ckpt("r", 6) +
                        " --set train.steps=9 --set optimizer.lr=1e-2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("later checkpoints (step_00000009, step_00000012)"), std::string::npos) << r.output;
  const auto listing = names(tmp_.str("r/checkpoints"));
  ASSERT_EQ(listing.size(), 5u);  // abandoned-..., latest, step 3, 6, 9 (the new 9)
  EXPECT_EQ(listing[0].rfind("abandoned-step_00000006-", 0), 0u) << listing[0];
  EXPECT_EQ(names(tmp_.str("r/checkpoints/" + listing[0])),
            (std::vector<std::string>{"step_00000009", "step_00000012"}));
  EXPECT_EQ(read_file(tmp_.str("r/checkpoints/latest")), "step_00000009\n");
  // auto continues the new history (step 9), not the abandoned step 12; keep_last 1 never deletes
  // the checkpoint just written.
  auto cont = run_roformer("train --run-dir " + tmp_.str("r") + " --resume auto --set train.steps=12 "
                           "--set checkpoint.keep_last=1");
  ASSERT_EQ(cont.exit_code, 0) << cont.output;
  EXPECT_NE(cont.output.find("resumed from " + ckpt("r", 9) + " at step 9"), std::string::npos) << cont.output;
  EXPECT_EQ(names(tmp_.str("r/checkpoints")), (std::vector<std::string>{listing[0], "latest", "step_00000012"}));
}

TEST_F(RunDirTest, AutoResumeWithEveryCheckpointDamagedChangesNothing) {
  ASSERT_EQ(train("r", "--set train.steps=6").exit_code, 0);
  for (int64_t step : {3, 6}) write_file(ckpt("r", step) + "/model.safetensors", "damaged");
  auto r = run_roformer("train -c " + config_ + " --run-dir " + tmp_.str("r") + " --resume auto");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("none of the 2 checkpoint(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step_00000003: model.safetensors"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step_00000006: model.safetensors"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(ckpt("r", 6) + "/model.safetensors"), "damaged") << "not overwritten";
  EXPECT_EQ(read_metrics(tmp_.str("r")).size(), 2u);
}

TEST_F(RunDirTest, OneProcessPerRunDirectoryAndAStaleLockIsTakenOver) {
  const std::string run = tmp_.str("r");
  auto pid_file = tmp_.str("pid");
  // A long run in the background; its lock file names it once it holds the lock.
  std::thread first([&] {
    run_command("echo $$ > " + pid_file + "; exec " + roformer_bin() + " train -c " + config_ + " --run-dir " + run +
                " --set train.steps=1000000 --set checkpoint.every=0");
  });
  for (int i = 0; i < 300 && read_file(run + "/.lock").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string holder = read_file(run + "/.lock");
  ASSERT_FALSE(holder.empty()) << "the first process never took the lock";
  EXPECT_EQ(holder + "\n", read_file(pid_file));

  auto second = train("r", "--set train.steps=3");
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_NE(second.output.find("is in use by another roformer process (pid " + holder + ")"), std::string::npos)
      << second.output;

  ::kill(std::stoi(holder), SIGKILL);  // dies holding the lock: the kernel releases it, the pid stays
  first.join();
  auto third = train("r", "--set train.steps=3");
  EXPECT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("process " + holder + " held it and ended without releasing it"), std::string::npos)
      << third.output;
  EXPECT_EQ(read_file(run + "/.lock"), "") << "a clean exit leaves no process id";
}

TEST_F(RunDirTest, AFileSizeLimitIsAnErrorNotAKill) {
  // 16 KiB per file: some write of the run fails. Killed by SIGXFSZ the exit code would be 128 + 25
  // and nothing said; ignored, the failed write is an error message and exit 1.
  auto r = run_command("ulimit -f 16; " + roformer_bin() + " train -c " + config_ + " --run-dir " + tmp_.str("r") +
                       " --set train.steps=3");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[error] cannot write"), std::string::npos) << r.output;
}

TEST_F(RunDirTest, EmptyRunDirAndForeignCheckpointsAreRefused) {
  auto empty = run_roformer("train -c " + config_ + " --run-dir \"\"");
  EXPECT_EQ(empty.exit_code, 1) << empty.output;
  EXPECT_NE(empty.output.find("--run-dir is empty"), std::string::npos) << empty.output;

  ASSERT_EQ(train("a", "--set train.steps=3").exit_code, 0);
  ASSERT_EQ(train("b", "--set train.steps=3").exit_code, 0);
  auto mixed = run_roformer("train --run-dir " + tmp_.str("b") + " --resume " + ckpt("a", 3));
  EXPECT_EQ(mixed.exit_code, 1) << mixed.output;
  EXPECT_NE(mixed.output.find("is a checkpoint of another run directory"), std::string::npos) << mixed.output;
  // Into an empty directory it is allowed: a branch of run a.
  auto branch = run_roformer("train --run-dir " + tmp_.str("c") + " --resume " + ckpt("a", 3) + " --set train.steps=6");
  EXPECT_EQ(branch.exit_code, 0) << branch.output;
}

}  // namespace
