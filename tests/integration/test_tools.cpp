// eval, fill-mask, inspect and export through the CLI, on runs trained in the test itself. Pinned to
// the CPU (--device cpu): batch-size invariance is exact there; tests/gpu has the CUDA variants.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "data/loader.h"
#include "hf_util.h"
#include "run_dir_util.h"
#include "test_util.h"
#include "checkpoint/loader.h"
#include "checkpoint/store.h"

using namespace roformer::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string model_yaml(const std::string& norm) {
  return "model:\n  hidden_size: 64\n  num_layers: 2\n  num_heads: 2\n  intermediate_size: 128\n"
         "  max_position_embeddings: 48\n  hidden_dropout: 0.0\n  attention_dropout: 0.0\n  norm: " + norm + "\n";
}

// A two-step CPU run on `train` (for the export refusals).
std::string two_step_yaml(const std::string& norm, const std::string& train) {
  return model_yaml(norm) + "tokenizer:\n  vocab_size: 100\n"
         "data:\n  train_files: [" + train + "]\n  max_seq_len: 32\n"
         "schedule:\n  warmup_steps: 1\ntrain:\n  steps: 2\n  batch_size: 4\n  precision: fp32\n  device: cpu\n"
         "logging:\n  progress: plain\n";
}

// One run on the synthetic grammar, trained once for the whole suite.
class ToolsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    write_file(tmp_->str("train.txt"), synthetic_corpus(80, 4, 3));
    write_file(tmp_->str("valid.txt"), synthetic_corpus(10, 4, 4));
    write_file(tmp_->str("run.yaml"),
               model_yaml("post") + "tokenizer:\n  vocab_size: 120\n"
               "data:\n  train_files: [" + tmp_->str("train.txt") + "]\n  valid_files: [" + tmp_->str("valid.txt") +
               "]\n  max_seq_len: 32\n"
               "optimizer:\n  lr: 3.0e-3\nschedule:\n  warmup_steps: 10\n"
               "train:\n  steps: 300\n  batch_size: 16\n  precision: fp32\n  device: cpu\n"
               "checkpoint:\n  every: 0\nlogging:\n  every: 50\n  progress: plain\n"
               "eval:\n  every: 0\n  max_sequences: 64\n");
    run_ = tmp_->str("run");
    auto r = run_roformer("train -c " + tmp_->str("run.yaml") + " --run-dir " + run_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete tmp_; }
  static json eval_json(const std::string& args) {
    auto r = run_roformer("eval --device cpu --checkpoint " + run_ + " --json " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return last_json(r.output);
  }
  static TempDir* tmp_;
  static std::string run_;
};
TempDir* ToolsTest::tmp_ = nullptr;
std::string ToolsTest::run_;

}  // namespace

TEST_F(ToolsTest, EvalFiguresDoNotDependOnBatchSizeOrRepetition) {
  auto a = eval_json("--batch-size 1");
  auto b = eval_json("--batch-size 7");
  auto c = eval_json("--batch-size 64");
  auto d = eval_json("--batch-size 7");
  EXPECT_GT(a["n_predicted"].get<int64_t>(), 500);
  for (const auto& x : {b, c, d}) {
    EXPECT_EQ(x["n_predicted"], a["n_predicted"]);
    EXPECT_EQ(x["accuracy"], a["accuracy"]);
    EXPECT_EQ(x["top5_accuracy"], a["top5_accuracy"]);
    // Counts and accuracies are exact; the loss sums per-position float64 terms, equal up to the
    // float32 rounding of the logits (GEMM blocking differs with the batch size).
    EXPECT_NEAR(x["loss"].get<double>(), a["loss"].get<double>(), 1e-7 * a["loss"].get<double>());
  }
  // Another seed draws other masks.
  auto e = eval_json("--seed 9");
  EXPECT_NE(e["accuracy"], a["accuracy"]);
}

// --seq-len: evaluate at another length than the training one (32): within the 48 rows of the rotary
// table and beyond them (the table extends); the report shows the length used.
TEST_F(ToolsTest, EvalAtAnotherSequenceLength) {
  auto j = eval_json("--data " + tmp_->str("train.txt") + " --seq-len 48 --max-sequences 8");
  EXPECT_EQ(j["seq_len"], 48);
  EXPECT_EQ(j["train_seq_len"], 32);
  EXPECT_EQ(j["n_sequences"], 8);
  // One run beyond the table: the report (stderr) and the JSON record (stdout) both say the length.
  auto r = run_roformer("eval --device cpu --json --checkpoint " + run_ + " --data " + tmp_->str("train.txt") +
                        " --seq-len 128 --max-sequences 8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8 x 128 tokens (trained at 32)"), std::string::npos) << r.output;
  const auto beyond = last_json(r.output);
  EXPECT_EQ(beyond["seq_len"], 128);
  EXPECT_GT(beyond["n_predicted"].get<int64_t>(), 8 * 128 / 10);
  r = run_roformer("eval --device cpu --checkpoint " + run_ + " --seq-len 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--seq-len: must be a whole number of at least 3, got '2'"), std::string::npos) << r.output;
}

// The results are eval's output (stdout); logs stay on stderr. With --json stdout is the one record.
TEST_F(ToolsTest, EvalPrintsItsResultsOnStdout) {
  const std::string eval = roformer_bin() + " eval --device cpu --max-sequences 8 --checkpoint " + run_;
  auto table = run_command("(" + eval + " 2>/dev/null)");  // run_command adds 2>&1 outside
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("MLM accuracy    0."), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("sequences       8 x 32 tokens"), std::string::npos) << table.output;
  auto record = run_command("(" + eval + " --json 2>/dev/null)");
  ASSERT_EQ(record.exit_code, 0) << record.output;
  EXPECT_EQ(std::count(record.output.begin(), record.output.end(), '\n'), 1) << record.output;
  EXPECT_EQ(json::parse(record.output)["n_sequences"], 8);
}

// A run's data.valid_files are relative to where the run was started: eval elsewhere says so, and
// that --data overrides them.
TEST_F(ToolsTest, EvalElsewhereSaysWhereTheRunsValidFilesAreRead) {
  TempDir tmp;
  write_file(tmp.str("train.txt"), synthetic_corpus(20, 4, 5));
  write_file(tmp.str("valid.txt"), synthetic_corpus(10, 4, 6));
  write_file(tmp.str("rel.yaml"), two_step_yaml("post", "train.txt"));
  auto trained = run_command("cd " + tmp.str() + " && " + roformer_bin() +
                             " train -c rel.yaml --run-dir run --set data.valid_files=[valid.txt]");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  fs::create_directories(tmp.str("elsewhere"));
  auto r = run_command("cd " + tmp.str("elsewhere") + " && " + roformer_bin() + " eval --device cpu --checkpoint ../run");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("input file not found: valid.txt: it is the run's data.valid_files (its config.yaml), read "
                          "relative to the directory the run was started in, not to this one (" + tmp.str("elsewhere") +
                          "); pass --data FILE... to evaluate other files, or run eval from that directory"),
            std::string::npos) << r.output;
  auto from_there = run_command("cd " + tmp.str() + " && " + roformer_bin() + " eval --device cpu --json --checkpoint run");
  EXPECT_EQ(from_there.exit_code, 0) << from_there.output;
  auto with_data = run_command("cd " + tmp.str("elsewhere") + " && " + roformer_bin() +
                               " eval --device cpu --json --checkpoint ../run --data ../valid.txt");
  EXPECT_EQ(with_data.exit_code, 0) << with_data.output;
}

