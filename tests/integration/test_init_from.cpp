// `roformer train --init-from`: a new run from an export or a checkpoint starts exactly at the
// source model (its first evaluation equals `roformer eval` of the source on the same data and
// seed), takes the source's tokenizer, starts a fresh optimizer and schedule, and refuses
// mismatching inputs with one-line errors. The source is trained with whole-word masking and a
// factorized embedding, so its export is also checked against transformers.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/safetensors.h"
#include "data/tokenizer.h"
#include "hf_util.h"
#include "run_dir_util.h"
#include "test_util.h"
#include "train/schedule.h"

using namespace roformer::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Whole-word masking, embedding 32 projected to hidden 64.
std::string yaml(const std::string& dir, int64_t steps) {
  return "model:\n  hidden_size: 64\n  embedding_size: 32\n  num_layers: 2\n  num_heads: 2\n  intermediate_size: 128\n"
         "  max_position_embeddings: 48\n  hidden_dropout: 0.0\n  attention_dropout: 0.0\n"
         "tokenizer:\n  vocab_size: 120\n"
         "data:\n  train_files: [" + dir + "/train.txt]\n  valid_files: [" + dir + "/valid.txt]\n  max_seq_len: 32\n"
         "masking:\n  whole_word: true\n"
         "optimizer:\n  lr: 3.0e-3\nschedule:\n  warmup_steps: " + std::to_string(std::min<int64_t>(10, steps - 1)) + "\n"
         "train:\n  steps: " + std::to_string(steps) + "\n  batch_size: 16\n  precision: fp32\n  device: cpu\n"
         "checkpoint:\n  every: 0\nlogging:\n  every: 1\n  progress: plain\n"
         "eval:\n  every: 0\n  max_sequences: 64\n  seed: 3\n";
}

// One source run (trained once for the suite) and its export.
class InitFromTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    write_file(tmp_->str("train.txt"), synthetic_corpus(80, 4, 3));
    write_file(tmp_->str("valid.txt"), synthetic_corpus(10, 4, 4));
    write_file(tmp_->str("source.yaml"), yaml(tmp_->str(), 120));
    write_file(tmp_->str("continue.yaml"), yaml(tmp_->str(), 3));
    auto r = run_roformer("train -c " + tmp_->str("source.yaml") + " --run-dir " + tmp_->str("source"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto e = run_roformer("export --checkpoint " + tmp_->str("source") + " --out " + tmp_->str("hf"));
    ASSERT_EQ(e.exit_code, 0) << e.output;
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::string train(const std::string& args) {
    return "train -c " + tmp_->str("continue.yaml") + " " + args;
  }
  // `roformer eval` of a source run with the new run's evaluation settings.
  static json source_eval(const std::string& source) {
    auto r = run_roformer("eval --device cpu --checkpoint " + source + " --json --seed 3 --max-sequences 64");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return last_json(r.output);
  }
  // The new run's step-0 evaluation equals the source's; it took the source's tokenizer, and its
  // optimizer and schedule started fresh.
  static void expect_starts_at_source(const std::string& run_dir, const std::string& source) {
    const auto evals = read_metrics(run_dir, "eval");
    ASSERT_TRUE(evals.count(0)) << "no evaluation at step 0 in " << run_dir;
    const auto& first = evals.at(0);
    const auto ref = source_eval(source);
    EXPECT_EQ(first["n_predicted"], ref["n_predicted"]);
    EXPECT_EQ(first["accuracy"], ref["accuracy"]);
    EXPECT_EQ(first["top5_accuracy"], ref["top5_accuracy"]);
    EXPECT_NEAR(first["loss"].get<double>(), ref["loss"].get<double>(), 1e-6 * ref["loss"].get<double>());
    EXPECT_EQ(roformer::data::file_fingerprint(run_dir + "/tokenizer/tokenizer.model"),
              roformer::data::file_fingerprint(source + "/tokenizer/tokenizer.model"));
    const auto train = read_metrics(run_dir, "train");
    ASSERT_EQ(train.size(), 3u);
    const auto cfg = roformer::config::load_config(tmp_->str("continue.yaml"));
    const roformer::train::LrSchedule schedule(cfg.schedule, cfg.optimizer.lr, 3);
    EXPECT_DOUBLE_EQ(train.at(1)["lr"].get<double>(), schedule.lr(0));  // warmup starts again
    EXPECT_EQ(train.at(3)["tokens_seen"], 3 * 16 * 32);
  }
  static TempDir* tmp_;
};
TempDir* InitFromTest::tmp_ = nullptr;

// The last non-empty line of a command's output: where main prints a user error.
std::string last_line(const std::string& output) {
  const auto end = output.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const auto begin = output.rfind('\n', end);
  return output.substr(begin == std::string::npos ? 0 : begin + 1, end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

}  // namespace

TEST_F(InitFromTest, WholeWordFactorizedExportMatchesTransformers) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  const json config = json::parse(read_file(tmp_->str("hf/config.json")));
  EXPECT_EQ(config["embedding_size"], 32);
  auto check = check_export_logits(tmp_->str("source"), tmp_->str("hf"), tmp_->str("ref.safetensors"));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(read_file(tmp_->str("hf/README.md")).find("whole words"), std::string::npos);
}

TEST_F(InitFromTest, RunFromExportStartsAtTheSourceModel) {
  const std::string run = tmp_->str("from_export");
  auto r = run_roformer(train("--init-from " + tmp_->str("hf") + " --run-dir " + run));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("new run from the weights of Hugging Face export"), std::string::npos) << r.output;
  expect_starts_at_source(run, tmp_->str("source"));
  // The new run is a run like any other: it continues with --resume auto.
  auto resumed = run_roformer("train --run-dir " + run + " --resume auto --set train.steps=4");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
}

