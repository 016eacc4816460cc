// Config: defaults, YAML loading, overrides, and one test per class of bad input, checking the message.
#include <gtest/gtest.h>

#include <filesystem>

#include <cstdio>
#include <fstream>

#include "core/config.h"
#include "model/options.h"
#include "train/run_config.h"
#include "core/error.h"
#include "test_util.h"
#include "checkpoint/resume_policy.h"

using roformer::Error;
using namespace roformer::config;

using roformer::test::error_of;
using roformer::train::parse_run_config;

TEST(Config, DefaultsAreRoformerBase) {
  Config c;
  EXPECT_EQ(c.model.hidden_size, 768);
  EXPECT_EQ(c.model.num_layers, 12);
  EXPECT_EQ(c.model.num_heads, 12);
  EXPECT_EQ(c.model.norm, Norm::kPost);
  EXPECT_DOUBLE_EQ(c.model.layer_norm_eps, 1e-12);
  EXPECT_DOUBLE_EQ(c.masking.mask_prob, 0.15);
  EXPECT_EQ(effective_embedding_size(c.model), 768);
  EXPECT_EQ(head_dim(c.model), 64);
  EXPECT_NO_THROW(check_table(c));
  EXPECT_NO_THROW(roformer::train::validate_run_config(c));
}

TEST(Config, LoadsYamlAndKeepsDefaultsForMissingKeys) {
  Config c = parse_config("model:\n  hidden_size: 256\n  num_heads: 4\n  norm: pre\n"
                          "data:\n  train_files: [a.txt, b.txt]\nschedule:\n  warmup_steps: 10\ntrain:\n  steps: 50\n");
  EXPECT_EQ(c.model.hidden_size, 256);
  EXPECT_EQ(c.model.num_heads, 4);
  EXPECT_EQ(c.model.norm, Norm::kPre);
  EXPECT_EQ(c.model.num_layers, 12);  // default kept
  EXPECT_EQ(c.train.steps, 50);
  ASSERT_EQ(c.data.train_files.size(), 2u);
  EXPECT_EQ(c.data.train_files[1], "b.txt");
}

TEST(Config, EmptyDocumentIsAllDefaults) {
  Config c = parse_config("");
  EXPECT_EQ(c.model.hidden_size, Config{}.model.hidden_size);
}

TEST(Config, OverridesAreTypedLikeYaml) {
  Config c = parse_config("", {"model.hidden_size=128", "model.num_heads=2", "optimizer.lr=3e-4",
                               "model.rotary_value=true", "data.valid_files=[x.txt, y.txt]",
                               "tokenizer.model=tok.model"});
  EXPECT_EQ(c.model.hidden_size, 128);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 3e-4);
  EXPECT_TRUE(c.model.rotary_value);
  ASSERT_EQ(c.data.valid_files.size(), 2u);
  EXPECT_EQ(c.tokenizer.model, "tok.model");
  // Later overrides win, and apply after the file.
  Config d = parse_config("train:\n  steps: 10\nschedule:\n  warmup_steps: 1\n", {"train.steps=20", "train.steps=30"});
  EXPECT_EQ(d.train.steps, 30);
}

// data.jsonl_field became data.text_field (it also names Parquet's column): configs and the
// checkpoints that store theirs still load, and the old name sets the new key.
TEST(Config, RenamedKeySetsTheNewKey) {
  Config c = parse_config("data:\n  jsonl_field: body\n");
  EXPECT_EQ(c.data.text_field, "body");
  apply_override(c, "data.jsonl_field=content");
  EXPECT_EQ(c.data.text_field, "content");
  EXPECT_NE(to_yaml(c).find("text_field: content"), std::string::npos);
  EXPECT_EQ(to_yaml(c).find("jsonl_field"), std::string::npos);
}

TEST(Config, ResolvedYamlRoundTrips) {
  Config c = parse_config("", {"model.hidden_size=96", "model.num_heads=3", "model.layer_norm_eps=1e-5",
                               "data.train_files=[a b.txt, 'c: d.txt']", "optimizer.lr=0.001", "model.rotary_base=10000"});
  const std::string text = to_yaml(c);
  Config d = parse_config(text);
  EXPECT_EQ(to_yaml(d), text);
  EXPECT_EQ(d.data.train_files[1], "c: d.txt");
  EXPECT_DOUBLE_EQ(d.model.layer_norm_eps, 1e-5);
  EXPECT_NE(text.find("rotary_base: 10000.0"), std::string::npos) << text;
}