TEST_F(ToolsTest, TrainedModelBeatsUnigramBaseline) {
  auto r = eval_json("");
  // The most frequent label of the evaluated positions themselves: an upper bound of what a unigram
  // model (trained on any data) scores on these masks.
  auto corpus = roformer::data::PreparedCorpus::open(run_ + "/data/valid");
  roformer::config::Config cfg;
  cfg.data.max_seq_len = 32;
  auto opts = roformer::data::loader_options_from_config(cfg, 32);
  auto batches = roformer::data::make_eval_batches(corpus, opts, 1 << 30, 32, 0);
  std::map<int64_t, int64_t> counts;
  int64_t n = 0;
  for (const auto& b : batches)
    for (int64_t i = 0; i < b.pred_labels.numel(); ++i, ++n) ++counts[b.pred_labels[i].item<int64_t>()];
  int64_t best = 0;
  for (const auto& [id, c] : counts) best = std::max(best, c);
  const double unigram = static_cast<double>(best) / static_cast<double>(n);
  EXPECT_EQ(n, r["n_predicted"].get<int64_t>());
  EXPECT_GT(r["accuracy"].get<double>(), unigram + 0.05) << "unigram baseline " << unigram;
}

TEST_F(ToolsTest, InspectReportsStateAndDamage) {
  auto ok = run_roformer("inspect " + run_);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("integrity     ok"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("step          300"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("tokens seen   153600"), std::string::npos) << ok.output;  // 300 x 16 x 32
  EXPECT_NE(ok.output.find("hidden_size: 64"), std::string::npos) << ok.output;
  // The last train record: the logging window's means apart from the batch's own figures (issue 41).
  EXPECT_NE(ok.output.find("last train    step 300: loss "), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find(" (mean of the logging window); last batch loss "), std::string::npos) << ok.output;
  // Damage a copy of the checkpoint.
  const std::string copy = tmp_->str("damaged");
  fs::copy(run_ + "/checkpoints/step_00000300", copy, fs::copy_options::recursive);
  {
    std::ofstream f(copy + "/optimizer.pt", std::ios::app | std::ios::binary);
    f << "junk";
  }
  auto bad = run_roformer("inspect " + copy);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("DAMAGED: optimizer.pt has"), std::string::npos) << bad.output;
  auto ev = run_roformer("eval --device cpu --checkpoint " + copy);
  EXPECT_EQ(ev.exit_code, 1);
  EXPECT_NE(ev.output.find("is not usable: optimizer.pt"), std::string::npos) << ev.output;
  auto missing = run_roformer("eval --device cpu --checkpoint " + tmp_->str("nope"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("does not exist"), std::string::npos) << missing.output;
  // Incomplete: no manifest.
  fs::remove(copy + "/manifest.json");
  auto incomplete = run_roformer("eval --device cpu --checkpoint " + copy);
  EXPECT_EQ(incomplete.exit_code, 1);
  EXPECT_NE(incomplete.output.find("no manifest.json"), std::string::npos) << incomplete.output;
}

// A copy of the suite's checkpoint with `file` rewritten by `edit` and re-checksummed in the
// manifest, as a careful hand-edit would leave it: it still verifies.
std::string edited_checkpoint(const std::string& run, const std::string& copy, const std::string& file,
                              const std::function<std::string(std::string)>& edit) {
  fs::copy(run + "/checkpoints/step_00000300", copy, fs::copy_options::recursive);
  rewrite_checkpoint_file(copy, file, edit(read_file(copy + "/" + file)));
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(copy).ok);
  return copy;
}

// Issue 40: a checkpoint whose config.yaml asks for a position table no machine holds (edited by
// hand) is refused by every command that builds its model, naming the key, before anything is
// allocated (it used to abort inside LibTorch).
TEST_F(ToolsTest, HugePositionTableInACheckpointIsRefusedNamingTheKey) {
  const std::string copy = edited_checkpoint(run_, tmp_->str("huge_table"), "config.yaml", [](std::string yaml) {
    const std::string from = "max_position_embeddings: 48";
    const auto at = yaml.find(from);
    EXPECT_NE(at, std::string::npos) << yaml;
    return yaml.replace(at, from.size(), "max_position_embeddings: 1000000000000");
  });
  for (const std::string& command : {"eval --device cpu --checkpoint " + copy,
                                    "fill-mask --device cpu --checkpoint " + copy + " \"the [MASK] cat.\"",
                                    "export --checkpoint " + copy + " --out " + tmp_->str("huge_export")}) {
    SCOPED_TRACE(command);
    auto r = run_roformer(command);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("checkpoint " + copy + " describes a model that needs at least"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("most of it is set by model.max_position_embeddings in its config.yaml"),
              std::string::npos) << r.output;
  }
  EXPECT_FALSE(fs::exists(tmp_->str("huge_export")));
}