TEST_F(InitFromTest, RunFromCheckpointStartsAtTheSourceModel) {
  const std::string run = tmp_->str("from_checkpoint");
  auto r = run_roformer(train("--init-from " + tmp_->str("source") + " --run-dir " + run));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("new run from the weights of checkpoint"), std::string::npos) << r.output;
  expect_starts_at_source(run, tmp_->str("source"));
  // continue.yaml's 3 steps end one step after its warmup of 2: the rate never decays, and the run says so.
  const std::string never = "the learning rate never decays: train.steps 3 ends one step after schedule.warmup_steps 2";
  EXPECT_NE(r.output.find(never), std::string::npos) << r.output;
  EXPECT_NE(read_file(run + "/train.log").find(never), std::string::npos);
}

// Hugging Face always has a token-type table, so a model without token types is exported with one
// all-zero row; --init-from takes it back into a model without token types.
TEST_F(InitFromTest, ModelWithoutTokenTypesRoundTrips) {
  const std::string source = tmp_->str("no_types"), out = tmp_->str("no_types_hf");
  const std::string no_types = " --set model.type_vocab_size=0";
  auto t = run_roformer("train -c " + tmp_->str("source.yaml") + no_types + " --set train.steps=20 --run-dir " + source);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  ASSERT_EQ(run_roformer("export --checkpoint " + source + " --out " + out).exit_code, 0);
  EXPECT_EQ(json::parse(read_file(out + "/config.json"))["type_vocab_size"], 1);
  const std::string run = tmp_->str("from_no_types");
  auto r = run_roformer(train("--init-from " + out + no_types + " --run-dir " + run));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_starts_at_source(run, source);
  auto two = run_roformer(train("--init-from " + out + " --run-dir " + tmp_->str("two_types")));
  EXPECT_EQ(two.exit_code, 1);
  EXPECT_NE(two.output.find("model.type_vocab_size is 2 in the config but the weights were trained with 1"),
            std::string::npos) << two.output;
}