// The enumerated settings are enums named by the table: each name reads into its enum, prints back
// as the same name (to_yaml, to_string), and an unknown name lists the accepted ones.
TEST(Config, EnumeratedSettingsAreNamedByTheTable) {
  const Config c = parse_config("", {"model.position=absolute", "model.norm=pre", "model.attention=linear",
                                     "model.hidden_act=gelu_tanh", "train.precision=fp32"});
  EXPECT_EQ(c.model.position, Position::kAbsolute);
  EXPECT_EQ(c.model.norm, Norm::kPre);
  EXPECT_EQ(c.model.attention, Attention::kLinear);
  EXPECT_EQ(c.model.hidden_act, Activation::kGeluTanh);
  EXPECT_EQ(c.train.precision, Precision::kFp32);
  EXPECT_EQ(Config{}.train.precision, Precision::kBf16);
  const std::string yaml = to_yaml(c);
  for (const char* line : {"position: absolute", "norm: pre", "attention: linear", "hidden_act: gelu_tanh",
                           "precision: fp32"})
    EXPECT_NE(yaml.find(line), std::string::npos) << line;
  EXPECT_EQ(to_string(Precision::kFp16), "fp16");
  EXPECT_EQ(to_string(Activation::kRelu), "relu");
  EXPECT_EQ(to_string(Position::kNone), "none");
  EXPECT_EQ(to_string(Attention::kSoftmax), "softmax");
  EXPECT_EQ(to_string(Norm::kPost), "post");
  auto msg = error_of([] { parse_config("", {"model.hidden_act=swish"}); });
  EXPECT_NE(msg.find("model.hidden_act = 'swish' is not allowed: choose one of gelu, gelu_tanh, relu"),
            std::string::npos) << msg;
  msg = error_of([] { parse_config("", {"train.precision=fp8"}); });
  EXPECT_NE(msg.find("train.precision = 'fp8' is not allowed: choose one of fp32, bf16, fp16"), std::string::npos)
      << msg;
  msg = error_of([] { parse_config("", {"model.attention=[softmax]"}); });
  EXPECT_NE(msg.find("model.attention: expected a string"), std::string::npos) << msg;
}

// A config built in code is held to the table's ranges too (check_table checks every field).
TEST(Config, ValidateChecksRangesOfAConfigBuiltInCode) {
  Config c;
  c.train.batch_size = 0;
  auto msg = error_of([&] { check_table(c); });
  EXPECT_NE(msg.find("train.batch_size = 0 is out of range: allowed >= 1"), std::string::npos) << msg;
  ModelConfig m;
  m.hidden_dropout = 1.0;
  msg = error_of([&] { roformer::model::validate_model_config(m); });
  EXPECT_NE(msg.find("model.hidden_dropout = 1.0 is out of range"), std::string::npos) << msg;
  msg = error_of([] {
    ModelConfig linear;
    linear.attention = Attention::kLinear;
    linear.rotary_value = true;
    roformer::model::validate_model_config(linear);
  });
  EXPECT_NE(msg.find("model.rotary_value is only supported with model.attention: softmax"), std::string::npos) << msg;
}

TEST(Config, UnknownKeySuggestsNearest) {
  auto msg = error_of([] { parse_config("model:\n  hiden_size: 10\n"); });
  EXPECT_NE(msg.find("unknown config key model.hiden_size; did you mean model.hidden_size?"), std::string::npos) << msg;
}

TEST(Config, UnknownSectionSuggestsNearest) {
  auto msg = error_of([] { parse_config("modle:\n  hidden_size: 10\n"); });
  EXPECT_NE(msg.find("unknown config section 'modle'; did you mean 'model'?"), std::string::npos) << msg;
  auto msg2 = error_of([] { parse_config("distributd:\n  timeout_s: 10\n"); });
  EXPECT_NE(msg2.find("did you mean 'distributed'? Sections: model, tokenizer, data, masking, optimizer, schedule, "
                      "train, checkpoint, logging, eval, distributed"), std::string::npos) << msg2;
}

