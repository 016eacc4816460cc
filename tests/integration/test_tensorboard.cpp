// TensorBoard event files of real runs (src/train/tensorboard_sink.h), read by TensorBoard's own
// code through tests/python/check_tensorboard.py: every tag equals metrics.jsonl, the config and the
// HParams session are there, a run killed after step 8 and resumed from its checkpoint at step 4
// reads as one curve, the HParams tab compares two runs, and a flipped checksum is what TensorBoard
// rejects. Without Python: logging.tensorboard off writes nothing, --overwrite deletes the earlier
// event files, a directory in the way is an error naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "run_dir_util.h"
#include "tensorboard/event_file.h"
#include "test_util.h"

using namespace roformer::test;
namespace fs = std::filesystem;

namespace {

class TensorBoardRuns : public ::testing::Test {
 protected:
  // Two runs under one folder, trained once for the suite: "rotary" straight through, and
  // "absolute" killed in the middle of its step-8 save (after logging and evaluating step 8) and
  // resumed with --resume auto from its checkpoint at step 4.
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    write_file(tmp_->str("train.txt"), synthetic_corpus(40, 4, 1));
    write_file(tmp_->str("valid.txt"), synthetic_corpus(6, 4, 2));
    write_file(tmp_->str("c.yaml"), tiny_run_yaml(tmp_->str("train.txt")));
    rotary_ = train("runs/rotary", "--set model.position=rotary");
    killed_ = run_command("ROFORMER_FAULT_KILL_IN_SAVE_AT_STEP=8 " +
                          command("runs/absolute", "--set model.position=absolute"));
    resumed_ = train("runs/absolute", "--set model.position=absolute --resume auto");
  }
  static void TearDownTestSuite() { delete tmp_; }
  // Evaluation and a checkpoint every 4 steps, a log line every 2.
  static std::string command(const std::string& run, const std::string& extra) {
    return roformer_bin() + " train -c " + tmp_->str("c.yaml") + " --run-dir " + tmp_->str(run) +
           " --set data.valid_files=[" + tmp_->str("valid.txt") + "] --set checkpoint.every=4 --set logging.every=2"
           " --set eval.every=4 --set eval.max_sequences=16 --set eval.batch_size=8 " + extra;
  }
  static CommandResult train(const std::string& run, const std::string& extra) { return run_command(command(run, extra)); }
  static CommandResult check(const std::string& args) {
    return run_command(python() + " " + source_dir() + "/tests/python/check_tensorboard.py " + args);
  }
  void SetUp() override {
    ASSERT_EQ(rotary_.exit_code, 0) << rotary_.output;
    ASSERT_EQ(killed_.exit_code, 128 + 9) << "killed mid-save at step 8:\n" << killed_.output;
    ASSERT_EQ(resumed_.exit_code, 0) << resumed_.output;
  }
  static void require_python() {
    if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  }

  static TempDir* tmp_;
  static CommandResult rotary_, killed_, resumed_;
};
TempDir* TensorBoardRuns::tmp_ = nullptr;
CommandResult TensorBoardRuns::rotary_, TensorBoardRuns::killed_, TensorBoardRuns::resumed_;

