// Released encoders continued (issue 54): a model directory as transformers' save_pretrained leaves it,
// made inside the test by transformers and tokenizers (tests/python/make_released_model.py; no
// network), is a source for `train --init-from`: its tokenizer.json (WordPiece) is the run's tokenizer,
// its weights give Hugging Face's logits, and the run exports back to the same family, which
// transformers loads. BertForPreTraining checkpoints bring a pooler and a next-sentence head that
// masked-language-model training leaves out, saying so.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/safetensors.h"
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
    const auto at = r.output.rfind("--set model.position=");
    return at == std::string::npos ? "" : r.output.substr(at, r.output.find('\n', at) - at);
  }
  // One step at a rate that leaves the weights as they came (1e-12), so the checkpoint is the source.
  static std::string unchanged() {
    return " --set train.steps=1 --set optimizer.lr=1e-12 --set schedule.min_lr=0 --set optimizer.weight_decay=0";
  }
  // The released directory tmp_/name (make()'s, its model keys `model`) continued: the step-0
  // checkpoint gives Hugging Face's logits (1e-5) and its fill-mask pipeline's top 5 for texts with
  // `mask`; trained 20 steps and exported, the run comes back as `architecture` with the tokenizer.json
  // it came with, which transformers loads with no missing or unexpected keys and our logits (1e-4).
  void continues_and_exports_back(const std::string& name, const std::string& model, const std::string& mask,
                                  const std::string& architecture) {
    const std::string from = " --init-from " + tmp_.str(name) + " " + model;
    auto start = train(name + "_start", from + unchanged());
    ASSERT_EQ(start.exit_code, 0) << start.output;
    auto same = check_export_logits(tmp_.str(name + "_start"), tmp_.str(name), tmp_.str(name + "_source.safetensors"),
                                    1e-5);
    EXPECT_EQ(same.exit_code, 0) << same.output;
    const std::string records = tmp_.str(name + "_fill.jsonl");
    auto fill = run_command(roformer_bin() + " fill-mask --device cpu --json --top-k 5 --checkpoint " +
                            tmp_.str(name + "_start") + " 'the " + mask + " of the city.' 'he said the " + mask +
                            " was good.' > " + records);
    ASSERT_EQ(fill.exit_code, 0) << fill.output;
    auto fills = run_command(python() + " " + source_dir() + "/tests/python/check_hf_fill_mask.py " + tmp_.str(name) +
                             " " + records + " 1e-5");
    EXPECT_EQ(fills.exit_code, 0) << fills.output;
    EXPECT_NE(fills.output.find("same top-5 tokens for 2/2 texts"), std::string::npos) << fills.output;

    auto trained = train(name + "_run", from + " --set train.steps=20");
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    const std::string out = tmp_.str(name + "_hf");
    auto exported = run_roformer("export --checkpoint " + tmp_.str(name + "_run") + " --out " + out);
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    EXPECT_NE(exported.output.find("as " + architecture + " to " + out), std::string::npos) << exported.output;
    EXPECT_EQ(read_file(out + "/tokenizer.json"), read_file(tmp_.str(name + "/tokenizer.json")));
    auto back = check_export_logits(tmp_.str(name + "_run"), out, tmp_.str(name + "_export.safetensors"));
    EXPECT_EQ(back.exit_code, 0) << back.output;
    EXPECT_NE(back.output.find(architecture + " loaded with no missing/unexpected keys"), std::string::npos)
        << back.output;
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

// RoBERTa: BERT's computation with positions from padding_idx + 1 and byte-level BPE. The step-0
// checkpoint gives RobertaForMaskedLM's logits and fill-mask predictions (<mask> with its lstrip),
// the trained run exports back as RoBERTa (130 position rows again) with its tokenizer.json, and
// `config from-hf` writes model.family: roberta so that the export stays RoBERTa.
TEST_F(ReleasedFamilies, RobertaFromTransformersContinuesAndExportsBackAsRoberta) {
  const std::string model = make("roberta", "roberta");
  ASSERT_NE(model.find("--set model.family=roberta"), std::string::npos) << model;
  ASSERT_NO_FATAL_FAILURE(continues_and_exports_back("roberta", model, "<mask>", "RobertaForMaskedLM"));
  EXPECT_NE(read_file(tmp_.str("roberta_hf/config.json")).find("\"max_position_embeddings\": 130"), std::string::npos)
      << "the pad's two rows written back";

  // The config from the directory says the family, so a run started from it exports as RoBERTa.
  auto printed = run_roformer("config from-hf " + tmp_.str("roberta"));
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  EXPECT_NE(printed.output.find("(RobertaForMaskedLM, learned absolute positions from padding_idx + 1)"),
            std::string::npos) << printed.output;
  EXPECT_NE(printed.output.find("  family: roberta\n"), std::string::npos) << printed.output;
  EXPECT_NE(printed.output.find("  max_position_embeddings: 128\n"), std::string::npos) << printed.output;
  // Without it the model section differs from the weights', named.
  std::string unnamed_model = model;
  unnamed_model.erase(unnamed_model.find(" --set model.family=roberta"), std::string(" --set model.family=roberta").size());
  auto unnamed = train("unnamed", " --init-from " + tmp_.str("roberta") + " " + unnamed_model + unchanged());
  EXPECT_EQ(unnamed.exit_code, 1) << unnamed.output;
  EXPECT_NE(unnamed.output.find("model.family is auto in the config but the weights were trained with roberta; set "
                                "model.family: roberta"), std::string::npos) << unnamed.output;
}

// DeBERTa-v3: disentangled attention with v3's settings and its Unigram tokenizer ([MASK] added after
// the pieces), continued and exported back as DebertaV2ForMaskedLM.
TEST_F(ReleasedFamilies, DebertaV3FromTransformersContinuesAndExportsBackAsDebertaV2) {
  const std::string model = make("deberta-v3", "deberta");
  ASSERT_FALSE(model.empty());
  ASSERT_NO_FATAL_FAILURE(continues_and_exports_back("deberta", model, "[MASK]", "DebertaV2ForMaskedLM"));
}

// v3's released checkpoints are discriminators: no MLM head, a replaced-token-detection head, and an
// embedding padded beyond the tokenizer's ids. The encoder continues with a new MLM head and the
// tokenizer's rows, each said once; the run trains and exports.
TEST_F(ReleasedFamilies, DebertaV3DiscriminatorStartsANewMaskedLanguageModelHead) {
  const std::string model = make("deberta-v3-rtd", "rtd");
  ASSERT_FALSE(model.empty());
  auto run = train("run", " --init-from " + tmp_.str("rtd") + " " + model + " --set train.steps=4");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("left out 2 tensor(s) masked-language-model training does not use: the "
                            "replaced-token-detection head (mask_predictions.*)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("--init-from " + tmp_.str("rtd") + ": the weights carry no masked-language-model head"),
            std::string::npos) << run.output;
  EXPECT_NE(run.output.find("--init-from " + tmp_.str("rtd") + ": its embedding has "), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("ids (padded, as DeBERTa-v3's releases are); the 24 rows no id reads are left out"),
            std::string::npos) << run.output;
  auto exported = run_roformer("export --checkpoint " + tmp_.str("run") + " --out " + tmp_.str("hf"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  auto back = check_export_logits(tmp_.str("run"), tmp_.str("hf"), tmp_.str("export_logits.safetensors"));
  EXPECT_EQ(back.exit_code, 0) << back.output;
}

// ModernBERT: pre-LN GeGLU layers, layer 1 and 2 local within +-4 (the checks run 20 tokens, beyond the
// window), rotary bases 160000 / 10000, byte-level BPE with its specials after the vocabulary.
TEST_F(ReleasedFamilies, ModernBertFromTransformersContinuesAndExportsBackAsModernBert) {
  const std::string model = make("modernbert", "modernbert");
  ASSERT_FALSE(model.empty());
  ASSERT_NO_FATAL_FAILURE(continues_and_exports_back("modernbert", model, "[MASK]", "ModernBertForMaskedLM"));
  auto printed = run_roformer("config from-hf " + tmp_.str("modernbert"));
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  for (const char* line : {"  feed_forward: glu\n", "  local_attention: 8\n", "  global_attention_every: 3\n",
                           "  local_rotary_base: 10000.0\n", "  first_attention_norm: false\n"})
    EXPECT_NE(printed.output.find(line), std::string::npos) << line << printed.output;
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

// A Hub download in several safetensors shards (model-0000N-of-0000M.safetensors and the index naming
// each tensor's shard) continues as the single file does; a shard the index names but the directory
// lacks is one line naming it.
TEST_F(ReleasedFamilies, ShardedWeightsLoadAsOneFile) {
  const std::string model = make("bert", "bert");
  ASSERT_FALSE(model.empty());
  const auto dir = tmp_.str("bert");
  const auto tensors = roformer::core::load_safetensors(dir + "/model.safetensors");
  std::vector<std::pair<std::string, torch::Tensor>> first, second;
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& [name, t] : tensors) {
    const bool one = name.find("layer.1.") == std::string::npos;
    (one ? first : second).emplace_back(name, t);
    index["weight_map"][name] = one ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  roformer::core::save_safetensors(dir + "/model-00001-of-00002.safetensors", first, {{"format", "pt"}});
  roformer::core::save_safetensors(dir + "/model-00002-of-00002.safetensors", second, {{"format", "pt"}});
  write_file(dir + "/model.safetensors.index.json", index.dump(2));
  std::filesystem::remove(dir + "/model.safetensors");
  auto start = train("start", " --init-from " + dir + " " + model + unchanged());
  ASSERT_EQ(start.exit_code, 0) << start.output;
  auto same = check_export_logits(tmp_.str("start"), dir, tmp_.str("logits.safetensors"), 1e-5);
  EXPECT_EQ(same.exit_code, 0) << same.output;

  std::filesystem::remove(dir + "/model-00002-of-00002.safetensors");
  auto lost = train("lost", " --init-from " + dir + " " + model + unchanged());
  EXPECT_EQ(lost.exit_code, 1) << lost.output;
  EXPECT_NE(lost.output.find("model.safetensors.index.json names the shard model-00002-of-00002.safetensors, which " +
                             dir + " does not have"), std::string::npos) << lost.output;
  EXPECT_FALSE(std::filesystem::exists(tmp_.str("lost"))) << "nothing written";
}

// Released directories roformer cannot take are refused before anything is written, in one line
// naming the file, the key and the fix.
TEST_F(ReleasedFamilies, UnusableDirectoriesAreOneLineNamingTheFix) {
  const std::string model = make("bert", "good");
  ASSERT_FALSE(model.empty());
  const std::string good = tmp_.str("good");
  int n = 0;
  // A copy of the good directory with `change` applied; its refusal holds `expected`.
  auto refused = [&](const std::string& what, const std::function<void(const std::string&)>& change,
                     const std::string& expected) {
    const std::string dir = tmp_.str("bad" + std::to_string(++n));
    std::filesystem::copy(good, dir);
    change(dir);
    const std::string run = "run" + std::to_string(n);
    auto r = train(run, " --init-from " + dir + " " + model + unchanged());
    EXPECT_EQ(r.exit_code, 1) << what << "\n" << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << what << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(tmp_.str(run))) << what << ": nothing written";
  };
  auto edit_config = [](const std::function<void(nlohmann::json&)>& edit) {
    return [edit](const std::string& dir) {
      auto config = nlohmann::json::parse(read_file(dir + "/config.json"));
      edit(config);
      write_file(dir + "/config.json", config.dump(2));
    };
  };
  refused("weights as a pickle",
          [](const std::string& dir) {
            std::filesystem::rename(dir + "/model.safetensors", dir + "/pytorch_model.bin");
          },
          "holds its weights as pytorch_model.bin, which roformer does not read (only safetensors: a pickle can run "
          "code); convert the directory with transformers: python -c");
  refused("a key of the wrong type", edit_config([](nlohmann::json& c) { c["hidden_size"] = "64"; }), "hidden_size");
  refused("a missing key", edit_config([](nlohmann::json& c) { c.erase("num_hidden_layers"); }), "num_hidden_layers");
  refused("a family roformer does not compute", edit_config([](nlohmann::json& c) { c["model_type"] = "albert"; }),
          "describes a \"albert\" model; --init-from takes the families roformer computes: roformer");
  refused("a tokenizer with ids beyond the embedding's rows",
          edit_config([](nlohmann::json& c) { c["vocab_size"] = c["vocab_size"].get<int64_t>() - 1; }),
          "on would read no embedding row: put back the tokenizer the model came with");
  refused("no tokenizer.json",
          [](const std::string& dir) { std::filesystem::remove(dir + "/tokenizer.json"); },
          "has no tokenizer.json (or spiece.model)");
  refused("a safetensors header that lies about a shape",
          [](const std::string& dir) {
            std::string bytes = read_file(dir + "/model.safetensors");
            const std::string shape = "\"shape\":[64]";  // a 64-float bias said to hold 65
            const auto at = bytes.find(shape);
            ASSERT_NE(at, std::string::npos);
            bytes.replace(at, shape.size(), "\"shape\":[65]");
            write_file(dir + "/model.safetensors", bytes);
          },
          "/model.safetensors: tensor '");
  refused("a wrong type, said for a Hub directory", edit_config([](nlohmann::json& c) { c["num_attention_heads"] = 2.5; }),
          "give the config.json of a Hugging Face model directory as save_pretrained, a Hub download or `roformer "
          "export --format hf` leaves it");
}

}  // namespace