TEST(Config, OverrideOfUnknownKey) {
  auto msg = error_of([] { parse_config("", {"train.step=5"}); });
  EXPECT_NE(msg.find("unknown config key train.step; did you mean train.steps?"), std::string::npos) << msg;
  auto msg2 = error_of([] { parse_config("", {"train.steps"}); });
  EXPECT_NE(msg2.find("not of the form section.key=value"), std::string::npos) << msg2;
}

TEST(Config, WrongTypeNamesKeyAndValue) {
  auto msg = error_of([] { parse_config("model:\n  hidden_size: big\n"); });
  EXPECT_NE(msg.find("config key model.hidden_size: expected an integer, got 'big'"), std::string::npos) << msg;
  auto msg2 = error_of([] { parse_config("", {"model.rotary_value=maybe"}); });
  EXPECT_NE(msg2.find("model.rotary_value: expected true or false, got 'maybe'"), std::string::npos) << msg2;
  auto msg3 = error_of([] { parse_config("optimizer:\n  lr: [1, 2]\n"); });
  EXPECT_NE(msg3.find("optimizer.lr: expected a number"), std::string::npos) << msg3;
  auto msg4 = error_of([] { parse_config("train:\n  steps: 2.5\n"); });
  EXPECT_NE(msg4.find("train.steps: expected an integer, got '2.5'"), std::string::npos) << msg4;
}

TEST(Config, OutOfRangeNamesAllowedRange) {
  auto msg = error_of([] { parse_config("masking:\n  mask_prob: 1.5\n"); });
  EXPECT_NE(msg.find("masking.mask_prob = 1.5 is out of range: allowed (0, 1)"), std::string::npos) << msg;
  auto msg2 = error_of([] { parse_config("", {"train.batch_size=0"}); });
  EXPECT_NE(msg2.find("train.batch_size = 0 is out of range: allowed >= 1"), std::string::npos) << msg2;
  auto msg3 = error_of([] { parse_config("", {"model.norm=middle"}); });
  EXPECT_NE(msg3.find("model.norm = 'middle' is not allowed: choose one of post, pre"), std::string::npos) << msg3;
}