// Issue 40: a metrics record with a wrong JSON type (edited by hand) is one line naming the file,
// the key and what to do, for inspect (the last train record) and the export's model card (the last
// evaluation), never a raw JSON type error (exit 2).
TEST_F(ToolsTest, HandEditedMetricsRecordIsOneLineNamingTheKey) {
  auto retype = [](const std::string& type, const std::string& key) {
    return [=](std::string jsonl) {
      std::istringstream lines(jsonl);
      std::string out, line;
      std::vector<std::string> all;
      while (std::getline(lines, line)) all.push_back(line);
      for (auto it = all.rbegin(); it != all.rend(); ++it) {
        auto rec = json::parse(*it);
        if (rec["type"] != type) continue;
        rec[key] = "high";
        *it = rec.dump();
        break;
      }
      for (const auto& l : all) out += l + "\n";
      return out;
    };
  };
  // A record of an older version (no accuracy_avg) still reads: the loss's mean only.
  const std::string older = edited_checkpoint(run_, tmp_->str("metrics_older"), "metrics.jsonl", [](std::string jsonl) {
    for (size_t at; (at = jsonl.find("\"accuracy_avg\":")) != std::string::npos;)
      jsonl.erase(at, jsonl.find(',', at) + 1 - at);
    return jsonl;
  });
  auto old = run_roformer("inspect " + older);
  EXPECT_EQ(old.exit_code, 0) << old.output;
  EXPECT_EQ(old.output.find("accuracy_avg"), std::string::npos);
  EXPECT_NE(old.output.find(" (mean of the logging window); last batch loss "), std::string::npos) << old.output;
  const std::string train = edited_checkpoint(run_, tmp_->str("metrics_train"), "metrics.jsonl", retype("train", "loss"));
  auto inspect = run_roformer("inspect " + train);
  EXPECT_EQ(inspect.exit_code, 1) << inspect.output;
  EXPECT_NE(inspect.output.find(train + "/metrics.jsonl (its last \"train\" record): \"loss\" is \"high\" (a string) "
                                "but must be a number; fix or remove that line"), std::string::npos) << inspect.output;
  const std::string eval = edited_checkpoint(run_, tmp_->str("metrics_eval"), "metrics.jsonl", retype("eval", "accuracy"));
  auto r = run_roformer("export --checkpoint " + eval + " --out " + tmp_->str("metrics_export"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(eval + "/metrics.jsonl (its last \"eval\" record): \"accuracy\" is \"high\" (a string) but "
                          "must be a number"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(tmp_->str("metrics_export/model.safetensors")));
}

TEST_F(ToolsTest, FillMaskErrors) {
  auto none = run_roformer("fill-mask --device cpu --checkpoint " + run_ + " \"the red cat sees a dog.\"");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.output.find("text 1 (\"the red cat sees a dog.\"): it has no [MASK] to fill"), std::string::npos)
      << none.output;
  // Rotary positions take a text beyond model.max_position_embeddings (48) as eval's --seq-len does;
  // a learned absolute table refuses it (PositionNoneIsRefusedAndEvalBeyondTheTable).
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "the red cat sees a dog. ";
  auto beyond = run_roformer("fill-mask --device cpu --checkpoint " + run_ + " \"" + long_text + "[MASK]\"");
  EXPECT_EQ(beyond.exit_code, 0) << beyond.output;
  EXPECT_NE(beyond.output.find("  -> "), std::string::npos) << beyond.output;
  // A text that cannot be filled is named and the others still run; exit 1 at the end.
  auto mixed = run_command("(" + roformer_bin() + " fill-mask --device cpu --checkpoint " + run_ +
                           " 'the [MASK] cat.' 'no mask here' 'a red [MASK].' 2>&1 >/dev/null)");
  EXPECT_EQ(mixed.exit_code, 1) << mixed.output;
  EXPECT_NE(mixed.output.find("text 2 (\"no mask here\"): it has no [MASK] to fill"), std::string::npos) << mixed.output;
  EXPECT_NE(mixed.output.find("1 of 3 text(s) could not be filled"), std::string::npos) << mixed.output;
  auto filled = run_command("(" + roformer_bin() + " fill-mask --device cpu --checkpoint " + run_ +
                            " 'the [MASK] cat.' 'no mask here' 'a red [MASK].' 2>/dev/null)");
  EXPECT_EQ(filled.exit_code, 1);
  EXPECT_NE(filled.output.find("the [MASK] cat.\n  -> the "), std::string::npos) << filled.output;
  EXPECT_NE(filled.output.find("a red [MASK].\n  -> a red "), std::string::npos) << filled.output;
  // stdin: one text per line, JSON records.
  auto piped = run_command("printf 'the [MASK] cat.\\na red [MASK].\\n' | " + roformer_bin() + " fill-mask --device cpu --json --top-k 2 --checkpoint " + run_);
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  std::istringstream lines(piped.output);
  std::string line;
  int records = 0;
  while (std::getline(lines, line))
    if (!line.empty() && line[0] == '{') {
      auto rec = json::parse(line);
      EXPECT_EQ(rec["masks"].size(), 1u);
      EXPECT_EQ(rec["masks"][0]["predictions"].size(), 2u);
      ++records;
    }
  EXPECT_EQ(records, 2);
}

TEST_F(ToolsTest, FillMaskTakesEachTextVerbatim) {
  // Brackets and commas are text, not the option parser's list syntax.
  auto r = run_command(roformer_bin() + " fill-mask --device cpu --json --top-k 1 --checkpoint " + run_ +
                       " '[The] [MASK] was [over]' '[MASK], [MASK]'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<json> records;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line))
    if (!line.empty() && line[0] == '{') records.push_back(json::parse(line));
  ASSERT_EQ(records.size(), 2u) << r.output;
  EXPECT_EQ(records[0]["text"], "[The] [MASK] was [over]");
  EXPECT_EQ(records[0]["masks"].size(), 1u);
  EXPECT_EQ(records[1]["text"], "[MASK], [MASK]");
  EXPECT_EQ(records[1]["masks"].size(), 2u);
}

// The filled text: the top prediction in place of [MASK], detokenized ("▁red" is "red").
TEST_F(ToolsTest, FillMaskShowsTheFilledText) {
  auto r = run_command("(" + roformer_bin() + " fill-mask --device cpu --json --top-k 1 --checkpoint " + run_ +
                       " 'the [MASK] cat.' 2>/dev/null)");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json rec = json::parse(r.output);
  const std::string piece = rec["masks"][0]["predictions"][0]["token"];
  const std::string word_start = "\xe2\x96\x81";  // ▁
  const std::string word = piece.rfind(word_start, 0) == 0 ? piece.substr(word_start.size()) : piece;
  EXPECT_EQ(rec["filled"], "the " + word + " cat.") << r.output;  // the rest of the text as written
  auto table = run_command("(" + roformer_bin() + " fill-mask --device cpu --top-k 1 --checkpoint " + run_ +
                           " 'the [MASK] cat.' 2>/dev/null)");
  EXPECT_NE(table.output.find("the [MASK] cat.\n  -> the " + word + " cat.\n  [MASK] #1   1. " + piece),
            std::string::npos) << table.output;
}

// Invalid UTF-8 is named (never quoted back) like a text without [MASK]: the others still run, and
// the command exits 1 at the end (issue 55: one invalid text sank them all).
TEST_F(ToolsTest, FillMaskNamesInvalidUtf8AndFillsTheOthers) {
  for (const std::string json_flag : {"", " --json"}) {
    auto piped = run_command("printf 'the [MASK] cat.\\na \\303\\050 [MASK].\\n' | " + roformer_bin() +
                             " fill-mask" + json_flag + " --checkpoint " + run_);
    EXPECT_EQ(piped.exit_code, 1) << piped.output;
    EXPECT_NE(piped.output.find("stdin line 2: invalid UTF-8 at byte 3; pass UTF-8 text"), std::string::npos)
        << piped.output;
    EXPECT_NE(piped.output.find(json_flag.empty() ? "the [MASK] cat.\n  -> the " : "{\"filled\":\"the "),
              std::string::npos) << "the valid text is filled: " << piped.output;
    EXPECT_NE(piped.output.find("1 of 2 text(s) could not be filled"), std::string::npos) << piped.output;
  }
  auto arg = run_command(roformer_bin() + " fill-mask --json --checkpoint " + run_ + " 'ok [MASK]' \"$(printf 'bad \\377 [MASK]')\"");
  EXPECT_EQ(arg.exit_code, 1) << arg.output;
  EXPECT_NE(arg.output.find("text 2: invalid UTF-8 at byte 5"), std::string::npos) << arg.output;
  EXPECT_NE(arg.output.find("\"text\":\"ok [MASK]\""), std::string::npos) << arg.output;
  EXPECT_EQ(arg.output.find("\377"), std::string::npos) << "the invalid text is not quoted back";
}

TEST_F(ToolsTest, CountOptionsSayAtLeastOne) {
  auto k = run_roformer("fill-mask --top-k 0 --checkpoint " + run_ + " 'a [MASK]'");
  EXPECT_NE(k.exit_code, 0);
  EXPECT_NE(k.output.find("--top-k: must be a whole number of at least 1, got '0'"), std::string::npos) << k.output;
  auto b = run_roformer("eval --batch-size 0 --checkpoint " + run_);
  EXPECT_NE(b.exit_code, 0);
  EXPECT_NE(b.output.find("--batch-size: must be a whole number of at least 1, got '0'"), std::string::npos)
      << b.output;
  EXPECT_EQ(k.output.find("1.797"), std::string::npos) << k.output;
  EXPECT_EQ(b.output.find("1.797"), std::string::npos) << b.output;
}

// --mask-prob is a fraction in (0, 1]: 0 would predict nothing and is refused, never read as "the default".
TEST_F(ToolsTest, MaskProbMustBeAFraction) {
  for (const char* bad : {"0", "-0.1", "1.5", "x"}) {
    auto r = run_roformer("eval --device cpu --mask-prob " + std::string(bad) + " --checkpoint " + run_);
    EXPECT_EQ(r.exit_code, 1) << bad << r.output;
    EXPECT_NE(r.output.find("--mask-prob: must be a number in (0, 1], got '" + std::string(bad) + "'"),
              std::string::npos) << r.output;
  }
  const json half = eval_json("--mask-prob 0.5 --max-sequences 16");
  const json usual = eval_json("--max-sequences 16");
  EXPECT_EQ(half["mask_prob"], 0.5);
  EXPECT_EQ(usual["mask_prob"], 0.15);  // the evaluation protocol's rate (eval.mask_prob)
  EXPECT_EQ(half["n_predicted"].get<int64_t>(), 16 * 15);  // round(0.5 * 30) of 16 sequences of 32 tokens
  EXPECT_EQ(usual["n_predicted"].get<int64_t>(), 16 * 5);  // round(0.15 * 30)
}

// A run trained with another masking recipe is evaluated by the same protocol (eval.mask_prob 0.15,
// 80/10/10): during training and by `roformer eval`, with the same predicted positions as any run.
TEST(ToolsEval, TrainingMaskingDoesNotChangeTheEvaluation) {
  TempDir tmp;
  write_file(tmp.str("train.txt"), synthetic_corpus(40, 4, 3));
  write_file(tmp.str("valid.txt"), synthetic_corpus(10, 4, 4));
  auto run = [&](const std::string& name, const std::string& masking) {
    write_file(tmp.str(name + ".yaml"),
               model_yaml("post") + "tokenizer:\n  vocab_size: 120\n"
               "data:\n  train_files: [" + tmp.str("train.txt") + "]\n  valid_files: [" + tmp.str("valid.txt") +
               "]\n  max_seq_len: 32\n" + masking +
               "schedule:\n  warmup_steps: 1\ntrain:\n  steps: 4\n  batch_size: 4\n  precision: fp32\n"
               "  device: cpu\nlogging:\n  progress: plain\neval:\n  every: 0\n  max_sequences: 32\n");
    auto r = run_roformer("train -c " + tmp.str(name + ".yaml") + " --run-dir " + tmp.str(name));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    json last;
    std::istringstream lines(read_file(tmp.str(name + "/metrics.jsonl")));
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && json::parse(line)["type"] == "eval") last = json::parse(line);
    return last;
  };
  const json standard = run("standard", "");
  const json heavy = run("heavy", "masking:\n  mask_prob: 0.4\n  mask_token_rate: 1.0\n  random_token_rate: 0.0\n");
  ASSERT_FALSE(standard.is_null());
  ASSERT_FALSE(heavy.is_null());
  EXPECT_EQ(heavy["n_predicted"], standard["n_predicted"]);
  EXPECT_EQ(heavy["n_sequences"], standard["n_sequences"]);
  auto e = run_roformer("eval --device cpu --json --checkpoint " + tmp.str("heavy"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_EQ(last_json(e.output)["mask_prob"], 0.15);
}

TEST_F(ToolsTest, ExportRefusesNonEmptyDirectoryAndCheckpoints) {
  const std::string out = tmp_->str("occupied");
  write_file(out + "/notes.txt", "mine");
  auto r = run_roformer("export --checkpoint " + run_ + " --out " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--out " + out + " is not empty; export into a new or empty directory, or pass --force"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/model.safetensors"));
  auto forced = run_roformer("export --force --checkpoint " + run_ + " --out " + out);
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  EXPECT_EQ(read_file(out + "/notes.txt"), "mine");
  // A checkpoint (or the checkpoints folder) is never written into, even with --force.
  const std::string ck = run_ + "/checkpoints/step_00000300";
  for (const std::string& target : {ck, run_ + "/checkpoints"}) {
    auto into = run_roformer("export --force --checkpoint " + run_ + " --out " + target);
    EXPECT_EQ(into.exit_code, 1) << into.output;
    EXPECT_NE(into.output.find("--out " + target + " holds a checkpoint"), std::string::npos) << into.output;
  }
  EXPECT_TRUE(roformer::checkpoint::verify_checkpoint(ck).ok);
}

TEST_F(ToolsTest, EvalWarnsWhenFallingBackToAnOlderCheckpoint) {
  // A copy of the run with a newer, damaged checkpoint.
  const std::string run = tmp_->str("fallback");
  fs::create_directories(run + "/checkpoints");
  fs::copy(run_ + "/checkpoints/step_00000300", run + "/checkpoints/step_00000300", fs::copy_options::recursive);
  fs::copy(run_ + "/checkpoints/step_00000300", run + "/checkpoints/step_00000301", fs::copy_options::recursive);
  {
    std::ofstream f(run + "/checkpoints/step_00000301/model.safetensors", std::ios::app | std::ios::binary);
    f << "junk";
  }
  for (const std::string& cmd : {"eval --device cpu --max-sequences 8 --checkpoint " + run, "export --checkpoint " + run +
                                " --out " + tmp_->str("fallback_hf")}) {
    auto r = run_roformer(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("skipping checkpoint " + run + "/checkpoints/step_00000301: model.safetensors has"),
              std::string::npos) << r.output;
    EXPECT_NE(r.output.find("using the older checkpoint " + run + "/checkpoints/step_00000300"), std::string::npos)
        << r.output;
  }
}

TEST_F(ToolsTest, ExportRoundTripThroughTransformers) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  const std::string out = tmp_->str("hf");
  auto r = run_roformer("export --checkpoint " + run_ + " --format hf --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"config.json", "model.safetensors", "spiece.model", "tokenizer.json", "tokenizer_config.json",
                        "special_tokens_map.json", "README.md"})
    EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
  auto check = check_export_logits(run_, out, tmp_->str("ref.safetensors"));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("RoFormerForMaskedLM loaded with no missing/unexpected keys"), std::string::npos) << check.output;
}

