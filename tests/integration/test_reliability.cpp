// The second and third (issue 40) reliability sweeps, where the user meets it (the CLI): a user's files are never
// overwritten or mixed with ours, a failed command leaves the old state as it was, and the
// environment's refusals (over-long paths, a full device, thread limits, impossible settings) end
// in exit 1 with one line, never in an internal error or an abort.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "run_dir_util.h"
#include "test_util.h"

namespace roformer::test {
namespace {

namespace fs = std::filesystem;

// The user-error shape: exit 1, an error line, and no internal error.
void expect_user_error(const CommandResult& r, const std::string& says) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

// Every file below `dir` with its bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_file(e.path().string());
  return out;
}

std::string long_path() { return "/tmp/" + std::string(300, 'a') + "/x"; }

class Reliability : public TinyRunTest {
 protected:
  // Each `--set` override (the case's first) refused at validation with a message holding the second.
  void expect_settings_refused(const std::vector<std::pair<std::string, std::string>>& cases) {
    for (const auto& [set, says] : cases) {
      SCOPED_TRACE(set);
      expect_user_error(run_roformer("config print -c " + config_ + " --set " + set), says);
    }
  }
};

TEST_F(Reliability, ARunDirectoryOfTheUsersOwnFilesIsRefusedAndLeftAsItWas) {
  // The user's folder holds the config (comments and all) and a log of their own.
  const std::string dir = tmp_.str("mine");
  fs::create_directories(dir);
  write_file(dir + "/config.yaml", "# my notes\n" + tiny_run_yaml(tmp_.str("train.txt")));
  write_file(dir + "/train.log", "my log\n");
  const auto before = snapshot(dir);
  const auto r = run_command("cd " + dir + " && " + roformer_bin() + " train -c config.yaml --run-dir .");
  expect_user_error(r, "holds files no roformer run wrote (config.yaml, train.log)");
  EXPECT_EQ(snapshot(dir), before);
  expect_user_error(train("mine"), "holds files no roformer run wrote");  // -c from elsewhere: the same
  EXPECT_EQ(snapshot(dir), before);
  EXPECT_FALSE(fs::exists(dir + "/.lock"));
}

TEST_F(Reliability, TheRunsOwnConfigYamlIsNotTakenAsTheInputItWouldRewrite) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  const std::string own = tmp_.str("run/config.yaml");
  const std::string text = read_file(own);
  const auto r = run_roformer("train -c " + own + " --run-dir " + tmp_.str("run") + " --resume auto");
  expect_user_error(r, "is the run directory's own config.yaml");
  EXPECT_EQ(read_file(own), text);
  // A run directory the run created takes the next run as before.
  EXPECT_EQ(train("run", "--set train.steps=6 --resume auto").exit_code, 0);
}

TEST_F(Reliability, ANewRunRetrainsATokenizerLeftWithOtherSettings) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  const auto second = train("run", "--set train.steps=3 --set tokenizer.vocab_size=150 --overwrite");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("trained with other tokenizer.* settings"), std::string::npos) << second.output;
  // 150 pieces now, in the run's tokenizer and in what its checkpoint records.
  const auto vocab = read_file(tmp_.str("run/tokenizer/tokenizer.vocab"));
  EXPECT_EQ(std::count(vocab.begin(), vocab.end(), '\n'), 150);
  EXPECT_EQ(read_file(checkpoint_dir(tmp_.str("run"), 3) + "/tokenizer.model"),
            read_file(tmp_.str("run/tokenizer/tokenizer.model")));
  // The same settings again: the tokenizer is reused, not trained a third time.
  const auto third = train("run", "--set train.steps=3 --set tokenizer.vocab_size=150 --overwrite");
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_EQ(third.output.find("training a unigram tokenizer"), std::string::npos) << third.output;
}

TEST_F(Reliability, PrepareAndTokenizerTrainNeverReplaceWhatTheyDidNotWrite) {
  const std::string tok = tmp_.str("tok");
  ASSERT_EQ(run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 120 --out " + tok +
                         " --no-progress").exit_code, 0);
  const std::string model = read_file(tok + "/tokenizer.model");
  expect_user_error(run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 130 --out " + tok +
                                 " --no-progress"),
                    "already holds a tokenizer");
  EXPECT_EQ(read_file(tok + "/tokenizer.model"), model);
  ASSERT_EQ(run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 130 --out " + tok +
                         " --no-progress --force").exit_code, 0);
  EXPECT_NE(read_file(tok + "/tokenizer.model"), model);

  // A folder of the user's, with a meta.json of its own: refused, untouched, --force or not.
  const std::string mine = tmp_.str("mine");
  fs::create_directories(mine);
  write_file(mine + "/meta.json", "my notes\n");
  write_file(mine + "/other.txt", "keep\n");
  const auto before = snapshot(mine);
  const std::string prepare = "prepare --tokenizer " + tok + "/tokenizer.model --input " + tmp_.str("train.txt") +
                              " --no-progress --out ";
  expect_user_error(run_roformer(prepare + mine), "is not empty and holds no prepared corpus (meta.json, other.txt)");
  expect_user_error(run_roformer(prepare + mine + " --force"), "holds no prepared corpus");
  EXPECT_EQ(snapshot(mine), before);

  // A prepared corpus is replaced only with --force.
  const std::string corpus = tmp_.str("corpus");
  ASSERT_EQ(run_roformer(prepare + corpus).exit_code, 0);
  expect_user_error(run_roformer(prepare + corpus), "already holds a prepared corpus; pass --force");
  const auto again = run_roformer(prepare + corpus + " --force");
  EXPECT_EQ(again.exit_code, 0) << again.output;
}

