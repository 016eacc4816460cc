// Released encoders continued (issue 54): a model directory as transformers' save_pretrained leaves it,
// made inside the test by transformers and tokenizers (tests/python/make_released_model.py; no
// network), is a source for `train --init-from`: its tokenizer.json (WordPiece) is the run's tokenizer,
// its weights give Hugging Face's logits, and the run exports back to the same family, which
// transformers loads. BertForPreTraining checkpoints bring a pooler and a next-sentence head that
// masked-language-model training leaves out, saying so.
#include <gtest/gtest.h>

#include <string>

#include "hf_util.h"
#include "run_dir_util.h"
#include "test_util.h"

using namespace roformer::test;

namespace {

class ReleasedFamilies : public TinyRunTest {
 protected:
  void SetUp() override {
    TinyRunTest::SetUp();
    if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  }
  // make_released_model.py FAMILY into tmp_/name; returns the --set arguments of its model keys.
  std::string make(const std::string& family, const std::string& name) {
    const auto r = run_command(python() + " " + source_dir() + "/tests/python/make_released_model.py " + family +
                               " " + tmp_.str(name) + " " + tmp_.str("train.txt") + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto at = r.output.rfind("--set model.position");
    return at == std::string::npos ? "" : r.output.substr(at, r.output.find('\n', at) - at);
  }
  // One step at a rate that leaves the weights as they came (1e-12), so the checkpoint is the source.
  static std::string unchanged() {
    return " --set train.steps=1 --set optimizer.lr=1e-12 --set schedule.min_lr=0 --set optimizer.weight_decay=0";
  }
};

TEST_F(ReleasedFamilies, BertFromTransformersContinuesAndExportsBackAsBert) {
  const std::string model = make("bert", "bert");
  ASSERT_FALSE(model.empty());
  const std::string from = " --init-from " + tmp_.str("bert") + " " + model;
  auto start = train("start", from + unchanged());
  ASSERT_EQ(start.exit_code, 0) << start.output;
  EXPECT_NE(start.output.find("(tokenizer.json WordPiece, "), std::string::npos) << start.output;
  EXPECT_NE(start.output.find(" ids, special pad=0 unk=1 cls=2 sep=3 mask=4"), std::string::npos) << start.output;
  // The weights as roformer reads them give Hugging Face's logits (BertForMaskedLM on the source).
  auto same = check_export_logits(tmp_.str("start"), tmp_.str("bert"), tmp_.str("source_logits.safetensors"), 1e-5);
  EXPECT_EQ(same.exit_code, 0) << same.output;

  // Trained on, then exported: BERT again, its tokenizer.json as it came, loaded by transformers.
  auto trained = train("run", from + " --set train.steps=6");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto exported = run_roformer("export --checkpoint " + tmp_.str("run") + " --out " + tmp_.str("hf"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("as BertForMaskedLM to " + tmp_.str("hf")), std::string::npos) << exported.output;
  EXPECT_EQ(read_file(tmp_.str("hf/tokenizer.json")), read_file(tmp_.str("bert/tokenizer.json")));
  auto back = check_export_logits(tmp_.str("run"), tmp_.str("hf"), tmp_.str("export_logits.safetensors"));
  EXPECT_EQ(back.exit_code, 0) << back.output;
}

// `roformer config from-hf DIR` prints the config --init-from DIR takes as it is: no model key written
// by hand. A directory it cannot read is one line naming it.
TEST_F(ReleasedFamilies, ConfigFromHfIsTheConfigInitFromTakes) {
  ASSERT_FALSE(make("bert", "bert").empty());
  const std::string yaml = tmp_.str("from_hf.yaml");
  auto printed = run_command(roformer_bin() + " config from-hf " + tmp_.str("bert") + " > " + yaml);
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  const std::string text = read_file(yaml);
  EXPECT_NE(text.find("(BertForMaskedLM, learned absolute positions)"), std::string::npos) << text;
  EXPECT_NE(text.find("  hidden_size: 64\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  max_seq_len: 128\n"), std::string::npos) << "within the 128-row table\n" << text;
  auto trained = run_roformer("train -c " + yaml + " --init-from " + tmp_.str("bert") + " --run-dir " +
                              tmp_.str("run") + " --set 'data.train_files=[" + tmp_.str("train.txt") + "]'" +
                              " --set train.steps=1 --set train.batch_size=2 --set train.device=cpu"
                              " --set train.num_threads=1");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("new run from the weights of Hugging Face export " + tmp_.str("bert")),
            std::string::npos) << trained.output;
  write_file(tmp_.str("empty/notes.txt"), "mine");
  auto none = run_roformer("config from-hf " + tmp_.str("empty"));
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_NE(none.output.find("config from-hf: " + tmp_.str("empty") + " has no config.json; give a Hugging Face "
                             "model directory"), std::string::npos) << none.output;
}

TEST_F(ReleasedFamilies, BertForPreTrainingLeavesItsPoolerAndNextSentenceHeadOut) {
  const std::string model = make("bert-pretraining", "bert");
  ASSERT_FALSE(model.empty());
  auto start = train("start", " --init-from " + tmp_.str("bert") + " " + model + unchanged());
  ASSERT_EQ(start.exit_code, 0) << start.output;
  const std::string said = "--init-from " + tmp_.str("bert") + ": left out 4 tensor(s) masked-language-model "
                           "training does not use: the pooler (bert.pooler.*), the next-sentence head "
                           "(cls.seq_relationship.*)";
  ASSERT_NE(start.output.find(said), std::string::npos) << start.output;
  EXPECT_EQ(start.output.find(said, start.output.find(said) + 1), std::string::npos) << "said twice";
  // The encoder and the MLM head are the source's: Hugging Face's fill-mask pipeline on it predicts
  // what roformer's fill-mask does.
  const std::string records = tmp_.str("fill.jsonl");
  auto fill = run_command(roformer_bin() + " fill-mask --device cpu --json --top-k 5 --checkpoint " +
                          tmp_.str("start") + " 'the [MASK] of the city.' 'he said the [MASK] was good.' > " + records);
  ASSERT_EQ(fill.exit_code, 0) << fill.output;
  auto same = run_command(python() + " " + source_dir() + "/tests/python/check_hf_fill_mask.py " + tmp_.str("bert") +
                          " " + records + " 1e-5");
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("same top-5 tokens for 2/2 texts"), std::string::npos) << same.output;
}

}  // namespace