// pipeline("fill-mask", model=EXPORT) returns roformer fill-mask's top 5, probabilities within 1e-5.
TEST_F(ToolsTest, ExportedModelFillsMasksAsRoformerDoes) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  const std::string out = tmp_->str("hf_fill");
  ASSERT_EQ(run_roformer("export --checkpoint " + run_ + " --out " + out).exit_code, 0);
  const std::string texts =
      "The small [MASK] sees a dog near the house.\nA red cat likes the [MASK] under the tree.\n"
      "Every old teacher [MASK] one boat behind the garden.\nThis bright child follows that horse [MASK] the city.\n"
      "[MASK] quiet bird watches a window over the river.\nOne dark horse carries a book beside the [MASK].\n";
  auto ours = run_command("printf '" + texts + "' | " + roformer_bin() + " fill-mask --json --top-k 5 --device cpu "
                          "--checkpoint " + run_ + " 2>/dev/null");
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  write_file(tmp_->str("fill.jsonl"), ours.output);
  auto check = run_command(python() + " " + source_dir() + "/tests/python/check_hf_fill_mask.py " + out + " " +
                           tmp_->str("fill.jsonl") + " 1e-5");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("same top-5 tokens for 6/6 texts"), std::string::npos) << check.output;
  std::cout << check.output;  // the measured largest probability difference
  // The model card says what was trained and how to load it.
  const std::string card = read_file(out + "/README.md");
  EXPECT_NE(card.find("| steps | 300 |"), std::string::npos) << card;
  EXPECT_NE(card.find("| tokens seen | 153600 |"), std::string::npos) << card;
  EXPECT_NE(card.find(tmp_->str("train.txt")), std::string::npos) << card;
  EXPECT_NE(card.find("validation MLM accuracy (last evaluation, 15% of the tokens masked) | **0."), std::string::npos)
      << card;
  EXPECT_NE(card.find("AutoTokenizer.from_pretrained(\"" + out + "\")"), std::string::npos) << card;
}