TEST_F(Reliability, AFailedPrepareLeavesTheOldCorpusAsItWasAndOddNamesAreStoredEscaped) {
  const std::string tok = tmp_.str("tok");
  ASSERT_EQ(run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 120 --out " + tok +
                         " --no-progress").exit_code, 0);
  const std::string prepare = "prepare --tokenizer " + tok + "/tokenizer.model --no-progress --force --out " +
                              tmp_.str("corpus") + " --input ";
  ASSERT_EQ(run_roformer(prepare + tmp_.str("train.txt")).exit_code, 0);
  const auto before = snapshot(tmp_.str("corpus"));
  // A damaged .gz read after the first file was encoded: the run fails, the old corpus stays.
  write_file(tmp_.str("damaged.txt.gz"), std::string("\x1f\x8b\x08\x00", 4) + std::string(64, 'x'));
  const auto failed = run_roformer(prepare + tmp_.str("train.txt") + " " + tmp_.str("damaged.txt.gz"));
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_EQ(snapshot(tmp_.str("corpus")), before);

  // A file name that is not UTF-8 (the earlier failure, after the old corpus was gone): prepared,
  // and meta.json stays valid JSON naming it with \xNN escapes.
  const std::string odd = tmp_.str(std::string("odd-\xff\xfe.txt"));
  fs::copy_file(tmp_.str("train.txt"), odd);
  const auto r = run_roformer(prepare + "'" + odd + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto meta = nlohmann::json::parse(read_file(tmp_.str("corpus/meta.json")));
  EXPECT_NE(meta["inputs"][0].get<std::string>().find("odd-\\xFF\\xFE.txt"), std::string::npos) << meta.dump();
}

TEST_F(Reliability, OverLongPathsAreUserErrorsInEveryCommand) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  const std::string p = long_path();
  for (const std::string& args :
       {"eval --checkpoint " + p, "inspect " + p, "fill-mask --checkpoint " + p + " 'a [MASK]'",
        "prepare --tokenizer " + p + " --input " + tmp_.str("train.txt") + " --out " + tmp_.str("p"),
        "prepare --tokenizer " + tmp_.str("run/tokenizer/tokenizer.model") + " --input " + p + " --out " + tmp_.str("p"),
        "train -c " + config_ + " --run-dir " + tmp_.str("run") + " --resume " + p,
        "train -c " + config_ + " --run-dir " + tmp_.str("fresh") + " --init-from " + p}) {
    SCOPED_TRACE(args.substr(0, 40));
    const auto r = run_roformer(args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  }
}

TEST_F(Reliability, OutputToAFullDeviceIsAFailedCommand) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  for (const std::string& args : {std::string("config defaults"), std::string("--help"),
                                  "config print -c " + config_, "inspect " + tmp_.str("run"),
                                  "eval --checkpoint " + tmp_.str("run") + " --data " + tmp_.str("train.txt") +
                                      " --max-sequences 4 --json"}) {
    SCOPED_TRACE(args.substr(0, 40));
    const auto r = run_command("{ " + roformer_bin() + " " + args + " > /dev/full; }");  // stderr still read
    expect_user_error(r, "no space left on the device");
  }
}

TEST_F(Reliability, ThreadCountsAndStepSizesBeyondReasonAreRefusedAtValidation) {
  const std::string tok_args = "--input " + tmp_.str("train.txt") + " --vocab-size 120 --no-progress --out ";
  ASSERT_EQ(run_roformer("tokenizer train " + tok_args + tmp_.str("tok")).exit_code, 0);
  expect_user_error(run_roformer("prepare --tokenizer " + tmp_.str("tok/tokenizer.model") + " --input " +
                                 tmp_.str("train.txt") + " --out " + tmp_.str("p") + " --threads 100000"),
                    "--threads 100000 is out of range");
  EXPECT_FALSE(fs::exists(tmp_.str("p")));
  expect_settings_refused({{"data.num_workers=100000", "data.num_workers"},
                           {"train.grad_accum=4611686018427387904", "tokens per optimizer step"},
                           {"train.batch_size=3000000000 --set train.grad_accum=4", "tokens per optimizer step"}});
  EXPECT_EQ(run_roformer("config print -c " + config_ + " --set data.num_workers=8").exit_code, 0);
}

TEST_F(Reliability, SettingsThatPredictNothingAreRefusedAndNothingIsReportedOverNoPredictions) {
  expect_settings_refused({{"masking.mask_prob=0.0001", "= 0 positions of a sequence"},
                           {"masking.mask_prob=0.01", "= 0 positions of a sequence"},
                           {"masking.mask_prob=0.001 --set masking.exact_count=false",
                            "most micro-batches would predict nothing"}});
  EXPECT_EQ(run_roformer("config print -c " + config_ + " --set masking.mask_prob=0.05").exit_code, 0);
  // eval of 1 sequence at a rate that picks none of its 30 positions: no figures, an error.
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  const auto r = run_roformer("eval --checkpoint " + tmp_.str("run") + " --data " + tmp_.str("train.txt") +
                              " --max-sequences 1 --mask-prob 0.001");
  expect_user_error(r, "no position was chosen for prediction");
  EXPECT_EQ(r.output.find("perplexity"), std::string::npos) << r.output;
}


TEST_F(Reliability, AFailedWriteOfTheLogOrMetricsStopsTheRunAtOnce) {
  // A file-size limit (ulimit -f, in KiB) stands in for a full disk: train.log and metrics.jsonl
  // (a record every step) reach it within a hundred steps, long before step 400. The tokenizer
  // (240 KB of SentencePiece tables) and the token shards are made beforehand, outside the limit.
  ASSERT_EQ(run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 120 --no-progress --out " +
                         tmp_.str("tok")).exit_code, 0);
  ASSERT_EQ(run_roformer("prepare --tokenizer " + tmp_.str("tok/tokenizer.model") + " --input " + tmp_.str("train.txt") +
                         " --no-progress --out " + tmp_.str("data")).exit_code, 0);
  const auto r = run_command("ulimit -f 24 && " + roformer_bin() + " train -c " + config_ + " --run-dir " +
                             tmp_.str("run") + " --set tokenizer.model=" + tmp_.str("tok/tokenizer.model") +
                             " --set data.train_files=[" + tmp_.str("data") + "]" +
                             " --set train.steps=400 --set logging.every=1 --set checkpoint.every=0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("training stopped at step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--resume auto"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("done:"), std::string::npos) << r.output;
  const auto metrics = read_metrics(tmp_.str("run"));
  ASSERT_FALSE(metrics.empty());
  EXPECT_LT(metrics.rbegin()->first, 200) << "the run went on after the failed write";
}

