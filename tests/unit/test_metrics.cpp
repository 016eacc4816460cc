// metrics/records and metrics/jsonl: each record's fields under their metrics.jsonl keys, read back
// exactly, records of older versions read (fields they lack keep their defaults), a hand-edited
// field named in one line, and the sink writing whole lines.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "metrics/jsonl.h"
#include "metrics/records.h"
#include "test_util.h"

namespace rm = roformer::metrics;
using nlohmann::json;

namespace {

rm::TrainRecord train_from(const json& j) { return rm::train_record_from(roformer::core::JsonReader(j, "rec", "fix it")); }
rm::EvalRecord eval_from(const json& j) { return rm::eval_record_from(roformer::core::JsonReader(j, "rec", "fix it")); }

}  // namespace

TEST(MetricsRecords, TrainRecordKeysAndRoundTrip) {
  rm::TrainRecord r;
  r.step = 40, r.loss = 6.5, r.loss_avg = 6.75, r.accuracy = 0.125, r.accuracy_avg = 0.11, r.lr = 3e-4;
  r.grad_norm = 1.5, r.tokens_per_s = 12500, r.ms_per_step = 328, r.tokens_seen = 40960, r.data_wait_s = 0.001;
  r.window_steps = 10, r.eta_s = 99;  // the console's: not recorded
  const json line = rm::metrics_line(r);
  EXPECT_EQ(line.dump(), R"({"accuracy":0.125,"accuracy_avg":0.11,"data_wait_s":0.001,"grad_norm":1.5,"loss":6.5,)"
                         R"("loss_avg":6.75,"lr":0.0003,"ms_per_step":328.0,"seq_len":0,"step":40,"tokens_per_s":12500.0,)"
                         R"("tokens_seen":40960,"type":"train"})");
  r.mfu = 0.41, r.loss_scale = 32768;
  const rm::TrainRecord back = train_from(rm::metrics_line(r));
  EXPECT_EQ(rm::to_json(back), rm::to_json(r));
  EXPECT_EQ(back.mfu, 0.41);
  EXPECT_EQ(back.window_steps, 0);
}

TEST(MetricsRecords, EvalRecordKeysAndRoundTrip) {
  rm::EvalRecord e;
  e.step = 12, e.loss = 2.5, e.accuracy = 0.41, e.perplexity = 12.18, e.top5_accuracy = 0.6;
  e.n_predicted = 300, e.n_sequences = 16, e.n_tokens = 512, e.seconds = 1.5;
  EXPECT_EQ(rm::to_json(e).dump(), R"({"accuracy":0.41,"loss":2.5,"n_predicted":300,"n_sequences":16,"n_tokens":512,)"
                                   R"("perplexity":12.18,"seconds":1.5,"step":12,"top5_accuracy":0.6})");
  EXPECT_EQ(rm::metrics_line(e)["type"], "eval");
  EXPECT_EQ(rm::to_json(eval_from(rm::to_json(e))), rm::to_json(e));
}

// metrics.jsonl written by an older version: no accuracy_avg, no n_tokens.
TEST(MetricsRecords, OlderRecordsReadAndHandEditedFieldsAreNamed) {
  const rm::TrainRecord old = train_from(json::parse(R"({"type":"train","step":10,"loss":7.0,"loss_avg":7.2,)"
                                                    R"("accuracy":0.02,"lr":0.001})"));
  EXPECT_EQ(old.loss_avg, 7.2);
  EXPECT_FALSE(old.accuracy_avg.has_value());
  EXPECT_FALSE(rm::metrics_line(old).contains("accuracy_avg")) << "an absent figure is not written as 0";
  EXPECT_EQ(eval_from(json::parse(R"({"step":6,"loss":6.9,"accuracy":0.03})")).n_tokens, 0);
  try {
    eval_from(json::parse(R"({"step":6,"top5_accuracy":"high"})"));
    FAIL() << "a string accepted as a figure";
  } catch (const roformer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rec: \"top5_accuracy\" is \"high\" (a string) but must be a number; fix it"),
              std::string::npos) << e.what();
  }
}

TEST(MetricsRecords, FieldsCarryTheirTensorBoardTags) {
  int tagged = 0;
  for (const auto& f : rm::fields_of("eval")) tagged += f.tag != nullptr;
  EXPECT_EQ(tagged, 4);  // eval/loss, eval/accuracy, eval/perplexity, eval/top5
  EXPECT_STREQ(rm::fields_of("train")[1].tag, "train/loss");
  EXPECT_TRUE(rm::fields_of("summary").empty());
}

TEST(MetricsJsonl, AppendsOneLinePerRecordAndFindsTheLastOfEachType) {
  roformer::test::TempDir tmp;
  const std::string path = tmp.str("metrics.jsonl");
  {
    rm::JsonlSink sink(path);
    rm::TrainRecord t;
    for (int64_t step : {1, 2}) {
      t.step = step;
      sink.write(t);
    }
    rm::EvalRecord e;
    e.step = 2;
    sink.write(e);
  }
  EXPECT_EQ(roformer::test::read_file(path).find("{\"accuracy\":0.0,\"data_wait_s\""), 0u);
  EXPECT_EQ(rm::last_metrics_record(path, "train")["step"], 2);
  EXPECT_EQ(rm::last_metrics_record(path, "eval")["step"], 2);
  EXPECT_TRUE(rm::last_metrics_record(tmp.str("none.jsonl"), "train").is_null());
}