// What a newcomer reads: inspect and the model card give the sizes the model has, not the config's
// 0 ("take it from the tokenizer", "the hidden size"); the card names the training files without a
// path of the training machine and says at which rate training and evaluation masked.
TEST_F(ToolsTest, InspectAndTheModelCardSayTheResolvedSizes) {
  const auto inspect = run_roformer("inspect " + run_);
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("sizes         vocab_size 120, embedding_size 64 (resolved)"), std::string::npos)
      << inspect.output;
  EXPECT_NE(inspect.output.find("  vocab_size: 120\n"), std::string::npos) << inspect.output;
  EXPECT_EQ(inspect.output.find("vocab_size: 0\n"), std::string::npos) << inspect.output;
  EXPECT_EQ(inspect.output.find("embedding_size: 0\n"), std::string::npos) << inspect.output;
  const auto as_json = run_roformer("inspect --json " + run_);
  EXPECT_EQ(last_json(as_json.output)["vocab_size"], 120) << as_json.output;
  const std::string out = tmp_->str("hf_card");
  ASSERT_EQ(run_roformer("export --checkpoint " + run_ + " --out " + out).exit_code, 0);
  const std::string card = read_file(out + "/README.md");
  EXPECT_NE(card.find("| training files | `train.txt` |"), std::string::npos) << card;
  EXPECT_NE(card.find("| training masked | 15% of the tokens |"), std::string::npos) << card;
  EXPECT_NE(card.find("(last evaluation, 15% of the tokens masked)"), std::string::npos) << card;
  EXPECT_NE(card.find("| tokenizer | SentencePiece unigram, 120 ids;"), std::string::npos) << card;
  EXPECT_EQ(card.find("vocab_size: 0\n"), std::string::npos) << card;
  EXPECT_EQ(card.find("embedding_size: 0\n"), std::string::npos) << card;
}

TEST(ToolsExport, PreLayerNormIsRefused) {
  TempDir tmp;
  write_file(tmp.str("train.txt"), synthetic_corpus(20, 3, 5));
  write_file(tmp.str("pre.yaml"), two_step_yaml("pre", tmp.str("train.txt")));
  ASSERT_EQ(run_roformer("train -c " + tmp.str("pre.yaml") + " --run-dir " + tmp.str("run")).exit_code, 0);
  auto r = run_roformer("export --checkpoint " + tmp.str("run") + " --out " + tmp.str("hf"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("this model is pre-LayerNorm (model.norm: pre); Hugging Face's RoFormer is post-LayerNorm "
                          "only"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ModernBERT, has model.feed_forward: glu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Export is refused"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(tmp.str("hf/model.safetensors")));
}

// Without positions there is nothing in Hugging Face to export to: refused by name. Evaluation (and
// fill-mask) beyond the 48 positions: the learned absolute table has no rows there; without positions
// any length runs.
TEST(ToolsExport, PositionNoneIsRefusedAndEvalBeyondTheTable) {
  TempDir tmp;
  write_file(tmp.str("train.txt"), synthetic_corpus(20, 3, 5));
  write_file(tmp.str("run.yaml"), two_step_yaml("post", tmp.str("train.txt")));
  for (const std::string position : {"absolute", "none"}) {
    SCOPED_TRACE(position);
    const auto run = tmp.str("run_" + position), out = tmp.str("hf_" + position);
    auto trained = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + run + " --set model.position=" + position);
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    auto beyond = run_roformer("eval --device cpu --checkpoint " + run + " --data " + tmp.str("train.txt") +
                               " --seq-len 64 --max-sequences 4");
    if (position == "absolute") {
      EXPECT_EQ(beyond.exit_code, 1);
      EXPECT_NE(beyond.output.find("--seq-len 64 exceeds model.max_position_embeddings 48 of this checkpoint (its "
                                   "learned absolute position table has no rows beyond); evaluate at 48 or fewer"),
                std::string::npos) << beyond.output;
      std::string long_text = "[MASK]";
      for (int i = 0; i < 12; ++i) long_text += " the red cat sees a dog.";
      const auto fill = run_roformer("fill-mask --device cpu --checkpoint " + run + " '" + long_text + "'");
      EXPECT_EQ(fill.exit_code, 1) << fill.output;
      EXPECT_NE(fill.output.find("; the model takes at most 48 (model.max_position_embeddings: its learned absolute "
                                 "position table has no rows beyond). It is refused rather than truncated"),
                std::string::npos) << fill.output;
      continue;  // its export: AbsolutePositionsExportToBertForMaskedLM
    }
    EXPECT_EQ(beyond.exit_code, 0) << beyond.output;
    EXPECT_NE(beyond.output.find("4 x 64 tokens (trained at 32)"), std::string::npos) << beyond.output;
    auto r = run_roformer("export --checkpoint " + run + " --out " + out);
    EXPECT_EQ(r.exit_code, 1);
    // The families are listed from their table (src/hf/), so a scheme without one is refused alike.
    EXPECT_NE(r.output.find("this model uses model.position: none with model.feed_forward: mlp, which none of Hugging "
                            "Face's families computes (RoFormer has rotary positions, BERT has learned absolute "
                            "positions, RoBERTa has learned absolute positions from padding_idx + 1, DeBERTa-v2 has "
                            "relative positions in disentangled attention and ModernBERT has "
                            "rotary positions in pre-LayerNorm GeGLU layers), so export is refused"),
              std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out + "/model.safetensors"));
  }
}

// Trains TMP/run (the two-step config on a synthetic corpus, with `overrides`) 30 steps at a high
// rate, so that biases and LayerNorm parameters are far from their initial 0 and 1, and exports it
// to TMP/hf, which must be `architecture`; *config is its config.json.
void train_and_export(const TempDir& tmp, const std::string& overrides, const std::string& architecture,
                      json* config) {
  write_file(tmp.str("train.txt"), synthetic_corpus(40, 3, 5));
  write_file(tmp.str("run.yaml"), two_step_yaml("post", tmp.str("train.txt")));
  auto trained = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str("run") + overrides +
                              " --set train.steps=30 --set optimizer.lr=1.0e-2");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto r = run_roformer("export --checkpoint " + tmp.str("run") + " --out " + tmp.str("hf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("as " + architecture + " to " + tmp.str("hf")), std::string::npos) << r.output;
  *config = json::parse(read_file(tmp.str("hf/config.json")));
}

// transformers on tmp/hf (the export of tmp/run): `architecture` loads it with no missing or
// unexpected keys and gives the checkpoint's logits within `tolerance` (check_hf_export.py), and
// pipeline("fill-mask") returns roformer fill-mask's top 5 for three texts. Prints both figures.
void expect_transformers_agrees(const TempDir& tmp, const std::string& architecture, double tolerance) {
  auto check = check_export_logits(tmp.str("run"), tmp.str("hf"), tmp.str("ref.safetensors"), tolerance);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find(architecture + " loaded with no missing/unexpected keys"), std::string::npos)
      << check.output;
  std::cout << check.output;  // the measured largest difference
  const std::string texts = "The small [MASK] sees a dog near the house.\nA red cat likes the [MASK] under the tree.\n"
                            "[MASK] quiet bird watches a window over the river.\n";
  auto ours = run_command("printf '" + texts + "' | " + roformer_bin() + " fill-mask --json --top-k 5 --device cpu "
                          "--checkpoint " + tmp.str("run") + " 2>/dev/null");
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  write_file(tmp.str("fill.jsonl"), ours.output);
  auto fill = run_command(python() + " " + source_dir() + "/tests/python/check_hf_fill_mask.py " + tmp.str("hf") + " " +
                          tmp.str("fill.jsonl") + " 1e-5");
  EXPECT_EQ(fill.exit_code, 0) << fill.output;
  std::cout << fill.output;
}

// `train -c TMP/run.yaml --init-from TMP/hf` (with `overrides`, which must name the export's
// architecture) starts at the source model TMP/run: its first evaluation equals `roformer eval` of
// the source on the same text and seed.
void expect_init_from_starts_at_source(const TempDir& tmp, const std::string& overrides) {
  const std::string evals = " --set data.valid_files=[" + tmp.str("train.txt") + "] --set eval.max_sequences=16";
  auto from = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str("from_hf") + " --init-from " +
                           tmp.str("hf") + overrides + evals);
  ASSERT_EQ(from.exit_code, 0) << from.output;
  const auto first = read_metrics(tmp.str("from_hf"), "eval");
  ASSERT_TRUE(first.count(0)) << from.output;
  auto ref = run_roformer("eval --device cpu --json --max-sequences 16 --checkpoint " + tmp.str("run") + " --data " +
                          tmp.str("train.txt"));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  EXPECT_EQ(first.at(0)["accuracy"], last_json(ref.output)["accuracy"]);
  EXPECT_NEAR(first.at(0)["loss"].get<double>(), last_json(ref.output)["loss"].get<double>(), 1e-6);
}