// The rules across keys are the components' (issue 52), checked together in a run's config
// (train/run_config.h); each component's own tests check its rules one by one.
TEST(Config, CrossFieldChecks) {
  auto msg = error_of([] { parse_run_config("", {"model.hidden_size=100", "model.num_heads=3"}); });
  EXPECT_NE(msg.find("model.hidden_size (100) must be divisible by model.num_heads (3)"), std::string::npos) << msg;
  auto msg2 = error_of([] { parse_run_config("", {"model.hidden_size=96", "model.num_heads=32"}); });
  EXPECT_NE(msg2.find("head dimension"), std::string::npos) << msg2;
  EXPECT_NE(msg2.find("must be even"), std::string::npos) << msg2;
  auto msg3 = error_of([] { parse_run_config("", {"model.embedding_size=1024"}); });
  EXPECT_NE(msg3.find("model.embedding_size (1024) must be <= model.hidden_size (768)"), std::string::npos) << msg3;
  auto msg4 = error_of([] { parse_run_config("", {"masking.mask_token_rate=0.8", "masking.random_token_rate=0.3"}); });
  EXPECT_NE(msg4.find("mask_token_rate + masking.random_token_rate"), std::string::npos) << msg4;
  auto msg6 = error_of([] { parse_run_config("", {"data.max_seq_len=4096"}); });
  EXPECT_NE(msg6.find("data.max_seq_len (4096) exceeds model.max_position_embeddings (1536)"), std::string::npos)
      << msg6;
  auto msg7 = error_of([] { parse_run_config("", {"train.device=tpu"}); });
  EXPECT_NE(msg7.find("train.device = 'tpu'"), std::string::npos) << msg7;
  auto msg8 = error_of([] { parse_run_config("", {"train.device=cpu", "distributed.backend=nccl"}); });
  EXPECT_NE(msg8.find("distributed.backend nccl needs CUDA but train.device is cpu"), std::string::npos) << msg8;
  auto msg9 = error_of([] { parse_run_config("", {"train.device=cuda:1", "distributed.backend=gloo"}); });
  EXPECT_NE(msg9.find("distributed.backend gloo is for CPU training but train.device is cuda:1"), std::string::npos)
      << msg9;
  auto msg10 = error_of([] { parse_run_config("", {"distributed.timeout_s=0"}); });
  EXPECT_NE(msg10.find("distributed.timeout_s = 0 is out of range"), std::string::npos) << msg10;
  auto msg11 = error_of([] { parse_run_config("", {"train.precision=fp32", "train.param_dtype=bf16"}); });
  EXPECT_NE(msg11.find("train.param_dtype bf16 computes in bf16 and needs train.precision: bf16 (it is fp32)"),
            std::string::npos) << msg11;
  EXPECT_EQ(parse_run_config("", {"train.param_dtype=bf16"}).train.param_dtype, ParamDtype::kBf16);  // precision bf16 by default
  auto msg12 = error_of([] { parse_run_config("", {"train.param_dtype=fp16"}); });
  EXPECT_NE(msg12.find("train.param_dtype"), std::string::npos) << msg12;
  // train.fp8 (issue 51): off by default, dynamic with precision bf16 only, no other recipe.
  EXPECT_EQ(parse_config("", {}).train.fp8, Fp8::kOff);
  EXPECT_EQ(parse_config("", {"train.fp8=dynamic"}).train.fp8, Fp8::kDynamic);
  EXPECT_EQ(parse_config(to_yaml(parse_config("", {"train.fp8=dynamic"}))).train.fp8, Fp8::kDynamic);
  auto msg13 = error_of([] { parse_run_config("", {"train.precision=fp32", "train.fp8=dynamic"}); });
  EXPECT_NE(msg13.find("train.fp8 dynamic computes the encoder's GEMMs in FP8 and the rest in bf16 and needs "
                       "train.precision: bf16 (it is fp32)"), std::string::npos) << msg13;
  auto msg14 = error_of([] { parse_config("", {"train.fp8=e4m3"}); });
  EXPECT_NE(msg14.find("train.fp8"), std::string::npos) << msg14;
}

// ModernBERT's layer keys (issue 54): each refused where it would be ignored or cannot work, naming it.
TEST(Config, LayerKindKeysAreCheckedTogether) {
  const Config ok = parse_run_config("", {"model.norm=pre", "model.first_attention_norm=false", "model.feed_forward=glu",
                                      "model.local_attention=128", "model.global_attention_every=3",
                                      "model.local_rotary_base=10000", "model.rotary_base=160000"});
  EXPECT_EQ(ok.model.feed_forward, FeedForward::kGlu);
  EXPECT_NE(to_yaml(ok).find("feed_forward: glu"), std::string::npos);
  for (const auto& [overrides, expected] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"model.first_attention_norm=false"},
            "model.first_attention_norm: false applies to model.norm: pre only"},
           {{"model.global_attention_every=2"},
            "model.global_attention_every = 2 applies with model.local_attention > 0 only"},
           {{"model.local_rotary_base=10000"}, "model.local_rotary_base = 10000 applies with model.local_attention > 0"},
           {{"model.local_attention=7"}, "model.local_attention (7) must be even"},
           {{"model.local_attention=8", "model.attention=linear"}, "model.local_attention needs model.attention: softmax"},
           {{"model.local_attention=8", "model.local_rotary_base=500", "model.position=absolute"},
            "model.local_rotary_base = 500 needs model.position: rotary (got absolute)"},
           {{"model.feed_forward=swiglu"}, "model.feed_forward = 'swiglu' is not allowed: choose one of mlp, glu"},
           {{"model.global_attention_every=0", "model.local_attention=8"},
            "model.global_attention_every = 0 is out of range"}}) {
    const auto msg = error_of([&] { parse_run_config("", overrides); });  // the model's rules (model/options.cpp)
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  }
}