TEST_F(TensorBoardRuns, EveryTagHoldsTheMetricsValuesAtTheSameSteps) {
  EXPECT_EQ(roformer::tensorboard::list_event_files(tmp_->str("runs/rotary")).size(), 1u);
  EXPECT_EQ(read_metrics(tmp_->str("runs/rotary")).size(), 6u);
  EXPECT_EQ(read_metrics(tmp_->str("runs/rotary"), "eval").size(), 3u);
  require_python();
  auto r = check("run " + tmp_->str("runs/rotary"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train/loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval/top5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ended with success"), std::string::npos) << r.output;
  std::cout << r.output;
}

TEST_F(TensorBoardRuns, AKilledRunResumedFromAnEarlierCheckpointReadsAsOneCurve) {
  EXPECT_NE(resumed_.output.find("resumed from"), std::string::npos) << resumed_.output;
  EXPECT_NE(resumed_.output.find("at step 4"), std::string::npos) << resumed_.output;
  EXPECT_EQ(roformer::tensorboard::list_event_files(tmp_->str("runs/absolute")).size(), 2u)
      << "one file per process start";
  EXPECT_EQ(read_metrics(tmp_->str("runs/absolute")).size(), 6u) << "metrics.jsonl: steps 2..12 once each";
  require_python();
  auto r = check("run " + tmp_->str("runs/absolute") + " --restarted");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("were dropped by TensorBoard's SessionLog START purge"), std::string::npos) << r.output;
  std::cout << r.output;
}

TEST_F(TensorBoardRuns, TheHParamsTabComparesTheRuns) {
  require_python();
  auto r = check("hparams " + tmp_->str("runs") + " rotary absolute");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rotary: model.position=rotary"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("absolute: model.position=absolute"), std::string::npos) << r.output;
  std::cout << r.output;
}

TEST_F(TensorBoardRuns, AFlippedChecksumIsWhatTensorBoardRejects) {
  require_python();
  const std::string dir = tmp_->str("runs/rotary");
  const auto files = roformer::tensorboard::list_event_files(dir);
  ASSERT_EQ(files.size(), 1u);
  auto r = check("corrupt " + dir + "/" + files[0]);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::cout << r.output;
}

class TensorBoardOptions : public TinyRunTest {
 protected:
  // 3 steps, a log line each.
  CommandResult train(const std::string& run, const std::string& extra = "") {
    return TinyRunTest::train(run, "--set train.steps=3 --set logging.every=1 " + extra);
  }
};

TEST_F(TensorBoardOptions, OffWritesNoEventFiles) {
  auto r = train("r", "--set logging.tensorboard=false");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(roformer::tensorboard::list_event_files(tmp_.str("r")).empty());
  EXPECT_FALSE(fs::exists(tmp_.str("r/tensorboard")));
  EXPECT_EQ(read_metrics(tmp_.str("r")).size(), 3u) << "metrics.jsonl as always";
}

TEST_F(TensorBoardOptions, OverwriteDeletesTheEarlierEventFilesAndAFreshRunWarnsOfThem) {
  ASSERT_EQ(train("r").exit_code, 0);
  const std::string dir = tmp_.str("r");  // the event files lie in the run directory
  const auto before = roformer::tensorboard::list_event_files(dir);
  ASSERT_EQ(before.size(), 1u);
  write_file(dir + "/notes.txt", "mine");
  auto over = train("r", "--overwrite");
  ASSERT_EQ(over.exit_code, 0) << over.output;
  EXPECT_NE(over.output.find("and 1 TensorBoard event file(s) of the earlier run"), std::string::npos) << over.output;
  const auto after = roformer::tensorboard::list_event_files(dir);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after[0], before[0]) << "the new run's file only";
  EXPECT_EQ(read_file(dir + "/notes.txt"), "mine") << "only event files are deleted";

  // Event files without checkpoints (an earlier run killed before its first save): kept, and said.
  // Here in tensorboard/, where a run begun before 2026-11-28 kept them: the run writes beside them.
  write_file(tmp_.str("s/tensorboard/events.out.tfevents.1000000000.h.1"), "");
  write_file(tmp_.str("s/.lock"), "");
  auto fresh = train("s");
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_NE(fresh.output.find("already holds 1 event file(s) of an earlier run"), std::string::npos) << fresh.output;
  EXPECT_EQ(roformer::tensorboard::list_event_files(tmp_.str("s/tensorboard")).size(), 2u);
  EXPECT_TRUE(roformer::tensorboard::list_event_files(tmp_.str("s")).empty()) << "one folder of event files a run";

  // --overwrite starts over even where there is no checkpoint: the metrics and event files go too.
  write_file(tmp_.str("t/tensorboard/events.out.tfevents.1000000000.h.1"), "");
  write_file(tmp_.str("t/metrics.jsonl"), "{}\n{}\n");
  write_file(tmp_.str("t/.lock"), "");
  auto over_fresh = train("t", "--overwrite");
  ASSERT_EQ(over_fresh.exit_code, 0) << over_fresh.output;
  EXPECT_NE(over_fresh.output.find("--overwrite: deleted metrics.jsonl (2 record(s)) and 1 TensorBoard event file(s)"),
            std::string::npos) << over_fresh.output;
  EXPECT_EQ(roformer::tensorboard::list_event_files(tmp_.str("t/tensorboard")).size(), 1u);
}

// TensorBoard names a run by the folder of its event files: the run directory's own name, whatever
// else the directory holds; a file named tensorboard (no folder) is not where they go.
TEST_F(TensorBoardOptions, TheEventFilesLieInTheRunDirectory) {
  write_file(tmp_.str("r/tensorboard"), "not a directory");
  write_file(tmp_.str("r/.lock"), "");  // the run directory of an earlier run
  auto r = train("r");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(roformer::tensorboard::list_event_files(tmp_.str("r")).size(), 1u);
  EXPECT_EQ(read_file(tmp_.str("r/tensorboard")), "not a directory");
}

}  // namespace