TEST_F(Reliability, AnUnwritableCheckpointFolderIsFoundBeforeTheFirstStep) {
  // A file where checkpoints/ belongs (a run directory an earlier run left).
  write_file(tmp_.str("run/.lock"), "");
  write_file(tmp_.str("run/checkpoints"), "in the way");
  const auto r = train("run");
  expect_user_error(r, "cannot write checkpoints into");
  EXPECT_EQ(r.output.find("step 3/"), std::string::npos) << "failed before training: " << r.output;
  if (::geteuid() == 0) GTEST_SKIP() << "a read-only folder binds no root process: the permission case needs a user";
  fs::remove(tmp_.str("run/checkpoints"));
  fs::create_directories(tmp_.str("run/checkpoints"));
  fs::permissions(tmp_.str("run/checkpoints"), fs::perms::owner_read | fs::perms::owner_exec);
  const auto ro = train("run");
  fs::permissions(tmp_.str("run/checkpoints"), fs::perms::owner_all);
  expect_user_error(ro, "cannot write checkpoints into");
}

TEST_F(Reliability, ASecondStopSignalDuringASaveLetsTheSaveComplete) {
  // The save of step 3 sleeps 3 s (fault injection); SIGTERM arrives twice within it.
  const std::string log = tmp_.str("log");
  const auto r = run_command(
      "ROFORMER_FAULT_SAVE_DELAY_MS=3000 " + roformer_bin() + " train -c " + config_ + " --run-dir " + tmp_.str("run") +
      " --set train.steps=200 > " + log + " 2>&1 & pid=$!; "
      "for i in $(seq 300); do grep -q 'the save of step 3 sleeps' " + log + " && break; sleep 0.1; done; "
      "kill -TERM $pid; sleep 0.5; kill -TERM $pid; wait $pid; echo \"exit $?\"");
  const std::string out = read_file(log);
  EXPECT_NE(r.output.find("exit 0"), std::string::npos) << r.output << out;
  EXPECT_NE(out.find("a checkpoint is being saved; the run stops as soon as it is complete"), std::string::npos) << out;
  EXPECT_NE(out.find("Resume with: roformer train"), std::string::npos) << out;
  const auto check = run_roformer("inspect " + checkpoint_dir(tmp_.str("run"), 3));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("ok (every file matches manifest.json)"), std::string::npos) << check.output;
}

TEST_F(Reliability, MessagesSayWhatIsActuallyWrong) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  // A run directory given to --resume, which takes a checkpoint.
  expect_user_error(run_roformer("train -c " + config_ + " --run-dir " + tmp_.str("run") + " --resume " + tmp_.str("run")),
                    "is a run directory, not a checkpoint: continue it with --run-dir");
  // An export whose weights hold NaN: named as such, not blamed on the learning rate.
  ASSERT_EQ(run_roformer("export --checkpoint " + tmp_.str("run") + " --format hf --out " + tmp_.str("hf")).exit_code, 0);
  std::string bytes = read_file(tmp_.str("hf/model.safetensors"));
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), sizeof header);
  bytes.replace(8 + header, 4, std::string(4, '\xff'));  // the first value of the first tensor: a NaN
  write_file(tmp_.str("hf/model.safetensors"), bytes);
  const auto r = run_roformer("train -c " + config_ + " --run-dir " + tmp_.str("fresh") + " --init-from " + tmp_.str("hf"));
  expect_user_error(r, "holds NaN or infinite values");
  EXPECT_EQ(r.output.find("optimizer.lr"), std::string::npos) << r.output;
}

TEST_F(Reliability, AFailedExportLeavesNoPartialExport) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  // model.safetensors (about 80 KB) is beyond the 40 KiB file-size limit: the export fails midway.
  const auto r = run_command("ulimit -f 40 && " + roformer_bin() + " export --checkpoint " + tmp_.str("run") +
                             " --format hf --out " + tmp_.str("hf"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(fs::exists(tmp_.str("hf"))) << "the folder the export created is gone";
  // Replacing an earlier export (--force): it stays whole when the new one fails.
  ASSERT_EQ(run_roformer("export --checkpoint " + tmp_.str("run") + " --format hf --out " + tmp_.str("hf")).exit_code, 0);
  const auto before = snapshot(tmp_.str("hf"));
  const auto again = run_command("ulimit -f 40 && " + roformer_bin() + " export --checkpoint " + tmp_.str("run") +
                                 " --format hf --force --out " + tmp_.str("hf"));
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_EQ(snapshot(tmp_.str("hf")), before);
}

TEST_F(Reliability, EvalRemovesTheFoldersInterruptedEvaluationsLeft) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  const std::string tmp = tmp_.str("t");
  const std::string dead = tmp + "/roformer-eval-999999999-1", live = tmp + "/roformer-eval-" + std::to_string(::getpid()) + "-1";
  write_file(dead + "/meta.json", "{}");  // a process id no system hands out: its process is gone
  write_file(live + "/meta.json", "{}");  // this test's own process is alive
  const auto r = run_command("TMPDIR=" + tmp + " " + roformer_bin() + " eval --checkpoint " + tmp_.str("run") +
                             " --data " + tmp_.str("train.txt") + " --max-sequences 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()), 1) << "eval's own folder is gone too";
}

TEST_F(Reliability, ReadersOfARunDirectoryWhileItPrunesChooseAgain) {
  // A run saving every step and keeping one checkpoint, read the whole time by eval given the run
  // directory: each read chooses the newest checkpoint, which the next save prunes.
  ASSERT_EQ(train("run", "--set train.steps=2").exit_code, 0);
  const std::string log = tmp_.str("train.log");
  const auto r = run_command(
      roformer_bin() + " train -c " + config_ + " --run-dir " + tmp_.str("run") + " --resume auto --set train.steps=400" +
      " --set checkpoint.every=1 --set checkpoint.keep_last=1 --set logging.every=50 > " + log + " 2>&1 & pid=$!; "
      "fails=0; reads=0; while kill -0 $pid 2>/dev/null; do reads=$((reads+1)); " + roformer_bin() + " eval --checkpoint " +
      tmp_.str("run") + " --data " + tmp_.str("train.txt") + " --max-sequences 2 > /dev/null 2>" + tmp_.str("eval.err") +
      " || { fails=$((fails+1)); cat " + tmp_.str("eval.err") + "; }; done; wait $pid; echo \"train exit $? reads $reads fails $fails\"");
  EXPECT_NE(r.output.find("train exit 0"), std::string::npos) << r.output << read_file(log);
  EXPECT_NE(r.output.find("fails 0"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("reads 0 "), std::string::npos) << r.output;
}

TEST_F(Reliability, AStopSignalInsideALongStepGivesItUpAndTheResumeRepeatsItExactly) {
  // Steps of 1000 micro-batches (seconds each); SIGTERM half a second into step 2.
  const std::string args = " --set train.steps=3 --set train.grad_accum=1000 --set checkpoint.every=0 --set logging.every=1";
  ASSERT_EQ(train("a", args).exit_code, 0);
  const std::string log = tmp_.str("b.log");
  const auto r = run_command(roformer_bin() + " train -c " + config_ + " --run-dir " + tmp_.str("b") + args + " > " + log +
                             " 2>&1 & pid=$!; for i in $(seq 600); do grep -q 'step 1/3' " + log +
                             " && break; sleep 0.1; done; sleep 0.5; kill -TERM $pid; wait $pid; echo \"exit $?\"");
  const std::string out = read_file(log);
  EXPECT_NE(r.output.find("exit 0"), std::string::npos) << r.output << out;
  EXPECT_NE(out.find("step 2 was given up at the stop signal"), std::string::npos) << out;
  EXPECT_EQ(out.find("step 2/3"), std::string::npos) << "step 2 ran to its end: " << out;
  const auto resumed = train("b", args + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(read_file(checkpoint_dir(tmp_.str("b"), 3) + "/model.safetensors"),
            read_file(checkpoint_dir(tmp_.str("a"), 3) + "/model.safetensors"))
      << "the resumed run must repeat the given-up step exactly";
}

TEST_F(Reliability, AnInterruptedEvalLeavesNoTemporaryFolder) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  // Raw text large enough that preparing it takes a while; SIGINT arrives during it.
  std::string big;
  for (int i = 0; i < 60; ++i) big += synthetic_corpus(200, 4, static_cast<unsigned>(i));
  write_file(tmp_.str("big.txt"), big);
  const std::string tmp = tmp_.str("t");
  fs::create_directories(tmp);
  const auto r = run_command("TMPDIR=" + tmp + " " + roformer_bin() + " eval --checkpoint " + tmp_.str("run") + " --data " +
                             tmp_.str("big.txt") + " > /dev/null 2>&1 & pid=$!; for i in $(seq 300); do ls " + tmp +
                             " | grep -q roformer-eval && break; sleep 0.05; done; kill -INT $pid; wait $pid; echo \"exit $?\"");
  EXPECT_NE(r.output.find("exit 130"), std::string::npos) << "killed by SIGINT, as without the guard: " << r.output;
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()), 0) << "left in TMPDIR";
}


