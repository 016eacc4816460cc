// train/tensorboard_sink: which metrics fields become which tags, which config keys are HParams,
// and what a session's event file holds: the head at step 0 for a new run and at M + 1 for a run
// resumed from step M, the records as written, the session end, and the replay of metrics.jsonl
// when a resumed run finds no event file. (tests/integration/test_tensorboard.cpp reads real runs
// with TensorBoard's own reader.)
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/json_read.h"
#include "tensorboard/event_file.h"
#include "tensorboard_util.h"
#include "test_util.h"
#include "train/tensorboard_sink.h"

using roformer::train::TensorBoardSink;
namespace rt = roformer::test;
namespace tb = roformer::tensorboard;
using nlohmann::json;

namespace {

const json kTrain = {{"type", "train"}, {"step", 10}, {"loss", 6.5}, {"loss_avg", 6.75}, {"accuracy", 0.125},
                     {"lr", 3e-4}, {"grad_norm", 1.5}, {"tokens_per_s", 12500.0}, {"ms_per_step", 328.0},
                     {"tokens_seen", 40960}, {"data_wait_s", 0.001}};
const json kEval = {{"type", "eval"}, {"step", 10}, {"loss", 6.0}, {"accuracy", 0.2}, {"top5_accuracy", 0.35},
                    {"perplexity", 403.4}, {"n_predicted", 900}, {"n_sequences", 64}, {"seconds", 1.5}};

// The typed records the run sends, as read from the JSON above.
roformer::metrics::TrainRecord train_record(const json& j) {
  return roformer::metrics::train_record_from(roformer::core::JsonReader(j, "kTrain", ""));
}
roformer::metrics::EvalRecord eval_record(const json& j) {
  return roformer::metrics::eval_record_from(roformer::core::JsonReader(j, "kEval", ""));
}

std::vector<std::string> tags_of(const std::vector<tb::Scalar>& scalars) {
  std::vector<std::string> out;
  for (const auto& s : scalars) out.push_back(s.tag);
  return out;
}

// The newest event file of RUN_DIR (the last in name order), read back.
std::vector<rt::DecodedEvent> newest_events(const std::string& run_dir) {
  const auto names = tb::list_event_files(run_dir);
  EXPECT_FALSE(names.empty());
  return names.empty() ? std::vector<rt::DecodedEvent>{} : rt::read_events(run_dir + "/" + names.back());
}

}  // namespace

TEST(TensorBoardSink, TrainAndEvalFieldsMapToStableTags) {
  const auto train = roformer::train::tensorboard_scalars(kTrain);
  EXPECT_EQ(tags_of(train), (std::vector<std::string>{"train/loss", "train/loss_avg", "train/accuracy", "train/lr",
                                                      "train/grad_norm", "train/tokens_per_s"}));
  EXPECT_EQ(train[0].value, 6.5);
  EXPECT_EQ(train[3].value, 3e-4);
  json fp16 = kTrain;
  fp16["loss_scale"] = 32768.0;
  fp16["mfu"] = 0.41;
  fp16["accuracy_avg"] = 0.13;  // written since issue 41; older records lack it
  const auto more = tags_of(roformer::train::tensorboard_scalars(fp16));
  EXPECT_EQ(more[3], "train/accuracy_avg");
  EXPECT_NE(std::find(more.begin(), more.end(), "train/loss_scale"), more.end());
  EXPECT_NE(std::find(more.begin(), more.end(), "train/mfu"), more.end());
  const auto eval = roformer::train::tensorboard_scalars(kEval);
  EXPECT_EQ(tags_of(eval), (std::vector<std::string>{"eval/loss", "eval/accuracy", "eval/perplexity", "eval/top5"}));
  EXPECT_EQ(eval[3].value, 0.35);
  EXPECT_TRUE(roformer::train::tensorboard_scalars({{"type", "other"}, {"step", 1}, {"loss", 1.0}}).empty());
  EXPECT_TRUE(roformer::train::tensorboard_scalars({{"type", "train"}, {"step", 1}, {"loss", "n/a"}}).empty());
}

TEST(TensorBoardSink, HParamsAreTheModelOptimizerAndTrainingShape) {
  auto config = roformer::config::parse_config("model:\n  hidden_size: 64\n  num_heads: 2\n  position: absolute\n");
  std::map<std::string, tb::HParamValue> hp;
  for (const auto& h : roformer::train::tensorboard_hparams(config)) hp[h.name] = h.value;
  EXPECT_EQ(std::get<double>(hp.at("model.hidden_size")), 64.0);
  EXPECT_EQ(std::get<std::string>(hp.at("model.position")), "absolute");
  EXPECT_EQ(std::get<bool>(hp.at("optimizer.fused")), true);
  EXPECT_EQ(std::get<double>(hp.at("optimizer.lr")), 5e-4);
  EXPECT_EQ(std::get<std::string>(hp.at("schedule.type")), "linear");
  EXPECT_EQ(std::get<double>(hp.at("masking.mask_prob")), 0.15);
  for (const char* key : {"train.steps", "train.batch_size", "train.grad_accum", "train.precision", "train.seed",
                          "data.max_seq_len", "data.packing", "tokenizer.vocab_size", "tokenizer.model_type"})
    EXPECT_EQ(hp.count(key), 1u) << key;
  for (const char* key : {"train.run_dir", "data.train_files", "logging.every", "train.device", "eval.every"})
    EXPECT_EQ(hp.count(key), 0u) << key << " is where or how, not what was trained";
}