// A post-LN model with learned absolute positions is BERT: it exports to Hugging Face's
// BertForMaskedLM, which gives its logits (max |diff| <= 1e-6 over the unpadded positions, float32;
// check_hf_export.py; 0 measured: both run the same float32 CPU kernels), and `train --init-from`
// takes the export back. The source is trained 30 steps at a high rate so that biases and LayerNorm
// parameters are far from their initial 0 and 1 (a misplaced tensor shows in the logits: swapping
// layer 0's query and key biases moved them by 2e-5). With a factorized embedding it is refused (BERT has no
// E->H projection).
TEST(ToolsExport, AbsolutePositionsExportToBertForMaskedLM) {
  TempDir tmp;
  const std::string absolute = " --set model.position=absolute";
  json config;
  ASSERT_NO_FATAL_FAILURE(train_and_export(tmp, absolute, "BertForMaskedLM", &config));
  EXPECT_EQ(config["model_type"], "bert");
  EXPECT_EQ(config["architectures"], json::array({"BertForMaskedLM"}));
  EXPECT_EQ(config["position_embedding_type"], "absolute");
  EXPECT_FALSE(config.contains("embedding_size"));
  const auto weights = roformer::core::load_safetensors(tmp.str("hf/model.safetensors"));
  EXPECT_EQ(weights.count("bert.embeddings.position_embeddings.weight"), 1u);
  for (const auto& [name, t] : weights) EXPECT_NE(name.rfind("roformer.", 0), 0u) << name;
  EXPECT_NE(read_file(tmp.str("hf/README.md")).find("BertForMaskedLM.from_pretrained"), std::string::npos);
  if (python().empty()) {
    std::cout << "[ SKIPPED  ] the transformers check: no Python configured (ROFORMER_PYTHON)\n";
  } else {
    auto check = check_export_logits(tmp.str("run"), tmp.str("hf"), tmp.str("ref.safetensors"), 1e-6);
    EXPECT_EQ(check.exit_code, 0) << check.output;
    EXPECT_NE(check.output.find("BertForMaskedLM loaded with no missing/unexpected keys"), std::string::npos)
        << check.output;
    std::cout << check.output;  // the measured largest difference
  }
  // --init-from the BERT export starts at the source model.
  expect_init_from_starts_at_source(tmp, absolute);
  // The config must say absolute: the architecture comes with the weights.
  auto rotary = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str("from_hf_rotary") +
                             " --init-from " + tmp.str("hf"));
  EXPECT_EQ(rotary.exit_code, 1);
  EXPECT_NE(rotary.output.find("model.position is rotary in the config but the weights were trained with absolute"),
            std::string::npos) << rotary.output;

  auto factorized = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str("factorized") + absolute +
                                 " --set model.embedding_size=32 --set train.steps=2");
  ASSERT_EQ(factorized.exit_code, 0) << factorized.output;
  auto refused = run_roformer("export --checkpoint " + tmp.str("factorized") + " --out " + tmp.str("hf_factorized"));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("this model has learned absolute positions and a factorized embedding "
                                "(model.embedding_size 32 != model.hidden_size 64); Hugging Face's BERT has no "
                                "embedding projection, so export is refused"),
            std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(tmp.str("hf_factorized/model.safetensors")));
}