// ---- The third sweep (issue 40): validate first, delete last; publish whole; say what is wrong ----

// --overwrite deletes the earlier run only once what the new one reads is known to be there: a
// mistyped data file, a missing tokenizer, truncated --init-from weights leave the run as it was.
TEST_F(Reliability, NothingIsDeletedBeforeWhatTheRunReadsIsChecked) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  ASSERT_EQ(run_roformer("export --checkpoint " + tmp_.str("run") + " --format hf --out " + tmp_.str("hf")).exit_code, 0);
  std::string weights = read_file(tmp_.str("hf/model.safetensors"));
  write_file(tmp_.str("hf/model.safetensors"), weights.substr(0, weights.size() / 2));
  const auto before = snapshot(tmp_.str("run"));
  expect_user_error(train("run", "--overwrite --set data.train_files=[" + tmp_.str("trian.txt") + "]"),
                    "data.train_files: input file not found: " + tmp_.str("trian.txt"));
  expect_user_error(train("run", "--overwrite --set tokenizer.model=" + tmp_.str("none.model")),
                    "tokenizer.model: tokenizer not found: " + tmp_.str("none.model"));
  expect_user_error(train("run", "--overwrite --init-from " + tmp_.str("hf")), "truncated");
  EXPECT_EQ(snapshot(tmp_.str("run")), before);

  // tokenizer train --force that fails on a write (100 KiB a file): the old tokenizer and its record stay.
  const std::string tok_args = "tokenizer train --input " + tmp_.str("train.txt") + " --no-progress --out " + tmp_.str("tok");
  ASSERT_EQ(run_roformer(tok_args + " --vocab-size 120").exit_code, 0);
  const auto tok = snapshot(tmp_.str("tok"));
  expect_user_error(run_command("ulimit -f 100 && " + roformer_bin() + " " + tok_args + " --vocab-size 130 --force"),
                    "File too large");
  EXPECT_EQ(snapshot(tmp_.str("tok")), tok);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp_.str("tok")), fs::directory_iterator()), 3) << "no staging left";
}

// Settings that would do nothing are refused naming the key; a resumed run whose learning rate jumps
// (a decayed WSD run given more steps climbs back to the peak) says so with both rates.
TEST_F(Reliability, SettingsWithoutEffectAreRefusedAndALearningRateJumpIsSaid) {
  expect_settings_refused(
      {{"schedule.decay_fraction=0.5", "schedule.decay_fraction = 0.5 applies to schedule.type: wsd only (got linear)"}});
  // A token-type table beyond memory is blamed on its key, not on the vocabulary.
  expect_user_error(train("types", "--set model.type_vocab_size=1e10"), "Lower model.type_vocab_size (the largest share)");
  const std::string wsd = "--set schedule.type=wsd --set schedule.decay_fraction=0.5 --set checkpoint.every=6";
  ASSERT_EQ(train("wsd", wsd + " --set train.steps=6").exit_code, 0);
  const auto resumed = train("wsd", wsd + " --set train.steps=12 --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("[warning] resume: the learning rate jumps at step 6: 0.0005 under the new settings, "
                                "where the run left it at"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("train.steps 6 -> 12 reshapes the wsd schedule; the decay now starts at step 6"),
            std::string::npos) << resumed.output;
}