TEST(TensorBoardSink, ANewRunStartsAtStepZeroAndEndsWithTheSession) {
  rt::TempDir run;
  const auto config = roformer::config::parse_config("train:\n  steps: 10\nschedule:\n  warmup_steps: 2\n");
  {
    TensorBoardSink sink(config, roformer::checkpoint::RunLayout(run.str()), std::nullopt);
    sink.write(train_record(kTrain));
    sink.write(eval_record(kEval));
    roformer::metrics::RunSummary summary;
    summary.step = 10;
    sink.finish(summary);
  }
  const auto events = newest_events(run.str());
  ASSERT_EQ(events.size(), 7u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[1].session_start);
  EXPECT_EQ(events[1].step, 0);
  EXPECT_EQ(events[2].tags, std::vector<std::string>{"config"});
  EXPECT_EQ(events[2].text, "```yaml\n" + roformer::config::to_yaml(config) + "```\n");
  EXPECT_EQ(events[3].tags, std::vector<std::string>{"_hparams_/session_start_info"});
  EXPECT_EQ(events[3].step, 0);
  EXPECT_EQ(events[4].step, 10);
  ASSERT_EQ(events[4].scalars.size(), 6u);
  EXPECT_EQ(events[4].scalars[0], (std::pair<std::string, float>{"train/loss", 6.5f}));
  EXPECT_EQ(events[5].scalars.size(), 4u);
  EXPECT_EQ(events[6].tags, std::vector<std::string>{"_hparams_/session_end_info"});
  EXPECT_EQ(events[6].step, 10);
}

TEST(TensorBoardSink, EachRecordIsOnDiskWhenWriteReturns) {
  rt::TempDir run;
  TensorBoardSink sink(roformer::config::Config{}, roformer::checkpoint::RunLayout(run.str()), std::nullopt);
  EXPECT_EQ(newest_events(run.str()).size(), 4u) << "the head is flushed by the constructor";
  sink.write(train_record(kTrain));
  EXPECT_EQ(newest_events(run.str()).size(), 5u) << "a live TensorBoard sees the logging step";
}

TEST(TensorBoardSink, AResumedRunStartsAfterTheCheckpoint) {
  rt::TempDir run;
  const roformer::config::Config config;
  { TensorBoardSink first(config, roformer::checkpoint::RunLayout(run.str()), std::nullopt); }
  TensorBoardSink resumed(config, roformer::checkpoint::RunLayout(run.str()), int64_t{40});
  ASSERT_EQ(tb::list_event_files(run.str()).size(), 2u) << "one file per process start";
  const auto events = newest_events(run.str());
  ASSERT_EQ(events.size(), 4u) << "the directory had event files: nothing replayed";
  EXPECT_TRUE(events[1].session_start);
  EXPECT_EQ(events[1].step, 41) << "TensorBoard drops what it read at steps >= 41";
  EXPECT_EQ(events[2].step, 41);
  EXPECT_EQ(events[3].step, 41);
}

TEST(TensorBoardSink, AResumedRunWithoutEventFilesReplaysMetricsUpToTheCheckpoint) {
  rt::TempDir run;
  json later = kTrain;
  later["step"] = 50;  // past the checkpoint: a record the restored file would not hold, skipped anyway
  json early = kTrain;
  early["step"] = 20;
  rt::write_file(run.str("metrics.jsonl"), early.dump() + "\n" + kEval.dump() + "\n{cut short\n" + later.dump() + "\n");
  TensorBoardSink resumed(roformer::config::Config{}, roformer::checkpoint::RunLayout(run.str()), int64_t{40});
  const auto events = newest_events(run.str());
  ASSERT_EQ(events.size(), 6u);
  EXPECT_TRUE(events[1].session_start);
  EXPECT_EQ(events[1].step, 41);
  EXPECT_EQ(events[2].step, 20);
  EXPECT_EQ(events[2].scalars.size(), 6u);
  EXPECT_EQ(events[3].step, 10);
  EXPECT_EQ(events[3].scalars[0], (std::pair<std::string, float>{"eval/loss", 6.0f}));
  EXPECT_EQ(events[4].tags, std::vector<std::string>{"config"});
  EXPECT_EQ(events[4].step, 41);
}