// train.param_dtype auto becomes bf16 only on CUDA with precision bf16; an explicit choice stays.
TEST(Config, ParamDtypeAutoResolvesByDeviceAndPrecision) {
  EXPECT_EQ(parse_config("", {}).train.param_dtype, ParamDtype::kAuto);
  auto resolved = [](const std::vector<std::string>& overrides, bool cuda) {
    auto c = parse_config("", overrides);
    resolve_param_dtype(c, cuda);
    return c.train.param_dtype;
  };
  EXPECT_EQ(resolved({"train.precision=bf16"}, true), ParamDtype::kBf16);
  EXPECT_EQ(resolved({"train.precision=bf16"}, false), ParamDtype::kFp32);
  EXPECT_EQ(resolved({"train.precision=fp32"}, true), ParamDtype::kFp32);
  EXPECT_EQ(resolved({"train.precision=fp16"}, true), ParamDtype::kFp32);
  EXPECT_EQ(resolved({"train.precision=bf16", "train.param_dtype=fp32"}, true), ParamDtype::kFp32);
  EXPECT_EQ(resolved({"train.precision=bf16", "train.param_dtype=bf16"}, false), ParamDtype::kBf16);
}

TEST(Config, MissingFileSaysWhereConfigsAre) {
  auto msg = error_of([] { load_config("/nonexistent/dir/x.yaml"); });
  EXPECT_NE(msg.find("cannot read config file '/nonexistent/dir/x.yaml'"), std::string::npos) << msg;
}

TEST(Config, MalformedYamlGivesLine) {
  auto msg = error_of([] { parse_config("model:\n  hidden_size: [1, 2\n", {}, "bad.yaml"); });
  EXPECT_NE(msg.find("bad.yaml: malformed YAML at line"), std::string::npos) << msg;
  auto msg2 = error_of([] { parse_config("- a\n- b\n", {}, "list.yaml"); });
  EXPECT_NE(msg2.find("must be a mapping"), std::string::npos) << msg2;
}

TEST(Config, NullValueIsAnError) {
  auto msg = error_of([] { parse_config("model:\n  hidden_size:\n"); });
  EXPECT_NE(msg.find("model.hidden_size has no value"), std::string::npos) << msg;
}