// A smoke run needs one flag (issue 55): train.steps 2 of a config warming up for 30 with a wsd decay
// that rounds to no step trains, with one warning saying what the schedule lost to fit the run.
TEST_F(Reliability, ASmokeRunShortensTheScheduleWithOneWarning) {
  const auto smoke = train("smoke", "--set train.steps=2 --set schedule.warmup_steps=30 --set schedule.type=wsd");
  ASSERT_EQ(smoke.exit_code, 0) << smoke.output;
  const std::string said = "[warning] train.steps 2 is shorter than the schedule, which was shortened to fit the run: "
                           "schedule.warmup_steps 30 clipped to 1; the wsd decay";
  ASSERT_NE(smoke.output.find(said), std::string::npos) << smoke.output;
  EXPECT_EQ(smoke.output.find(said, smoke.output.find(said) + 1), std::string::npos) << "said twice\n" << smoke.output;
  EXPECT_EQ(smoke.output.find("never decays"), std::string::npos) << smoke.output;
}

// A phased config's smoke run (issue 55): train.steps ending before a phase begins trains the phases
// it reaches, says once which it leaves out, and a resume with the full train.steps enters them.
TEST_F(Reliability, APhasedRunCutShortTrainsThePhasesItReaches) {
  const std::string phases = "--set 'train.phases=[{from_step: 2, max_seq_len: 64}, {from_step: 5, batch_size: 2}]'";
  const auto smoke = train("smoke", phases + " --set train.steps=4");
  ASSERT_EQ(smoke.exit_code, 0) << smoke.output;
  const std::string said = "[warning] train.steps 4 ends before train.phases[1] begins (from_step 5): the run trains 2 "
                           "of the config's 3 length phases, leaving out train.phases[1] (more train.steps trains it)";
  ASSERT_NE(smoke.output.find(said), std::string::npos) << smoke.output;
  EXPECT_EQ(smoke.output.find(said, smoke.output.find(said) + 1), std::string::npos) << "said twice\n" << smoke.output;
  EXPECT_EQ(read_metrics(tmp_.str("smoke")).rbegin()->second["seq_len"], 64) << "the run ends in the phase it reached";
  const auto resumed = train("smoke", phases + " --set train.steps=7 --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(resumed.output.find("ends before train.phases"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("length phase 3 of 3"), std::string::npos) << resumed.output;
}

// eval's counts and lengths out of range are refused naming the flag, before any data is read; a
// temporary folder it cannot use is named as TMPDIR.
TEST_F(Reliability, EvalArgumentsAndItsTemporaryFolderAreNamed) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  const std::string eval = "eval --checkpoint " + tmp_.str("run") + " --data " + tmp_.str("train.txt") + " ";
  for (const char* bad : {"--max-sequences 0", "--max-sequences -5", "--seq-len 0"}) {
    SCOPED_TRACE(bad);
    expect_user_error(run_roformer(eval + bad), "must be a whole number of at least");
  }
  const auto huge = run_roformer(eval + "--seq-len 100000000");
  expect_user_error(huge, "--seq-len 100000000 is beyond what attention over one sequence can hold");
  EXPECT_EQ(huge.output.find("data.max_seq_len"), std::string::npos) << huge.output;
  write_file(tmp_.str("not-a-folder"), "x");
  expect_user_error(run_command("TMPDIR=" + tmp_.str("not-a-folder") + " " + roformer_bin() + " " + eval),
                    "set TMPDIR to a writable folder");
}

// A resumed run keeps the tokenizer and the step its checkpoint holds: a tokenizer put in its place,
// or a trainer state edited to another step (and re-checksummed), is refused, and nothing is
// changed; a manifest listing nothing is not intact; a checkpoint the run set aside is named as such.
TEST_F(Reliability, AResumeTakesItsCheckpointAsSavedOrSaysWhyNot) {
  ASSERT_EQ(train("run", "--set train.steps=6").exit_code, 0);
  ASSERT_EQ(run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 130 --no-progress --out " +
                         tmp_.str("tok2")).exit_code, 0);
  const std::string own = tmp_.str("run/tokenizer/tokenizer.model"), original = read_file(own);
  fs::copy_file(tmp_.str("tok2/tokenizer.model"), own, fs::copy_options::overwrite_existing);
  expect_user_error(train("run", "--set train.steps=9 --resume auto"), "is not the tokenizer checkpoint");
  EXPECT_EQ(read_file(own), read_file(tmp_.str("tok2/tokenizer.model"))) << "left as the user put it";
  fs::remove(own);

  // Step 6's state says 5, its manifest updated to match.
  const std::string ck = checkpoint_dir(tmp_.str("run"), 6);
  std::string state = read_file(ck + "/trainer_state.json");
  const size_t at = state.find("\"step\": 6");
  ASSERT_NE(at, std::string::npos) << state;
  state.replace(at, 9, "\"step\": 5");
  write_file(ck + "/trainer_state.json", state);
  auto manifest = nlohmann::json::parse(read_file(ck + "/manifest.json"));
  manifest["files"]["trainer_state.json"]["size"] = state.size();
  manifest["files"]["trainer_state.json"]["checksum"] = core::file_checksum(ck + "/trainer_state.json");
  write_file(ck + "/manifest.json", manifest.dump(2));
  expect_user_error(train("run", "--set train.steps=9 --resume auto"),
                    "trainer_state.json: step 5, but the checkpoint is step_00000006");

  // A manifest listing nothing vouches for nothing: not intact, and --resume auto skips it.
  write_file(ck + "/manifest.json", R"({"files": {}})");
  const auto check = run_roformer("inspect " + ck);
  EXPECT_EQ(check.output.find("integrity ok"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("manifest.json does not list model.safetensors"), std::string::npos) << check.output;
  const auto skipped = train("run", "--set train.steps=4 --resume auto");
  ASSERT_EQ(skipped.exit_code, 0) << skipped.output;
  EXPECT_NE(skipped.output.find("skipping checkpoint " + ck + ": manifest.json does not list"), std::string::npos)
      << skipped.output;
  EXPECT_TRUE(fs::exists(checkpoint_dir(tmp_.str("run"), 4)));

  // Resuming from step 3 sets step 4 aside; resuming from there is named for what it is.
  ASSERT_EQ(train("run", "--set train.steps=6 --resume " + checkpoint_dir(tmp_.str("run"), 3)).exit_code, 0);
  std::string aside;
  for (const auto& e : fs::directory_iterator(tmp_.str("run/checkpoints")))
    if (fs::exists(e.path() / "step_00000004")) aside = (e.path() / "step_00000004").string();
  ASSERT_NE(aside.find("/abandoned-"), std::string::npos) << aside;
  expect_user_error(train("run", "--set train.steps=9 --resume " + aside),
                    "is a checkpoint this run set aside in");
}