TEST_F(InitFromTest, BadSourcesAreOneLineErrorsNamingTheProblem) {
  struct Case {
    std::string args, needle;
    std::string run_dir = "";  // default: a fresh one
  };
  // An export whose query weight of layer 0 has another shape than its config.json says.
  const std::string bad = tmp_->str("bad_shape");
  fs::copy(tmp_->str("hf"), bad, fs::copy_options::recursive);
  {
    auto tensors = roformer::core::load_safetensors(bad + "/model.safetensors");
    std::vector<std::pair<std::string, torch::Tensor>> list(tensors.begin(), tensors.end());
    for (auto& [name, t] : list)
      if (name == "roformer.encoder.layer.0.attention.self.query.weight") t = torch::zeros({32, 64});
    roformer::core::save_safetensors(bad + "/model.safetensors", list);
  }
  fs::create_directories(tmp_->str("empty"));
  // An export without its SentencePiece model; a damaged checkpoint.
  fs::copy(tmp_->str("hf"), tmp_->str("no_spiece"), fs::copy_options::recursive);
  fs::remove(tmp_->str("no_spiece/spiece.model"));
  const std::string damaged = tmp_->str("damaged");
  fs::copy(checkpoint_dir(tmp_->str("source"), 120), damaged, fs::copy_options::recursive);
  write_file(damaged + "/optimizer.pt", "junk");
  // Another tokenizer, named by the config or already in the run directory.
  auto other = run_roformer("tokenizer train --input " + tmp_->str("train.txt") + " --vocab-size 110 --out " +
                            tmp_->str("other_tok"));
  ASSERT_EQ(other.exit_code, 0) << other.output;
  const std::string other_tok = tmp_->str("other_tok/tokenizer.model");
  const std::string taken = tmp_->str("run_with_other_tokenizer");
  fs::create_directories(taken + "/tokenizer");
  write_file(taken + "/.lock", "");  // a run directory an earlier run left
  fs::copy_file(other_tok, taken + "/tokenizer/tokenizer.model");
  const std::vector<Case> cases = {
      {"--init-from " + tmp_->str("nope"), "--init-from '" + tmp_->str("nope") + "' does not exist"},
      {"--init-from " + tmp_->str("empty"), "is neither a checkpoint (no manifest.json) nor a run directory"},
      {"--init-from " + tmp_->str("hf") + " --set model.hidden_size=32",
       "model.hidden_size is 32 in the config but the weights were trained with 64; set model.hidden_size: 64"},
      {"--init-from " + tmp_->str("source") + " --set model.embedding_size=0",
       "model.embedding_size is 64 in the config but the weights were trained with 32"},
      {"--init-from " + tmp_->str("hf") + " --set model.norm=pre", "model.norm is pre in the config but the weights"},
      {"--init-from " + bad, "shape mismatch for roformer.encoder.layer.0.attention.self.query.weight: expected "
                             "[64, 64], got [32, 64] (expected: the model the config builds; got: " + bad},
      {"--init-from " + tmp_->str("hf") + " --resume auto", "--init-from starts a new run and --resume continues one"},
      {"--init-from " + tmp_->str("no_spiece"), "has no spiece.model, the SentencePiece model `roformer export` writes"},
      {"--init-from " + damaged, "--init-from: checkpoint " + damaged + " is not usable: optimizer.pt"},
      {"--init-from " + tmp_->str("hf") + " --set tokenizer.model=" + other_tok,
       "tokenizer.model is " + other_tok + " but --init-from " + tmp_->str("hf") + " comes with another tokenizer"},
      {"--init-from " + tmp_->str("hf"), taken + "/tokenizer/tokenizer.model already holds another tokenizer", taken},
  };
  int n = 0;
  for (const auto& c : cases) {
    const std::string run = c.run_dir.empty() ? tmp_->str("bad_run_" + std::to_string(n++)) : c.run_dir;
    auto r = run_roformer(train(c.args + " --run-dir " + run));
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    // One line, the last: the message does not continue on further lines.
    EXPECT_NE(last_line(r.output).find(c.needle), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(run + "/checkpoints")) << c.args;
  }
  auto no_config = run_roformer("train --init-from " + tmp_->str("hf") + " --run-dir " + tmp_->str("no_config"));
  EXPECT_EQ(no_config.exit_code, 1);
  EXPECT_NE(last_line(no_config.output).find("--init-from needs a config for the new run: -c CONFIG"),
            std::string::npos) << no_config.output;
}

// Issue 40: a hand-edited config.json with a wrong JSON type ends in one line naming the file, the
// key, what was expected and what to do (exit 1), never a raw json.exception.type_error (exit 2).
// The DeBERTa keys are read once model_type says deberta-v2 and its relative settings are there.
TEST_F(InitFromTest, HandEditedConfigJsonIsOneLineNamingTheKey) {
  const json original = json::parse(read_file(tmp_->str("hf/config.json")));
  json deberta = original;
  deberta["model_type"] = "deberta-v2";
  deberta["relative_attention"] = true;
  deberta["norm_rel_ebd"] = "layer_norm";
  deberta.erase("embedding_size");
  struct Case {
    std::string key;
    json base, value;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"vocab_size", original, "300", "\"vocab_size\" is \"300\" (a string) but must be an integer"},
      {"hidden_size", original, nullptr, "\"hidden_size\" is null but must be an integer"},
      {"position_buckets", deberta, "64", "\"position_buckets\" is \"64\" (a string) but must be an integer"},
      {"pos_att_type", deberta, json::array({5}), "\"pos_att_type\" is [5] but must be a list of strings"},
      {"rotary_value", original, "yes", "\"rotary_value\" is \"yes\" (a string) but must be true or false"}};
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    const std::string dir = tmp_->str("edited_" + std::to_string(n++));
    fs::copy(tmp_->str("hf"), dir, fs::copy_options::recursive);
    json edited = c.base;
    edited[c.key] = c.value;
    write_file(dir + "/config.json", edited.dump(2));
    auto r = run_roformer(train("--init-from " + dir + " --run-dir " + dir + "_run"));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(last_line(r.output).find("--init-from: " + dir + "/config.json: " + c.needle +
                                       "; give the config.json of a Hugging Face model directory as save_pretrained, a Hub download or "
                                       "`roformer export --format hf` leaves it"),
              std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("type_error"), std::string::npos) << r.output;
  }
}

