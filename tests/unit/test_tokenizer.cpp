// Tokenizer: fixed special ids never produced from text, round trip, word starts, JSONL input,
// fingerprint, and every bad input (message checked, existing output untouched).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "data/spm_model.h"
#include "data/sentencepiece_tokenizer.h"
#include "data_test_text.h"
#include "test_util.h"

using namespace roformer::data;
using roformer::Error;
namespace rt = roformer::test;

using roformer::test::error_of;

namespace {

using roformer::test::synthetic_text;
using roformer::test::synthetic_words;


// One small tokenizer shared by the tests of this file (training takes well under a second).
class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new rt::TempDir();
    rt::write_file(dir_->str("train.txt"), synthetic_text(30, 6, 1));
    TokenizerTrainOptions o;
    o.inputs = {dir_->str("train.txt")};
    o.out_dir = dir_->str("tok");
    o.vocab_size = 300;
    model_ = new std::string(train_tokenizer(o));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }
  static rt::TempDir* dir_;
  static std::string* model_;
};
rt::TempDir* TokenizerTest::dir_ = nullptr;
std::string* TokenizerTest::model_ = nullptr;

}  // namespace

// A directory holding the .model loads it; the fingerprint is the .model file's (as before the
// tokenizer.json reader existed: prepared data and checkpoints of earlier runs still match); the
// tokenizer's files are what a checkpoint keeps.
TEST_F(TokenizerTest, LoadsFromItsDirectoryAndSavesItsFile) {
  const Tokenizer tok = Tokenizer::load(*model_);
  EXPECT_EQ(tok.fingerprint(), file_fingerprint(*model_));
  const Tokenizer from_dir = Tokenizer::load(dir_->str("tok"));
  EXPECT_EQ(from_dir.model_path(), *model_);
  EXPECT_EQ(from_dir.fingerprint(), tok.fingerprint());
  EXPECT_EQ(tok.description(), "SentencePiece unigram");
  EXPECT_EQ(tok.add_special_tokens({7, 8}), (std::vector<int32_t>{2, 7, 8, 3}));
  rt::TempDir out;
  const std::string saved = tok.save(out.str("copy"));
  EXPECT_EQ(saved, out.str("copy/tokenizer.model"));
  EXPECT_EQ(rt::read_file(saved), rt::read_file(*model_));
  EXPECT_EQ(Tokenizer::load(out.str("copy")).fingerprint(), tok.fingerprint());
  EXPECT_NO_THROW(tok.check_mlm_roles());
}