// Disentangled attention (DeBERTa-v3's form: shared projections, both terms, log buckets, no
// absolute table) exports to Hugging Face's DebertaV2ForMaskedLM with its legacy MLM head, which
// gives its logits (max |diff| <= 1e-5 over the unpadded positions, float32; check_hf_export.py),
// pipeline("fill-mask") returns roformer fill-mask's top 5, and `train --init-from` takes the export
// back. Trained 30 steps at a high rate, as the BERT export above, so a misplaced tensor shows.
TEST(ToolsExport, DisentangledExportsToDebertaV2ForMaskedLM) {
  TempDir tmp;
  const std::string relative = " --set model.position=disentangled --set model.position_buckets=16";
  json config;
  ASSERT_NO_FATAL_FAILURE(train_and_export(tmp, relative, "DebertaV2ForMaskedLM", &config));
  EXPECT_EQ(config["model_type"], "deberta-v2");
  EXPECT_EQ(config["architectures"], json::array({"DebertaV2ForMaskedLM"}));
  EXPECT_EQ(config["relative_attention"], true);
  EXPECT_EQ(config["position_buckets"], 16);
  EXPECT_EQ(config["max_relative_positions"], 48);  // 0 in the config: max_position_embeddings
  EXPECT_EQ(config["pos_att_type"], json::array({"c2p", "p2c"}));
  EXPECT_EQ(config["share_att_key"], true);
  EXPECT_EQ(config["position_biased_input"], false);
  EXPECT_EQ(config["norm_rel_ebd"], "layer_norm");
  EXPECT_EQ(config["legacy"], true);
  const auto weights = roformer::core::load_safetensors(tmp.str("hf/model.safetensors"));
  for (const char* name : {"deberta.encoder.rel_embeddings.weight", "deberta.encoder.LayerNorm.weight",
                           "deberta.encoder.layer.1.attention.self.query_proj.weight",
                           "deberta.embeddings.token_type_embeddings.weight", "cls.predictions.bias"})
    EXPECT_EQ(weights.count(name), 1u) << name;
  for (const auto& [name, t] : weights) EXPECT_NE(name.rfind("roformer.", 0), 0u) << name;
  EXPECT_NE(read_file(tmp.str("hf/README.md")).find("DebertaV2ForMaskedLM.from_pretrained"), std::string::npos);
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  expect_transformers_agrees(tmp, "DebertaV2ForMaskedLM", 1e-5);
  // --init-from the DebertaV2 export starts at the source model.
  expect_init_from_starts_at_source(tmp, relative);
  // The relative settings come with the weights: other buckets are refused naming the key.
  auto other = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str("from_hf_8") + " --init-from " +
                            tmp.str("hf") + " --set model.position=disentangled --set model.position_buckets=8");
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.output.find("model.position_buckets is 8 in the config but the weights were trained with 16"),
            std::string::npos) << other.output;
}

// ModernBERT's layers (pre-LN without layer 0's attention norm, GeGLU, no biases, no token types,
// layer 1 of 3 local within +-4 at rotary base 10000, the others global at 160000) export to Hugging
// Face's ModernBertForMaskedLM: its config.json, one Wqkv per layer and no bias but the decoder's;
// transformers loads it with no missing or unexpected keys and gives its logits at 20 tokens (beyond
// the window; max |diff| <= 1e-4, float32, check_hf_export.py), pipeline("fill-mask") returns
// roformer fill-mask's top 5, and `train --init-from` takes the export back. Trained 30 steps at a
// high rate, as the exports above, so a misplaced tensor shows. A GeGLU model ModernBERT would
// compute otherwise (post-LN) is refused by name.
TEST(ToolsExport, ModernBertLayersExportToModernBertForMaskedLM) {
  TempDir tmp;
  const std::string modern =
      " --set model.norm=pre --set model.first_attention_norm=false --set model.feed_forward=glu --set model.bias=false"
      " --set model.type_vocab_size=0 --set model.num_layers=3 --set model.local_attention=8"
      " --set model.global_attention_every=2 --set model.rotary_base=160000 --set model.local_rotary_base=10000"
      " --set model.layer_norm_eps=1e-5";
  json config;
  ASSERT_NO_FATAL_FAILURE(train_and_export(tmp, modern, "ModernBertForMaskedLM", &config));
  EXPECT_EQ(config["model_type"], "modernbert");
  EXPECT_EQ(config["layer_types"], json::array({"full_attention", "sliding_attention", "full_attention"}));
  EXPECT_EQ(config["local_attention"], 8);
  EXPECT_EQ(config["rope_parameters"]["full_attention"]["rope_theta"], 160000.0);
  EXPECT_EQ(config["rope_parameters"]["sliding_attention"]["rope_theta"], 10000.0);
  EXPECT_EQ(config["norm_bias"], false);
  EXPECT_EQ(config["intermediate_size"], 128);
  const auto weights = roformer::core::load_safetensors(tmp.str("hf/model.safetensors"));
  for (const char* name : {"model.embeddings.tok_embeddings.weight", "model.layers.1.attn.Wqkv.weight",
                           "model.layers.1.attn_norm.weight", "model.layers.2.mlp.Wi.weight", "model.final_norm.weight",
                           "head.dense.weight", "decoder.bias"})
    EXPECT_EQ(weights.count(name), 1u) << name;
  EXPECT_EQ(weights.count("model.layers.0.attn_norm.weight"), 0u);
  EXPECT_EQ(weights.at("model.layers.2.mlp.Wi.weight").size(0), 256);  // 2 x intermediate_size
  for (const auto& [name, t] : weights) {
    EXPECT_NE(name.rfind("roformer.", 0), 0u) << name;
    EXPECT_TRUE(name == "decoder.bias" || name.find("bias") == std::string::npos) << name;
  }
  EXPECT_NE(read_file(tmp.str("hf/README.md")).find("ModernBertForMaskedLM.from_pretrained"), std::string::npos);
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  expect_transformers_agrees(tmp, "ModernBertForMaskedLM", 1e-4);
  expect_init_from_starts_at_source(tmp, modern);
  // The window comes with the weights.
  auto wider = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str("from_hf_16") + " --init-from " +
                            tmp.str("hf") + modern + " --set model.local_attention=16");
  EXPECT_EQ(wider.exit_code, 1);
  EXPECT_NE(wider.output.find("model.local_attention is 16 in the config but the weights were trained with 8"),
            std::string::npos) << wider.output;
  // GeGLU in post-LN layers: ModernBERT's own layers are pre-LN.
  auto post = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str("post") +
                           " --set model.feed_forward=glu --set train.steps=2");
  ASSERT_EQ(post.exit_code, 0) << post.output;
  auto refused = run_roformer("export --checkpoint " + tmp.str("post") + " --out " + tmp.str("hf_post"));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("this model has model.feed_forward: glu, which Hugging Face's ModernBERT computes, but "
                                "model.norm: post (ModernBERT is pre-LayerNorm)"),
            std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(tmp.str("hf_post/model.safetensors")));
}