// Issue 40: an export whose position table no machine holds (max_position_embeddings 1e12 in its
// config.json, and so in the run's config) is refused by the memory check naming the key, before the
// model is built (it used to abort inside LibTorch).
TEST_F(InitFromTest, HugePositionTableIsRefusedNamingTheKey) {
  const std::string huge = "1000000000000", dir = tmp_->str("huge_table");
  fs::copy(tmp_->str("hf"), dir, fs::copy_options::recursive);
  json config = json::parse(read_file(dir + "/config.json"));
  config["max_position_embeddings"] = 1000000000000;
  write_file(dir + "/config.json", config.dump(2));
  auto r = run_roformer(train("--init-from " + dir + " --run-dir " + tmp_->str("huge_run") +
                              " --set model.max_position_embeddings=" + huge));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(last_line(r.output).find("Lower model.max_position_embeddings (the largest share)"), std::string::npos)
      << r.output;
}

// Context extension (issue 55): a rotary model's base and length are computed, not learned, so a run
// from its weights may change them; the log says so and the run's config.yaml records them, and the
// longer sequences train. A learned absolute table is extended only when asked (--extend-positions),
// its new rows copies of the trained ones; never cut.
TEST_F(InitFromTest, ARotaryModelExtendsItsContextAndAnAbsoluteTableOnlyWhenAsked) {
  const std::string run = tmp_->str("extended");
  auto r = run_roformer(train("--init-from " + tmp_->str("hf") + " --run-dir " + run +
                              " --set model.rotary_base=160000 --set model.max_position_embeddings=96"
                              " --set data.max_seq_len=64"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("context extension from --init-from " + tmp_->str("hf") + ": model.rotary_base 10000.0 -> "
                          "160000.0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.max_position_embeddings 48 -> 96"), std::string::npos) << r.output;
  EXPECT_NE(read_file(run + "/train.log").find("context extension"), std::string::npos);
  const auto cfg = roformer::config::load_config(run + "/config.yaml");
  EXPECT_EQ(cfg.model.rotary_base, 160000.0);
  EXPECT_EQ(cfg.model.max_position_embeddings, 96);
  EXPECT_EQ(read_metrics(run, "train").at(3)["seq_len"], 64);

  // A BERT-style source: 48 learned positions.
  const std::string source = tmp_->str("absolute_source");
  auto s = run_roformer("train -c " + tmp_->str("continue.yaml") + " --run-dir " + source +
                        " --set model.position=absolute");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const std::string longer = " --set model.position=absolute --set model.max_position_embeddings=96";
  auto refused = run_roformer(train("--init-from " + source + " --run-dir " + tmp_->str("abs_refused") + longer));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(last_line(refused.output).find("learned position table has 48 rows; to extend the context, add "
                                           "--extend-positions"), std::string::npos) << refused.output;
  auto cut = run_roformer(train("--init-from " + source + " --run-dir " + tmp_->str("abs_cut") +
                                " --set model.position=absolute --set model.max_position_embeddings=40"));
  EXPECT_EQ(cut.exit_code, 1) << cut.output;
  EXPECT_NE(last_line(cut.output).find("a learned table is not cut"), std::string::npos) << cut.output;
  auto alone = run_roformer(train("--extend-positions --run-dir " + tmp_->str("abs_alone")));
  EXPECT_EQ(alone.exit_code, 1) << alone.output;
  EXPECT_NE(last_line(alone.output).find("--extend-positions extends the position table of the weights --init-from"),
            std::string::npos) << alone.output;

  // Extended: sequences of 32 train rows 0-31 only and without weight decay the rest stay as loaded,
  // so rows 48-95 are still the source's rows 0-47.
  const std::string copied = tmp_->str("abs_copied");
  auto e = run_roformer(train("--init-from " + source + " --run-dir " + copied + longer +
                              " --extend-positions --set optimizer.weight_decay=0.0"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("model.max_position_embeddings 48 -> 96 (the learned table's new rows copied from its 48 "
                          "trained rows"), std::string::npos) << e.output;
  auto table = [](const std::string& file) {
    for (const auto& [name, t] : roformer::core::load_safetensors(file))
      if (name.find("position_embeddings.weight") != std::string::npos) return t;
    return torch::Tensor();
  };
  const torch::Tensor before = table(checkpoint_dir(source, 3) + "/model.safetensors");
  const torch::Tensor after = table(checkpoint_dir(copied, 3) + "/model.safetensors");
  ASSERT_TRUE(before.defined() && after.defined());
  ASSERT_EQ(after.size(0), 96);
  EXPECT_TRUE(torch::equal(after.narrow(0, 48, 48), before)) << "rows 48-95 are not copies of the trained 0-47";
  EXPECT_TRUE(torch::equal(after.narrow(0, 32, 16), before.narrow(0, 32, 16))) << "rows 32-47 were not loaded";
  EXPECT_FALSE(torch::equal(after.narrow(0, 0, 32), before.narrow(0, 0, 32))) << "rows 0-31 did not train";
}