TEST_F(TokenizerTest, SpecialIdsAreFixed) {
  EXPECT_EQ(*model_, dir_->str("tok/tokenizer.model"));
  const Tokenizer tok = Tokenizer::load(*model_);
  EXPECT_EQ(tok.vocab_size(), 300);
  const SpecialTokens s = tok.special_tokens();
  EXPECT_EQ(s, SpecialTokens::sentencepiece());
  EXPECT_EQ(tok.id_to_piece(s.pad), "[PAD]");
  EXPECT_EQ(tok.id_to_piece(s.unk), "[UNK]");
  EXPECT_EQ(tok.id_to_piece(s.cls), "[CLS]");
  EXPECT_EQ(tok.id_to_piece(s.sep), "[SEP]");
  EXPECT_EQ(tok.id_to_piece(s.mask), "[MASK]");
  EXPECT_EQ(tok.special_ids(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  for (int32_t id = 0; id < 5; ++id) EXPECT_TRUE(tok.is_special(id));
  EXPECT_FALSE(tok.is_special(5));
  EXPECT_EQ(tok.model_path(), *model_);
  EXPECT_TRUE(rt::fs::exists(dir_->str("tok/tokenizer.vocab")));
}

TEST_F(TokenizerTest, SpecialTokensNeverProducedFromText) {
  const Tokenizer tok = Tokenizer::load(*model_);
  for (const std::string text : {"[MASK]", "[PAD]", "[CLS] the jury [SEP]", "[UNK]", "a [MASK] b [MASK][MASK]", "<s> </s> <unk>"}) {
    const auto ids = tok.encode(text);
    ASSERT_FALSE(ids.empty()) << text;
    for (const int32_t id : ids) EXPECT_GE(id, 5) << "special id " << id << " from \"" << text << "\"";
  }
  // Unknown characters give [UNK] (id 1), so the check above is not vacuous.
  const auto unk = tok.encode("\xE4\xB8\xAD");  // a CJK character absent from the training text
  EXPECT_NE(std::find(unk.begin(), unk.end(), tok.special_tokens().unk), unk.end());
}

TEST_F(TokenizerTest, RoundTrip) {
  const Tokenizer tok = Tokenizer::load(*model_);
  for (const std::string text : {"the jury said the election was unbelievable.", "International organization of [bracketed] representatives.",
                                 "Atlanta's (parenthesis) nineteen thousand"}) {
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  }
}

TEST_F(TokenizerTest, WordStartsFollowThePiecePrefix) {
  const Tokenizer tok = Tokenizer::load(*model_);
  const auto ids = tok.encode("investigation irregularities");
  ASSERT_GE(ids.size(), 3u);  // a small vocabulary: long words split into pieces
  EXPECT_TRUE(tok.is_word_start(ids[0]));
  int starts = 0;
  for (const int32_t id : ids) {
    const bool marked = tok.id_to_piece(id).rfind("\xE2\x96\x81", 0) == 0;
    EXPECT_EQ(tok.is_word_start(id), marked) << tok.id_to_piece(id);
    starts += marked;
  }
  EXPECT_EQ(starts, 2);
  for (int32_t id = 0; id < 5; ++id) EXPECT_FALSE(tok.is_word_start(id));
}

TEST_F(TokenizerTest, FingerprintIsAHashOfTheModelFile) {
  const Tokenizer tok = Tokenizer::load(*model_);
  ASSERT_EQ(tok.fingerprint().size(), 16u);
  EXPECT_EQ(tok.fingerprint(), file_fingerprint(*model_));
  // FNV-1a 64 of "a" (published test vector).
  rt::write_file(dir_->str("a.bin"), "a");
  EXPECT_EQ(file_fingerprint(dir_->str("a.bin")), "af63dc4c8601ec8c");
  // Another model (other vocabulary size) has another fingerprint.
  TokenizerTrainOptions o;
  o.inputs = {dir_->str("train.txt")};
  o.out_dir = dir_->str("tok2");
  o.vocab_size = 250;
  EXPECT_NE(Tokenizer::load(train_tokenizer(o)).fingerprint(), tok.fingerprint());
}

// The model's normalization table (nmt_nfkc) read rule by rule: NFKC's mappings, controls deleted,
// odd whitespace made " ", keys in byte order; a damaged table is refused, not half read.
TEST_F(TokenizerTest, CharsmapRulesAreSentencePieceNormalization) {
  const auto m = parse_spm_model(roformer::core::read_file(*model_, "tokenizer model"));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->normalizer_name, "nmt_nfkc");
  std::map<std::string, std::string> rules;
  std::string previous;
  bool ordered = true;
  ASSERT_TRUE(for_each_charsmap_rule(m->precompiled_charsmap, [&](std::string_view key, std::string_view to) {
    ordered &= previous < std::string(key);
    previous = std::string(key);
    rules.emplace(key, to);
  }));
  EXPECT_TRUE(ordered);
  EXPECT_GT(rules.size(), 100000u);  // NFKC of every code point, decomposed forms included
  EXPECT_EQ(rules.at("\u00a0"), " ");                    // no-break space
  EXPECT_EQ(rules.at("\ufb01"), "fi");                   // ligature
  EXPECT_EQ(rules.at("\u00b2"), "2");                    // superscript two
  EXPECT_EQ(rules.at("e\u0301"), "\u00e9");             // e + combining acute: composed
  EXPECT_EQ(rules.at("\x01"), "");                       // a control character: deleted
  EXPECT_EQ(rules.at("\u200b"), " ");                    // zero-width space
  EXPECT_EQ(rules.count("\u200d"), 0u);                  // zero-width joiner: kept as it is
  EXPECT_EQ(rules.count("a"), 0u);
  // SentencePiece applies the same table: the rules show in its encoding.
  const Tokenizer tok = Tokenizer::load(*model_);
  EXPECT_EQ(tok.encode("\ufb01\u00a0\u00b2"), tok.encode("fi 2"));

  const std::string& table = m->precompiled_charsmap;
  const auto ignore = [](std::string_view, std::string_view) {};
  EXPECT_FALSE(for_each_charsmap_rule(table.substr(0, 3), ignore));                        // no size
  EXPECT_FALSE(for_each_charsmap_rule(table.substr(0, 4 + 40), ignore));                   // trie cut short
  EXPECT_FALSE(for_each_charsmap_rule(std::string(4, '\0') + table.substr(4), ignore));  // empty trie
  std::string cut_replacements = table;
  cut_replacements.resize(table.size() - 40);  // the last replacements gone: their offsets point past the end
  EXPECT_FALSE(for_each_charsmap_rule(cut_replacements, ignore));
}

TEST_F(TokenizerTest, BpeAndJsonlInput) {
  std::string jsonl;
  std::mt19937 rng(3);
  const auto& words = synthetic_words();
  for (int d = 0; d < 60; ++d) jsonl += "{\"id\": " + std::to_string(d) + ", \"body\": \"" + words[rng() % words.size()] + " " +
                                        words[rng() % words.size()] + "\\n" + words[rng() % words.size()] + " the city\"}\n";
  rt::write_file(dir_->str("docs.jsonl"), jsonl);
  TokenizerTrainOptions o;
  o.inputs = {dir_->str("docs.jsonl")};
  o.out_dir = dir_->str("bpe");
  o.vocab_size = 160;
  o.model_type = "bpe";
  o.text_field = "body";
  const Tokenizer tok = Tokenizer::load(train_tokenizer(o));
  EXPECT_EQ(tok.id_to_piece(tok.special_tokens().mask), "[MASK]");
  EXPECT_EQ(tok.decode(tok.encode("the city")), "the city");
  for (const int32_t id : tok.encode("[MASK] [PAD]")) EXPECT_GE(id, 5);
  o.text_field = "missing";
  o.out_dir = dir_->str("bpe-missing");
  const std::string msg = error_of([&] { train_tokenizer(o); });
  EXPECT_NE(msg.find("docs.jsonl:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"missing\""), std::string::npos) << msg;
  EXPECT_FALSE(rt::fs::exists(dir_->str("bpe-missing/tokenizer.model")));
}

TEST_F(TokenizerTest, OptionsFromConfig) {
  roformer::config::Config c;
  c.data.train_files = {"a.txt"};
  c.tokenizer.vocab_size = 321;
  c.tokenizer.model_type = "bpe";
  auto o = tokenizer_options_from_config(c, "out");
  EXPECT_EQ(o.inputs, std::vector<std::string>{"a.txt"});
  EXPECT_EQ(o.vocab_size, 321);
  EXPECT_EQ(o.model_type, "bpe");
  EXPECT_EQ(o.out_dir, "out");
  c.tokenizer.input = {"b.txt"};
  EXPECT_EQ(tokenizer_options_from_config(c, "out").inputs, std::vector<std::string>{"b.txt"});
}

// ---- Bad input: each checks the message and that the existing tokenizer is untouched --------------

class TokenizerBadInput : public TokenizerTest {
 protected:
  void SetUp() override {
    out_ = dir_->str("existing");
    rt::fs::create_directories(out_);
    rt::fs::copy_file(*model_, out_ + "/tokenizer.model", rt::fs::copy_options::overwrite_existing);
    before_ = rt::read_file(out_ + "/tokenizer.model");
  }
  void expect_untouched() {
    EXPECT_EQ(rt::read_file(out_ + "/tokenizer.model"), before_);
    EXPECT_FALSE(rt::fs::exists(out_ + "/tokenizer.model.tmp"));
  }
  TokenizerTrainOptions options(const std::string& input, int64_t vocab = 300) {
    TokenizerTrainOptions o;
    o.inputs = {input};
    o.out_dir = out_;
    o.vocab_size = vocab;
    o.force = true;  // each case would replace the tokenizer in out_ (--force), and fails
    return o;
  }
  std::string out_, before_;
};

TEST_F(TokenizerBadInput, MissingInputFile) {
  const std::string msg = error_of([&] { train_tokenizer(options(dir_->str("nope.txt"))); });
  EXPECT_NE(msg.find("input file not found: " + dir_->str("nope.txt")), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(TokenizerBadInput, VocabTooSmallForSpecialTokens) {
  std::string msg = error_of([&] { train_tokenizer(options(dir_->str("train.txt"), 4)); });
  EXPECT_NE(msg.find("vocab_size 4 is too small"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[MASK]"), std::string::npos) << msg;
  expect_untouched();
  // Above the special tokens but below the required characters: SentencePiece refuses, we explain.
  msg = error_of([&] { train_tokenizer(options(dir_->str("train.txt"), 40)); });
  EXPECT_NE(msg.find("--vocab-size = 40 is too small for this text: SentencePiece needs at least"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("raise --vocab-size to at least"), std::string::npos) << msg;
  expect_untouched();
  // From a config, the message names the config key.
  auto from_config = options(dir_->str("train.txt"), 40);
  from_config.vocab_size_name = "tokenizer.vocab_size";
  msg = error_of([&] { train_tokenizer(from_config); });
  EXPECT_NE(msg.find("raise tokenizer.vocab_size to at least"), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(TokenizerBadInput, VocabTooLargeForTheText) {
  rt::write_file(dir_->str("tiny.txt"), "the cat sees the dog.\nthe dog sees the cat.\n");
  const std::string msg = error_of([&] { train_tokenizer(options(dir_->str("tiny.txt"), 5000)); });
  EXPECT_NE(msg.find("--vocab-size = 5000 is more pieces than this text supports (at most"), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(TokenizerBadInput, CharacterCoverageBelowWhatSentencePieceAccepts) {
  auto o = options(dir_->str("train.txt"));
  o.character_coverage = 0.5;
  o.character_coverage_name = "tokenizer.character_coverage";
  const std::string msg = error_of([&] { train_tokenizer(o); });
  EXPECT_NE(msg.find("tokenizer.character_coverage = 0.5 is outside what SentencePiece accepts, [0.98, 1]"),
            std::string::npos) << msg;
  expect_untouched();
  // The config refuses it when loaded, naming the key.
  const std::string cfg_msg = error_of([] { roformer::config::parse_config("", {"tokenizer.character_coverage=0.5"}); });
  EXPECT_NE(cfg_msg.find("tokenizer.character_coverage = 0.5 is out of range: allowed [0.98, 1]"), std::string::npos)
      << cfg_msg;
}

TEST_F(TokenizerBadInput, LinesBeyondSentencePieceLimitAreTrainedOnInPieces) {
  // Only over-long lines, which SentencePiece's trainer would skip whole: the reader hands them out in
  // pieces within its limit, so the text is learned from (it used to end in "too little text").
  std::string text;
  for (int i = 0; i < 3; ++i) {
    std::string line;
    while (line.size() <= static_cast<size_t>(kMaxSentenceBytes)) line += synthetic_text(1, 1, i + line.size()) + " ";
    std::replace(line.begin(), line.end(), '\n', ' ');
    text += line + "\n\n";
  }
  rt::write_file(dir_->str("long.txt"), text);
  auto o = options(dir_->str("long.txt"));
  o.out_dir = dir_->str("long-tok");
  const Tokenizer tok = Tokenizer::load(train_tokenizer(o));
  EXPECT_EQ(tok.vocab_size(), o.vocab_size);
}

TEST_F(TokenizerBadInput, InvalidUtf8NamesFileAndLine) {
  rt::write_file(dir_->str("bad.txt"), "the jury said.\nthe city\n\nan \xC3\x28 invalid byte\n");
  const std::string msg = error_of([&] { train_tokenizer(options(dir_->str("bad.txt"))); });
  EXPECT_NE(msg.find(dir_->str("bad.txt") + ":4: invalid UTF-8"), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(TokenizerBadInput, EmptyInput) {
  rt::write_file(dir_->str("empty.txt"), "\n\n   \n");
  const std::string msg = error_of([&] { train_tokenizer(options(dir_->str("empty.txt"))); });
  EXPECT_NE(msg.find("no text"), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(TokenizerBadInput, LoadMissingOrForeignModel) {
  std::string msg = error_of([&] { Tokenizer::load(dir_->str("none.model")); });
  EXPECT_NE(msg.find("tokenizer not found: " + dir_->str("none.model")), std::string::npos) << msg;
  rt::write_file(dir_->str("junk.model"), "not a model");
  msg = error_of([&] { Tokenizer::load(dir_->str("junk.model")); });
  EXPECT_NE(msg.find("cannot load tokenizer " + dir_->str("junk.model") + ": the file is not a SentencePiece model"),
            std::string::npos) << msg;
  msg = error_of([&] { Tokenizer::load(dir_->str()); });
  EXPECT_NE(msg.find("tokenizer " + dir_->str() + " is a directory without a tokenizer.json or tokenizer.model"),
            std::string::npos) << msg;
}

// A file that is not a model is recognised by its bytes, whatever SentencePiece's version says
// about it (0.1.97 and 0.2.0 word their load errors differently): text, JSON, an empty file, a
// safetensors header, protobuf without pieces, a model cut short.
TEST_F(TokenizerBadInput, ForeignFilesAreNamedAsNotAModel) {
  const std::string model = rt::read_file(*model_);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"text.model", "The jury said it did find that many of the registration practices were violated.\n"},
      {"json.model", "{\"model\": {\"type\": \"Unigram\"}}"},
      {"empty.model", ""},
      {"safetensors.model", std::string("\x13\0\0\0\0\0\0\0", 8) + "{\"__metadata__\":{}}"},
      {"no-pieces.model", std::string("\x08\x01\x10\x02", 4)},  // fields 1 and 2 as numbers: protobuf, no pieces
      {"cut.model", model.substr(0, model.size() / 2)},
  };
  for (const auto& [name, bytes] : files) {
    rt::write_file(dir_->str(name), bytes);
    const std::string msg = error_of([&] { Tokenizer::load(dir_->str(name)); });
    EXPECT_EQ(msg, "cannot load tokenizer " + dir_->str(name) + ": the file is not a SentencePiece model; give the "
                   "tokenizer.model written by `roformer tokenizer train` (tokenizer.model or --tokenizer)") << name;
  }
  EXPECT_EQ(Tokenizer::load(*model_).vocab_size(), 300);  // the real one still loads
}