// model.bias false (no biases in linear layers and LayerNorms) exports to each family with zero
// biases: config.json says "roformer_bias": false, Hugging Face loads it with no missing keys and
// gives its logits, and `train --init-from` takes it back as a model without biases (dropping the
// zero ones). A bias the export no longer has at zero (trained after the export) is refused by name,
// and a config with biases is refused: the architecture comes with the weights.
TEST(ToolsExport, ModelsWithoutBiasesExportWithZeroBiasesAndComeBack) {
  struct Case {
    std::string sets, architecture, bias_key;
  };
  for (const Case& c : {Case{"", "RoFormerForMaskedLM", "roformer.encoder.layer.0.attention.self.query.bias"},
                        Case{" --set model.position=absolute", "BertForMaskedLM",
                             "bert.encoder.layer.1.output.LayerNorm.bias"},
                        Case{" --set model.position=disentangled --set model.position_buckets=16",
                             "DebertaV2ForMaskedLM", "deberta.encoder.LayerNorm.bias"}}) {
    SCOPED_TRACE(c.architecture);
    TempDir tmp;
    const std::string sets = c.sets + " --set model.bias=false";
    json config;
    ASSERT_NO_FATAL_FAILURE(train_and_export(tmp, sets, c.architecture, &config));
    EXPECT_EQ(config["roformer_bias"], false);
    auto weights = roformer::core::load_safetensors(tmp.str("hf/model.safetensors"));
    ASSERT_EQ(weights.count(c.bias_key), 1u);
    EXPECT_EQ(weights.at(c.bias_key).count_nonzero().item<int64_t>(), 0);
    EXPECT_NE(weights.at("cls.predictions.bias").count_nonzero().item<int64_t>(), 0);  // the decoder's, trained
    if (python().empty()) {
      std::cout << "[ SKIPPED  ] the transformers check: no Python configured (ROFORMER_PYTHON)\n";
    } else {
      auto check = check_export_logits(tmp.str("run"), tmp.str("hf"), tmp.str("ref.safetensors"), 1e-5);
      EXPECT_EQ(check.exit_code, 0) << check.output;
      EXPECT_NE(check.output.find(c.architecture + " loaded with no missing/unexpected keys"), std::string::npos)
          << check.output;
      std::cout << check.output;
    }
    expect_init_from_starts_at_source(tmp, sets);
    auto biased = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str("biased") + c.sets +
                               " --init-from " + tmp.str("hf"));
    EXPECT_EQ(biased.exit_code, 1);
    EXPECT_NE(biased.output.find("model.bias is true in the config but the weights were trained with false"),
              std::string::npos) << biased.output;
    // A bias trained after the export (fine-tuned in Hugging Face) is no longer the zero that stands
    // for no bias: refused, naming the tensor and the way to load it with biases.
    weights.at(c.bias_key).fill_(0.5);
    std::vector<std::pair<std::string, torch::Tensor>> changed(weights.begin(), weights.end());
    roformer::core::save_safetensors(tmp.str("hf/model.safetensors"), changed, {{"format", "pt"}});
    auto tuned = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str("tuned") + sets +
                              " --init-from " + tmp.str("hf"));
    EXPECT_EQ(tuned.exit_code, 1);
    EXPECT_NE(tuned.output.find(c.bias_key + " is not zero, but the model has no biases"), std::string::npos)
        << tuned.output;
    EXPECT_FALSE(fs::exists(tmp.str("tuned/checkpoints"))) << tuned.output;
  }
}

// Disentangled attention evaluates beyond the trained length (the buckets cover any distance); the
// enhanced mask decoder brings an absolute table back, so beyond its rows it is refused, and it has
// no Hugging Face form, so its export is refused by name, as is a factorized embedding's (DebertaV2
// projects the embedding before its LayerNorm, without a bias).
TEST(ToolsExport, DisentangledLengthsAndRefusals) {
  TempDir tmp;
  write_file(tmp.str("train.txt"), synthetic_corpus(20, 3, 5));
  write_file(tmp.str("run.yaml"), two_step_yaml("post", tmp.str("train.txt")));
  const std::string relative = " --set model.position=disentangled --set model.position_buckets=16";
  struct Case {
    std::string name, overrides, refusal;
  };
  for (const auto& c : std::vector<Case>{
           {"plain", "", ""},
           {"emd", " --set model.enhanced_mask_decoder=true",
            "this model uses model.enhanced_mask_decoder: true; Hugging Face's DebertaV2ForMaskedLM has no enhanced "
            "mask decoder"},
           {"factorized", " --set model.embedding_size=32",
            "this model has disentangled attention and a factorized embedding (model.embedding_size 32 != "
            "model.hidden_size 64); Hugging Face's DebertaV2 projects the embedding before its LayerNorm"}}) {
    SCOPED_TRACE(c.name);
    const auto run = tmp.str("run_" + c.name), out = tmp.str("hf_" + c.name);
    auto trained = run_roformer("train -c " + tmp.str("run.yaml") + " --run-dir " + run + relative + c.overrides);
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    auto beyond = run_roformer("eval --device cpu --checkpoint " + run + " --data " + tmp.str("train.txt") +
                               " --seq-len 64 --max-sequences 4");
    if (c.name == "emd") {
      EXPECT_EQ(beyond.exit_code, 1);
      EXPECT_NE(beyond.output.find("--seq-len 64 exceeds model.max_position_embeddings 48 of this checkpoint"),
                std::string::npos) << beyond.output;
    } else {
      EXPECT_EQ(beyond.exit_code, 0) << beyond.output;
      EXPECT_NE(beyond.output.find("4 x 64 tokens (trained at 32)"), std::string::npos) << beyond.output;
    }
    if (c.refusal.empty()) continue;  // its export: DisentangledExportsToDebertaV2ForMaskedLM
    auto r = run_roformer("export --checkpoint " + run + " --out " + out);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find(c.refusal), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out + "/model.safetensors"));
  }
}

// A model overfit to a few sentences fills the mask with the right word.
TEST(ToolsFillMask, OverfitModelReturnsTheRightWord) {
  TempDir tmp;
  std::string text;
  const char* sentences[] = {"the quick brown fox jumps over the lazy dog.", "a small bird sings in the old tree.",
                             "my sister reads a long book every night.", "the river runs past the quiet village."};
  for (int doc = 0; doc < 150; ++doc) text += std::string(sentences[doc % 4]) + "\n\n";
  // Some varied text too, so the tokenizer learns whole words (its vocabulary must also hold every
  // printable ASCII character).
  text += synthetic_corpus(30, 3, 11);
  write_file(tmp.str("train.txt"), text);
  write_file(tmp.str("o.yaml"), model_yaml("post") + "tokenizer:\n  vocab_size: 150\n"
             "data:\n  train_files: [" + tmp.str("train.txt") + "]\n  max_seq_len: 32\n  packing: document\n"
             "masking:\n  mask_prob: 0.3\n"
             "optimizer:\n  lr: 3.0e-3\nschedule:\n  warmup_steps: 10\n  type: constant\n"
             "train:\n  steps: 300\n  batch_size: 16\n  precision: fp32\n  device: cpu\n"
             "logging:\n  every: 100\n  progress: plain\n");
  auto t = run_roformer("train -c " + tmp.str("o.yaml") + " --run-dir " + tmp.str("run"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  auto r = run_command(roformer_bin() + " fill-mask --device cpu --json --checkpoint " + tmp.str("run") +
                       " \"a small [MASK] sings in the old tree.\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto rec = last_json(r.output);
  const std::string top = rec["masks"][0]["predictions"][0]["token"];
  EXPECT_EQ(top, "\xe2\x96\x81" "bird") << r.output;  // "▁bird": a word-start piece
}