// An export is published whole: a stop signal between removing the old config.json and renaming the
// new files waits for the renames, so the folder holds the new export entirely (its model card and
// weights of one step); the staging folder of an export killed outright goes at the next export.
// The export's record then refuses a spiece.model swapped afterwards, and a damaged architecture is
// named as such instead of being offered as advice.
TEST_F(Reliability, AnExportIsPublishedWholeAndChecksItsTokenizer) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  const std::string hf = tmp_.str("hf"), export_args = " export --checkpoint " + tmp_.str("run") + " --format hf --out ";
  ASSERT_EQ(run_roformer(export_args + hf).exit_code, 0);
  write_file(hf + "/.export-staging-999999999/model.safetensors", "a killed export's");
  ASSERT_EQ(train("run", "--set train.steps=6 --resume auto").exit_code, 0);
  const std::string log = tmp_.str("export.log");
  const auto r = run_command("ROFORMER_FAULT_PUBLISH_DELAY_MS=3000 " + roformer_bin() + export_args + hf + " --force > " +
                             log + " 2>&1 & pid=$!; for i in $(seq 300); do grep -q 'publish: waiting' " + log +
                             " && break; sleep 0.1; done; kill -TERM $pid; wait $pid; echo \"exit $?\"");
  EXPECT_NE(r.output.find("exit 143"), std::string::npos) << r.output << read_file(log);
  ASSERT_EQ(run_roformer(export_args + tmp_.str("hf6")).exit_code, 0);
  for (const auto& e : fs::directory_iterator(hf)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find("staging"), std::string::npos) << name << " left";
    if (name != "README.md") {
      EXPECT_EQ(read_file(e.path().string()), read_file(tmp_.str("hf6/" + name))) << name;
    }
  }
  EXPECT_NE(read_file(hf + "/README.md").find("| steps | 6 |"), std::string::npos);

  // Another tokenizer of as many pieces (BPE where the run's is unigram).
  ASSERT_EQ(run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 120 --model-type bpe "
                         "--no-progress --out " + tmp_.str("tok2")).exit_code, 0);
  fs::copy_file(tmp_.str("tok2/tokenizer.model"), hf + "/spiece.model", fs::copy_options::overwrite_existing);
  expect_user_error(train("fresh", "--init-from " + hf), "is not the tokenizer these weights were exported with");
  fs::copy_file(tmp_.str("hf6/spiece.model"), hf + "/spiece.model", fs::copy_options::overwrite_existing);
  auto config = nlohmann::json::parse(read_file(hf + "/config.json"));
  config["num_hidden_layers"] = 0;
  write_file(hf + "/config.json", config.dump(2));
  const auto damaged = train("fresh", "--init-from " + hf);
  expect_user_error(damaged, "the model it records is not a valid one");
  EXPECT_EQ(damaged.output.find("set model.num_layers: 0"), std::string::npos) << damaged.output;
}