TEST(Config, ShippedConfigsLoad) {
  const std::string src = roformer::test::source_dir();
  int checked = 0;  // every shipped config, so a new one is covered without a list to keep
  for (const auto& entry : std::filesystem::directory_iterator(src + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    EXPECT_NO_THROW(load_config(entry.path().string())) << entry.path();
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

TEST(Config, ReferenceListsEveryKey) {
  const std::string ref = defaults_reference(false);
  const std::string md = defaults_reference(true);
  for (const auto& key : all_keys()) {
    const std::string leaf = key.substr(key.find('.') + 1);
    EXPECT_NE(ref.find("  " + leaf + ":"), std::string::npos) << key;
    EXPECT_NE(md.find("`" + key + "`"), std::string::npos) << key;
  }
}

TEST(Config, DuplicateKeyNamesKeyAndBothLines) {
  auto msg = error_of([] { parse_config("train:\n  steps: 10\n  batch_size: 4\n  steps: 20\n", {}, "dup.yaml"); });
  EXPECT_NE(msg.find("dup.yaml: line 4: key 'train.steps' appears twice (first at line 2)"), std::string::npos) << msg;
}

TEST(Config, DuplicateSectionNamesSectionAndBothLines) {
  auto msg = error_of([] { parse_config("train:\n  steps: 10\nmodel:\n  num_layers: 2\ntrain:\n  batch_size: 4\n",
                                        {}, "dup.yaml"); });
  EXPECT_NE(msg.find("dup.yaml: line 5: section 'train' appears twice (first at line 1)"), std::string::npos) << msg;
}

TEST(Config, SecondYamlDocumentIsAnError) {
  auto msg = error_of([] { parse_config("train:\n  steps: 10\n---\ntrain:\n  steps: 20\n", {}, "multi.yaml"); });
  EXPECT_NE(msg.find("multi.yaml: line 4: a second YAML document"), std::string::npos) << msg;
  // A bare trailing separator holds nothing that would be ignored.
  EXPECT_EQ(parse_config("train:\n  steps: 2000\n---\n", {}, "trail.yaml").train.steps, 2000);
}

TEST(Config, DirectoryAsConfigFileIsAnError) {
  roformer::test::TempDir tmp;
  const std::string dir = tmp.str();
  auto msg = error_of([&] { load_config(dir); });
  EXPECT_NE(msg.find("config '" + dir + "' is a directory, not a YAML file"), std::string::npos) << msg;
}

TEST(Config, SectionGivenAsOverrideKeyShowsItsKeys) {
  auto msg = error_of([] { parse_config("", {"model=3"}); });
  EXPECT_NE(msg.find("override 'model=3': 'model' is a section, not a key; set one key at a time with --set "
                     "model.KEY=VALUE (its keys: vocab_size, hidden_size,"), std::string::npos) << msg;
}

TEST(Config, IntegerTooLargeForItsTypeSaysSo) {
  auto msg = error_of([] { parse_config("", {"train.steps=99999999999999999999"}); });
  EXPECT_NE(msg.find("config key train.steps = 99999999999999999999 is too large for a 64-bit integer"),
            std::string::npos) << msg;
  auto msg2 = error_of([] { parse_config("train:\n  batch_size: 1e30\n"); });
  EXPECT_NE(msg2.find("config key train.batch_size = 1e30 is too large for a 64-bit integer"), std::string::npos)
      << msg2;
}

// Found by tests/fuzz/fuzz_config: yaml-cpp's LoadAll looped forever on a document starting with
// ',', and Load reads such a document as empty, ignoring everything after it.
TEST(Config, LeadingCommaIsMalformedNotEmptyAndDoesNotHang) {
  auto msg = error_of([] { parse_config("# a comment\n, trained on the\nmodel:\n  num_layers: 2\n", {}, "comma.yaml"); });
  EXPECT_NE(msg.find("comma.yaml: malformed YAML at line 2: ', trained on the' starts no mapping of sections"),
            std::string::npos) << msg;
  EXPECT_EQ(parse_config("~\n").model.num_layers, Config{}.model.num_layers);  // an explicit null is empty
  EXPECT_EQ(parse_config("train:\n  steps: 2000\n...\n# the end\n", {}, "end.yaml").train.steps, 2000);
  msg = error_of([] { parse_config("train:\n  steps: 2000\n...\n--- \nmodel:\n  num_layers: 2\n", {}, "m.yaml"); });
  EXPECT_NE(msg.find("m.yaml: line 5: a second YAML document"), std::string::npos) << msg;
}

// config::diff compares field by field (values, not their text layout): only the changed keys, in
// table order, with both values as the reference writes them; the resume policy sorts them.
TEST(Config, DiffListsChangedKeysAndTheResumePolicySortsThem) {
  const auto a = roformer::config::parse_config("", {});
  EXPECT_TRUE(roformer::config::diff(a, a).empty());
  const auto b = roformer::config::parse_config(
      "", {"model.hidden_size=96", "optimizer.lr=0.5", "logging.every=7", "data.train_files=[x.txt, y.txt]"});
  const auto changes = roformer::config::diff(a, b);
  std::vector<std::string> keys;
  for (const auto& c : changes) keys.push_back(c.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"model.hidden_size", "data.train_files", "optimizer.lr", "logging.every"}));
  EXPECT_EQ(changes[0].after, "96");
  EXPECT_EQ(changes[1].after, "[x.txt, y.txt]");
  const auto sorted = roformer::checkpoint::classify_resume_changes(a, b);
  ASSERT_EQ(sorted.refused.size(), 2u);  // the model and the data
  EXPECT_EQ(sorted.refused[0].key, "model.hidden_size");
  ASSERT_EQ(sorted.rescued.size(), 1u);
  EXPECT_EQ(sorted.rescued[0].key, "optimizer.lr");
  ASSERT_EQ(sorted.applied.size(), 1u);
  EXPECT_EQ(sorted.applied[0].key, "logging.every");
  try {
    roformer::checkpoint::check_resume_changes(a, b, "ck");
    ADD_FAILURE() << "refused changes must throw";
  } catch (const roformer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot resume from ck: the config changes the model or the data:\n  "
                                         "model.hidden_size: 768 -> 96\n  data.train_files: "),
              std::string::npos)
        << e.what();
  }
}

