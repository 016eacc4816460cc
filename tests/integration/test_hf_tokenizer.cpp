// tools/hf_tokenizer: the Hugging Face form of our SentencePiece tokenizers. Through transformers'
// AutoTokenizer (tests/python/check_hf_tokenizer.py) it must give exactly roformer's ids, special
// tokens included, for a unigram and a BPE tokenizer: on Brown paragraphs, and on generated web-like
// lines full of what a Brown vocabulary lacks (mojibake, odd whitespace, zero-width and control
// characters, emoji, CJK, decomposed and compatibility characters).
#include <gtest/gtest.h>

#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/sentencepiece_tokenizer.h"
#include "test_util.h"
#include "text_samples.h"
#include "tools/hf_tokenizer.h"

using namespace roformer::test;
using roformer::data::Tokenizer;
using nlohmann::json;

namespace {

// Texts where SentencePiece's normalization matters: repeated, leading, trailing and other
// whitespace, NFKC (full-width letters, ligatures, accents), characters outside the vocabulary.
const std::vector<std::string> kEdgeTexts = {
    "  two leading spaces", "trailing spaces   ", "inner   runs  of    spaces", "a\ttab and\ta\u00a0no-break space",
    "\uff26\uff55\uff4c\uff4c-width \uff21\uff22\uff23 and the \ufb01rst ligature", "caf\u00e9 na\u00efve r\u00e9sum\u00e9",
    "\u4f60\u597d unknown characters \u4e16\u754c here", "numbers 1961 and 3.14, quotes \"x\" and 'y'",
    "the literal text [MASK is not special", "x", ""};

// roformer's cases for check_hf_tokenizer.py: each text with its ids ([CLS] ... [SEP]) and decoding.
json cases_of(const Tokenizer& tok, const std::vector<std::string>& texts) {
  json cases = json::array();
  for (const auto& text : texts) {
    const auto body = tok.encode(text);
    const std::vector<int32_t> ids = tok.add_special_tokens(body);
    cases.push_back({{"text", text}, {"ids", ids}, {"decoded", tok.decode(body)}});
  }
  return cases;
}

class HfTokenizerTest : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(HfTokenizerTest, AutoTokenizerGivesOurIdsOnBrownAndWebLikeText) {
  ROFORMER_REQUIRE_BROWN();
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  TempDir tmp;
  // A 2000-piece tokenizer trained on the first 3000 paragraphs of the Brown training text.
  std::string train_text;
  for (const auto& line : first_lines(brown_dir() + "/train.txt", 3000)) train_text += line + "\n";
  write_file(tmp.str("train.txt"), train_text);
  roformer::data::TokenizerTrainOptions o;
  o.inputs = {tmp.str("train.txt")};
  o.out_dir = tmp.str("tok");
  o.vocab_size = 2000;
  o.model_type = GetParam();
  const auto tok = Tokenizer::load(roformer::data::train_tokenizer(o));

  roformer::tools::HfTokenizerOptions ho;
  const auto tokenizer_json = roformer::tools::hf_tokenizer_json(tok.model_path(), ho);
  EXPECT_EQ(tokenizer_json["model"]["type"], GetParam() == "bpe" ? "BPE" : "Unigram");
  roformer::tools::write_hf_tokenizer(tokenizer_json.dump(2), tok, tmp.str("hf"), ho);

  auto brown = first_lines(brown_dir() + "/valid.txt", 300);
  const auto web = web_like_lines(words_of(brown), 400);
  brown.insert(brown.end(), kEdgeTexts.begin(), kEdgeTexts.end());
  write_file(tmp.str("brown.json"), cases_of(tok, brown).dump());
  write_file(tmp.str("web.json"), cases_of(tok, web).dump());
  auto r = run_command(python() + " " + source_dir() + "/tests/python/check_hf_tokenizer.py " + tmp.str("hf") + " " +
                       tmp.str("brown.json") + " " + tmp.str("web.json"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("brown: identical ids for 311/311 texts"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("web: identical ids for 400/400 texts"), std::string::npos) << r.output;
  std::cout << r.output;
}

INSTANTIATE_TEST_SUITE_P(ModelTypes, HfTokenizerTest, ::testing::Values("unigram", "bpe"));

// A SentencePiece model with byte fallback encodes unknown characters as bytes; tokenizer.json
// would give [UNK] there, so the conversion is refused rather than silently different.
TEST(HfTokenizer, ByteFallbackModelIsRefused) {
  TempDir tmp;
  write_file(tmp.str("text.txt"), synthetic_corpus(30, 3, 5));
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + tmp.str("text.txt") + " --model_prefix=" + tmp.str("bf") +
      " --vocab_size=400 --hard_vocab_limit=false --byte_fallback=true --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3 --pad_piece=[PAD] "
      "--unk_piece=[UNK] --bos_piece=[CLS] --eos_piece=[SEP] --control_symbols=[MASK] --minloglevel=2");
  ASSERT_TRUE(status.ok()) << status.ToString();
  const auto msg = error_of([&] { roformer::tools::hf_tokenizer_json(tmp.str("bf.model"), {}); });
  EXPECT_NE(msg.find("uses byte fallback, which the Hugging Face export does not reproduce"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(HfTokenizer, NotARoformerTokenizerIsRefused) {
  TempDir tmp;
  write_file(tmp.str("junk.model"), "not a sentencepiece model");
  const auto msg = error_of([&] { roformer::tools::hf_tokenizer_json(tmp.str("junk.model"), {}); });
  EXPECT_NE(msg.find("cannot load tokenizer " + tmp.str("junk.model")), std::string::npos) << msg;
}