// A run directory inside its input folder: the run never reads its own files (tokenizer/training.json
// as JSONL, metrics.jsonl) when it prepares or resumes.
TEST_F(Reliability, ARunDirectoryInsideItsInputFolderIsNotReadAsInput) {
  write_file(tmp_.str("corpus/train.txt"), read_file(tmp_.str("train.txt")));
  const std::string args = "--set data.train_files=[" + tmp_.str("corpus") + "] --set train.steps=3";
  const auto first = run_roformer("train -c " + config_ + " --run-dir " + tmp_.str("corpus/run") + " " + args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto resumed = run_roformer("train -c " + config_ + " --run-dir " + tmp_.str("corpus/run") + " " + args +
                                    " --set train.steps=6 --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(resumed.output.find("changed since"), std::string::npos) << "the run's own files read as input: " << resumed.output;
  EXPECT_NE(resumed.output.find("a roformer run directory (roformer's output, not input text)"), std::string::npos)
      << resumed.output;
}

// ---- The fourth sweep (issue 55): links, bounds, checked writes, signals, locks, hand edits ----

// RUN/.lock as a symbolic link to a user's file: the link is removed, never followed, so the file keeps
// its text and no process id is written into it (nor its text shown as the lock's owner).
TEST_F(Reliability, ALockFileThatIsASymbolicLinkIsNeverFollowed) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  write_file(tmp_.str("notes.txt"), "my notes\n");
  fs::remove(tmp_.str("run/.lock"));
  fs::create_symlink(tmp_.str("notes.txt"), tmp_.str("run/.lock"));
  const auto r = train("run", "--set train.steps=6 --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_file(tmp_.str("notes.txt")), "my notes\n");
  EXPECT_EQ(r.output.find("my notes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("was a symbolic link (to '" + tmp_.str("notes.txt") + "'): removed the link, never followed it"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::is_symlink(tmp_.str("run/.lock")));
  // A dangling link is a run directory's lock all the same, not a file of the user's.
  fs::remove(tmp_.str("run/.lock"));
  fs::create_symlink(tmp_.str("gone.txt"), tmp_.str("run/.lock"));
  ASSERT_EQ(train("run", "--set train.steps=9 --resume auto").exit_code, 0);
  EXPECT_FALSE(fs::exists(tmp_.str("gone.txt")));
}

// A start refused after the run directory was locked leaves no directory holding only .lock.
TEST_F(Reliability, ARefusedStartLeavesNoRunDirectoryBehind) {
  expect_user_error(train("new/run", "--set data.train_files=[" + tmp_.str("missing.txt") + "]"),
                    "data.train_files: input file not found");
  EXPECT_FALSE(fs::exists(tmp_.str("new"))) << "nor the folder above it that the run made";
  fs::create_directories(tmp_.str("empty"));
  expect_user_error(train("empty", "--set data.train_files=[" + tmp_.str("missing.txt") + "]"),
                    "data.train_files: input file not found");
  EXPECT_TRUE(fs::exists(tmp_.str("empty"))) << "the user's folder stays";
  EXPECT_TRUE(fs::is_empty(tmp_.str("empty"))) << "without a .lock";
  ASSERT_EQ(train("empty", "--set train.steps=3").exit_code, 0);
}

// `bench --profile` into a place that takes no file: refused before measuring, exit 1, one line;
// never "written".
TEST_F(Reliability, AProfileThatCannotBeWrittenIsAnError) {
  const std::string bench = "bench -c " + config_ + " --synthetic --set model.vocab_size=120 --steps 1 --warmup 0 --json";
  const auto proc = run_roformer(bench + " --profile /proc/trace.json");
  expect_user_error(proc, "--profile /proc/trace.json: cannot write the trace there");
  EXPECT_EQ(proc.output.find("written"), std::string::npos) << proc.output;
  EXPECT_EQ(proc.output.find("\"tokens_per_s\""), std::string::npos) << "refused before measuring: " << proc.output;
  const auto written = run_roformer(bench + " --profile " + tmp_.str("prof/trace.json"));
  ASSERT_EQ(written.exit_code, 0) << written.output;
  EXPECT_GT(fs::file_size(tmp_.str("prof/trace.json")), 0u);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp_.str("prof")), fs::directory_iterator()), 1) << "no partial left";
  if (::geteuid() == 0) GTEST_SKIP() << "a read-only folder binds no root process";
  fs::create_directories(tmp_.str("ro"));
  fs::permissions(tmp_.str("ro"), fs::perms::owner_read | fs::perms::owner_exec);
  const auto ro = run_roformer(bench + " --profile " + tmp_.str("ro/trace.json"));
  fs::permissions(tmp_.str("ro"), fs::perms::owner_all);
  expect_user_error(ro, "cannot write the trace there (Permission denied)");
}

// SIGHUP (the terminal closed) stops a run as SIGINT and SIGTERM do: it saves and says how to resume.
TEST_F(Reliability, AClosedTerminalSavesLikeCtrlC) {
  const std::string log = tmp_.str("log");
  const auto r = run_command(roformer_bin() + " train -c " + config_ + " --run-dir " + tmp_.str("run") +
                             " --set train.steps=100000 --set checkpoint.every=0 --set logging.every=1 > " + log +
                             " 2>&1 & pid=$!; for i in $(seq 600); do grep -q 'step 2/' " + log +
                             " && break; sleep 0.1; done; kill -HUP $pid; wait $pid; echo \"exit $?\"");
  const std::string out = read_file(log);
  EXPECT_NE(r.output.find("exit 0"), std::string::npos) << r.output << out;
  EXPECT_NE(out.find("Resume with: roformer train"), std::string::npos) << out;
  EXPECT_FALSE(fs::is_empty(tmp_.str("run/checkpoints"))) << out;
}

// SIGHUP during prepare: the staging folder goes with the process, as at SIGINT and SIGTERM.
TEST_F(Reliability, AClosedTerminalLeavesNoPrepareStagingFolder) {
  ASSERT_EQ(run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 120 --no-progress --out " +
                         tmp_.str("tok")).exit_code, 0);
  std::string big;
  for (int i = 0; i < 60; ++i) big += synthetic_corpus(200, 4, static_cast<unsigned>(i));
  write_file(tmp_.str("big.txt"), big);
  const std::string out = tmp_.str("prep");
  fs::create_directories(out);
  const auto r = run_command(roformer_bin() + " prepare --tokenizer " + tmp_.str("tok/tokenizer.model") + " --input " +
                             tmp_.str("big.txt") + " --threads 1 --no-progress --out " + out +
                             " > /dev/null 2>&1 & pid=$!; for i in $(seq 300); do ls -a " + out +
                             " | grep -q staging && break; sleep 0.02; done; kill -HUP $pid; wait $pid; echo \"exit $?\"");
  EXPECT_NE(r.output.find("exit 129"), std::string::npos) << "died of SIGHUP, as without the guard: " << r.output;
  EXPECT_TRUE(fs::is_empty(out)) << "left in " << out;
}

// --overwrite never deletes a checkpoint a reader (eval, export, fill-mask) holds: refused before
// anything is deleted. A reader facing another program's exclusive lock says what it waits for and
// gives up after its bound.
TEST_F(Reliability, LocksOnCheckpointsAreSaidAndBounded) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  const std::string ck = checkpoint_dir(tmp_.str("run"), 3);
  const auto before = snapshot(tmp_.str("run/checkpoints"));
  // flock(1) holds a shared lock on the checkpoint as CheckpointReadLock does (-o: flock itself holds
  // it, not its command, so killing flock releases it).
  const auto held = run_command("(flock -o -s " + ck + " sleep 30 > /dev/null 2>&1 & holder=$!; sleep 0.5; " + roformer_bin() +
                                " train -c " + config_ + " --run-dir " + tmp_.str("run") + " --overwrite; echo \"exit $?\"; "
                                "kill $holder)");
  EXPECT_NE(held.output.find("--overwrite would delete checkpoint " + ck + " while another process reads it"),
            std::string::npos) << held.output;
  EXPECT_NE(held.output.find("exit 1"), std::string::npos) << held.output;
  EXPECT_EQ(snapshot(tmp_.str("run/checkpoints")), before);

  const auto waited = run_command("(flock -o -x " + ck + " sleep 30 > /dev/null 2>&1 & holder=$!; sleep 0.5; "
                                  "ROFORMER_FAULT_READ_LOCK_WAIT_MS=1500 " + roformer_bin() + " eval --checkpoint " + ck +
                                  " --data " + tmp_.str("train.txt") + "; echo \"exit $?\"; kill $holder)");
  EXPECT_NE(waited.output.find("is locked by another process"), std::string::npos) << waited.output;
  EXPECT_NE(waited.output.find("waiting up to 2 s for it"), std::string::npos) << waited.output;
  EXPECT_NE(waited.output.find("stayed locked by another process for 2 s"), std::string::npos) << waited.output;
  EXPECT_NE(waited.output.find("exit 1"), std::string::npos) << waited.output;
}

// Two commands writing into one new folder: the second is refused while the first owns it, naming its
// process, and the first completes (it used to finish both, the later replacing the earlier).
TEST_F(Reliability, TwoCommandsIntoOneNewFolderTheSecondIsRefused) {
  std::string big;
  for (int i = 0; i < 30; ++i) big += synthetic_corpus(200, 4, static_cast<unsigned>(i));
  write_file(tmp_.str("big.txt"), big);
  // tokenizer train: the first holds its --out while SentencePiece trains.
  const std::string tok_args = "tokenizer train --input " + tmp_.str("big.txt") + " --vocab-size 120 --no-progress --out ";
  const auto tok = run_command("(" + roformer_bin() + " " + tok_args + tmp_.str("tok") + " > " + tmp_.str("tok.log") +
                               " 2>&1 & pid=$!; for i in $(seq 300); do [ -d " + tmp_.str("tok") +
                               " ] && break; sleep 0.01; done; " + roformer_bin() + " " + tok_args + tmp_.str("tok") +
                               "; echo \"second exit $?\"; wait $pid; echo \"first exit $?\")");
  EXPECT_NE(tok.output.find("second exit 1"), std::string::npos) << tok.output;
  EXPECT_NE(tok.output.find("--out " + tmp_.str("tok") + " is being written by another roformer process (pid "),
            std::string::npos) << tok.output;
  EXPECT_NE(tok.output.find("first exit 0"), std::string::npos) << tok.output << read_file(tmp_.str("tok.log"));
  // prepare: the same.
  const std::string prep_args = "prepare --tokenizer " + tmp_.str("tok/tokenizer.model") + " --input " +
                                tmp_.str("big.txt") + " --threads 1 --no-progress --out " + tmp_.str("prep");
  const auto prep = run_command("(" + roformer_bin() + " " + prep_args + " > /dev/null 2>&1 & pid=$!; for i in $(seq 300); "
                                "do [ -d " + tmp_.str("prep") + " ] && break; sleep 0.01; done; " + roformer_bin() + " " +
                                prep_args + "; echo \"second exit $?\"; wait $pid; echo \"first exit $?\")");
  EXPECT_NE(prep.output.find("second exit 1"), std::string::npos) << prep.output;
  EXPECT_NE(prep.output.find("is being written by another roformer process"), std::string::npos) << prep.output;
  EXPECT_NE(prep.output.find("first exit 0"), std::string::npos) << prep.output;
  EXPECT_TRUE(fs::exists(tmp_.str("prep/meta.json")));
  // export: the first sleeps in its publish (fault injection) while the second starts.
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  const std::string export_args = " export --checkpoint " + tmp_.str("run") + " --format hf --out " + tmp_.str("hf");
  const auto exp = run_command("(ROFORMER_FAULT_PUBLISH_DELAY_MS=2000 " + roformer_bin() + export_args + " > " +
                               tmp_.str("export.log") + " 2>&1 & pid=$!; for i in $(seq 300); do grep -q 'publish: "
                               "waiting' " + tmp_.str("export.log") + " && break; sleep 0.1; done; " + roformer_bin() +
                               export_args + "; echo \"second exit $?\"; wait $pid; echo \"first exit $?\")");
  EXPECT_NE(exp.output.find("second exit 1"), std::string::npos) << exp.output;
  EXPECT_NE(exp.output.find("is being written by another roformer process"), std::string::npos) << exp.output;
  EXPECT_NE(exp.output.find("first exit 0"), std::string::npos) << exp.output;
  EXPECT_TRUE(fs::exists(tmp_.str("hf/config.json")));
}

// A checkpoint edited by hand with its manifest kept matching: the data position's phase and the
// metrics it holds are checked too, and refused naming the file before anything is written.
TEST_F(Reliability, AResumeValidatesWhatTheCheckpointHoldsNotOnlyItsChecksums) {
  const std::string phased = "--set train.steps=9 --set 'train.phases=[{from_step: 4, max_seq_len: 64}]'";
  ASSERT_EQ(train("run", phased).exit_code, 0);
  const std::string ck = checkpoint_dir(tmp_.str("run"), 9);
  const std::string state = read_file(ck + "/trainer_state.json");
  auto edited = nlohmann::json::parse(state);
  ASSERT_EQ(edited["loader"]["phase"], 1) << state;
  edited["loader"]["phase"] = 0;
  rewrite_checkpoint_file(ck, "trainer_state.json", edited.dump(2));
  const auto before = snapshot(tmp_.str("run"));
  const std::string resume = phased + " --set train.steps=12 --resume " + ck;
  expect_user_error(train("run", resume), "trainer_state.json: loader.phase 0");
  EXPECT_EQ(snapshot(tmp_.str("run")), before);
  rewrite_checkpoint_file(ck, "trainer_state.json", state);

  const std::string metrics = read_file(ck + "/metrics.jsonl");
  rewrite_checkpoint_file(ck, "metrics.jsonl", metrics.substr(0, metrics.size() - 10));  // the last record cut short
  const auto cut = train("run", resume);
  expect_user_error(cut, "metrics.jsonl: line ");
  EXPECT_NE(cut.output.find("is not a whole JSON record (cut short: no end of line)"), std::string::npos) << cut.output;
  rewrite_checkpoint_file(ck, "metrics.jsonl", metrics);
  ASSERT_EQ(train("run", resume).exit_code, 0);
  for (const auto& [step, record] : read_metrics(tmp_.str("run"))) EXPECT_TRUE(record.is_object()) << step;
}

// A full disk (here a file-size limit) during a resume's copy of the checkpoint's tokenizer: the
// error names the write that failed, and no truncated copy blocks the next resume.
TEST_F(Reliability, AFullDiskDuringAResumeLeavesNothingThatBlocksTheNext) {
  ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
  fs::remove(tmp_.str("run/tokenizer/tokenizer.model"));
  const auto full = run_command("ulimit -f 2 && " + roformer_bin() + " train -c " + config_ + " --run-dir " +
                                tmp_.str("run") + " --set train.steps=6 --resume auto");
  expect_user_error(full, "File too large");
  EXPECT_EQ(full.output.find("Input/output error"), std::string::npos) << full.output;
  const auto again = train("run", "--set train.steps=6 --resume auto");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(read_file(tmp_.str("run/tokenizer/tokenizer.model")),
            read_file(checkpoint_dir(tmp_.str("run"), 3) + "/tokenizer.model"));
}

}  // namespace
}  // namespace roformer::test
