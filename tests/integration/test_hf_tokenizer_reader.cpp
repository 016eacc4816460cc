// data/hf_tokenizer: roformer's tokenizer.json reader must give the ids Hugging Face `tokenizers` gives.
// tests/python/hf_tokenizer_reference.py trains, with the venv's `tokenizers` and nothing downloaded,
// the tokenizers real encoders use (BERT's WordPiece cased and uncased, RoBERTa's and ModernBERT's
// byte-level BPE, a Metaspace Unigram) and variants that put every implemented component and option
// to work, on Brown; `roformer export`'s tokenizer.json (SentencePiece converted) comes along. Each
// must give identical ids, without and with the special tokens, for Brown paragraphs, generated
// web-like lines, component stress strings and (for the tokenizers whose components classify
// characters) every code point of planes 0-3 and 14 in context. Then the roles, the `tokenizer
// encode` command, prepare with a tokenizer.json, and every bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "data/loader.h"
#include "data/hf_tokenizer/unicode.h"
#include "data/sentencepiece_tokenizer.h"
#include "run_dir_util.h"
#include "test_util.h"
#include "text_samples.h"
#include "tools/hf_tokenizer.h"

using namespace roformer::test;
using roformer::data::SpecialTokens;
using roformer::data::Tokenizer;
using nlohmann::json;

namespace {

// What the components of a tokenizer.json must get right beyond Brown: whitespace of every kind,
// accents composed and not, case with special mappings, compatibility forms, numbers, quotes,
// contractions, long words, the added tokens' own rules (lstrip, single_word, normalized).
const std::vector<std::string> kStressTexts = {
    "", " ", "  ", "   ", "a", "A", "\t\ttabs\tand\nnewlines\n", "\r\nwindows line\r\n", "mixed\u00a0no-break\u2009thin",
    "don't stop 'til you're done, they'll've I'm we'd", "DON'T SHOUT 'TIL", "x", std::string(150, 'x'),
    std::string(101, 'A'), "antidisestablishmentarianism supercalifragilistic", "12345678901234567890 1,000,000 3.14",
    "\u0661\u0662\u0663 \u0966\u0967 \u00b2\u00b3 \u00bd \u2160\u2161", "caf\u00e9 cafe\u0301 na\u00efve na\u0131\u0308ve",
    "\u0130stanbul \u0130I\u0131i STRASSE stra\u00dfe \u1e9e \u03a3\u039f\u03a6\u039f\u03a3 \u01c5\u01c4\u01c6",
    "\uff26\uff55\uff4c\uff4c-width \ufb01rst \u2122 \u338f \u32ff \u00aa\u0300", "\u3000ideographic\u3000space",
    "\u4e2d\u6587\u5b57 and \ud55c\uad6d\uc5b4 \u1100\u1161\u11a8 \u3131\u314f", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "emoji \U0001F600\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F1EB\U0001F1F7 #\ufe0f\u20e3 \U0001F970",
    "controls \x01\x1b\x7f\u0085\u009d and \ufeffBOM \u200b\u200c\u200d zero width", "\xef\xbf\xbd replacement",
    "quotes ``like this'' and \u201cthese\u201d \u2018or\u2019 these", "dashes -- \u2014 \u2013 - --- ...",
    "[MASK] <mask> a <mask> b  <mask>c [CLS]x[SEP] <s></s> [UNK] [PAD] <pad> <|padding|>", "[X] a [X]b  [X]  c",
    "ab abc cab new york New York newyork Grand grand Grandson", "<eos> x<eos>y", "|||EMAIL_ADDRESS||| |||PHONE_NUMBER|||",
    "|||EMAIL_ADDRESS|||x y|||IP_ADDRESS|||", "runs    of     spaces      here", "x-y-z --a-- 1-2", "xylophone xx",
    "\u2581already\u2581marked \u2581", "Hello  world", " leading", "trailing ", "\u180e mongolian vowel separator",
    "\U00020000\U0002A700\U00030000 \U000E0100 \U0001D400\U0001D7CE", "\u0300 leading mark", "\u0301\u0302\u0303"};

// Code points first..last (surrogates left out), each between letters and then alone before a
// space, in texts of `per_text` code points.
void add_code_points(char32_t first, char32_t last, size_t per_text, std::vector<std::string>& texts) {
  std::string text;
  size_t in_text = 0;
  for (char32_t c = first; c <= last; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    std::string ch;
    roformer::data::hf::append_utf8(ch, c);
    text += "x" + ch + "y " + ch + " ";
    if (++in_text == per_text) {
      texts.push_back(text);
      text.clear();
      in_text = 0;
    }
  }
  if (!text.empty()) texts.push_back(text);
}

// The reference's ids of one tokenizer: per text, without then with the special tokens.
struct ReferenceIds {
  std::vector<std::vector<int32_t>> plain, special;
};

ReferenceIds read_ids(const std::string& path, size_t texts) {
  std::ifstream in(path, std::ios::binary);
  ReferenceIds r;
  for (auto* list : {&r.plain, &r.special})
    for (size_t i = 0; i < texts; ++i) {
      int32_t n = 0;
      in.read(reinterpret_cast<char*>(&n), 4);
      std::vector<int32_t> ids(static_cast<size_t>(std::max(n, 0)));
      in.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
      list->push_back(std::move(ids));
    }
  if (!in) ADD_FAILURE() << path << " holds fewer ids than " << texts << " texts";
  return r;
}

// Everything the suite shares: the trained tokenizers, the texts, the reference's ids.
struct Suite {
  TempDir dir;
  std::vector<std::string> texts;
  size_t ordinary = 0;                            // texts every tokenizer encodes; the rest: code points
  std::set<std::string> every_text;               // the tokenizers that encode the code-point texts too
  std::vector<std::string> names;                 // of the tokenizers, as the reference wrote them
  std::string error;                              // why the suite could not be set up
};

class HfReader : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_ = new Suite;
    if (!have_brown() || python().empty()) return;
    Suite& s = *suite_;
    s.texts = first_lines(brown_dir() + "/valid.txt", 300);
    for (const auto& line : web_like_lines(words_of(s.texts), 400)) s.texts.push_back(line);
    s.texts.insert(s.texts.end(), kStressTexts.begin(), kStressTexts.end());
    s.ordinary = s.texts.size();
    add_code_points(0, 0x323AF, 256, s.texts);
    add_code_points(0xE0000, 0xE01EF, 256, s.texts);
    s.every_text = {"wordpiece-uncased", "bpe-roberta", "unigram-metaspace", "wp-nfd-strip", "wp-nfkd-split",
                    "export-unigram"};
    std::string train;
    for (const auto& line : first_lines(brown_dir() + "/train.txt", 3000)) train += line + "\n";
    write_file(s.dir.str("train.txt"), train);
    write_file(s.dir.str("texts.json"), json({{"texts", s.texts}, {"ordinary", s.ordinary},
                                              {"every_text", std::vector<std::string>(s.every_text.begin(), s.every_text.end())}})
                                            .dump());
    // `roformer export`'s tokenizer.json of a SentencePiece unigram and BPE tokenizer.
    std::string extra;
    for (const std::string type : {"unigram", "bpe"}) {
      roformer::data::TokenizerTrainOptions o;
      o.inputs = {s.dir.str("train.txt")};
      o.out_dir = s.dir.str("spm-" + type);
      o.vocab_size = 2000;
      o.model_type = type;
      o.progress = false;
      const Tokenizer spm = Tokenizer::load(roformer::data::train_tokenizer(o));
      roformer::tools::HfTokenizerOptions ho;
      roformer::tools::write_hf_tokenizer(roformer::tools::hf_tokenizer_json(spm.model_path(), ho).dump(2), spm,
                                          s.dir.str("export-" + type), ho);
      extra += " " + s.dir.str("export-" + type);
    }
    const auto r = run_command(python() + " " + source_dir() + "/tests/python/hf_tokenizer_reference.py " +
                               s.dir.str("ref") + " " + s.dir.str("train.txt") + " " + s.dir.str("texts.json") + extra);
    if (r.exit_code != 0) {
      s.error = r.output;
      return;
    }
    std::istringstream names(r.output);
    for (std::string name; std::getline(names, name);)
      if (!name.empty()) s.names.push_back(name);
  }
  static void TearDownTestSuite() { delete suite_; }
  void SetUp() override {
    ROFORMER_REQUIRE_BROWN();
    if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
    ASSERT_TRUE(suite_->error.empty()) << suite_->error;
  }
  // A tokenizer the reference trained (or the export's, under its folder name).
  static std::string path_of(const std::string& name) {
    return name.rfind("export-", 0) == 0 ? suite_->dir.str(name) : suite_->dir.str("ref/" + name);
  }
  // The texts the reference encoded with it: the ordinary ones, or all.
  static size_t texts_of(const std::string& name) {
    return suite_->every_text.count(name) ? suite_->texts.size() : suite_->ordinary;
  }
  static ReferenceIds reference_of(const std::string& name) {
    return read_ids(suite_->dir.str("ref/" + name + ".ids"), texts_of(name));
  }
  static Suite* suite_;
};
Suite* HfReader::suite_ = nullptr;

}  // namespace

TEST_F(HfReader, IdsAreThoseOfTokenizers) {
  const Suite& s = *suite_;
  ASSERT_GE(s.names.size(), 16u);
  for (const std::string& name : s.names) {
    const Tokenizer tok = Tokenizer::load(path_of(name));
    const size_t n = texts_of(name);
    const ReferenceIds want = reference_of(name);
    size_t same = 0, same_special = 0;
    int shown = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto ids = tok.encode(s.texts[i]);
      if (ids == want.plain[i]) {
        ++same;
      } else if (shown++ < 3) {
        std::string mine, theirs;
        for (const int32_t id : ids) mine += " " + std::to_string(id) + ":" + tok.id_to_piece(id);
        for (const int32_t id : want.plain[i]) theirs += " " + std::to_string(id) + ":" + tok.id_to_piece(id);
        ADD_FAILURE() << name << ": other ids than tokenizers for text " << i << " " << json(s.texts[i]).dump()
                      << "\n  roformer  " << mine << "\n  tokenizers" << theirs;
      }
      same_special += tok.add_special_tokens(ids) == want.special[i];
    }
    EXPECT_EQ(same, n) << name;
    EXPECT_EQ(same_special, n) << name << ": the special tokens differ";
    std::cout << name << " (" << tok.description() << ", " << tok.vocab_size() << " ids): identical ids for " << same
              << "/" << n << " texts, with special tokens " << same_special << "/" << n << "\n";
  }
}

// The roles, special ids and word starts of each layout, as the tokenizer.json (and RoBERTa's
// special_tokens_map.json) put them.
TEST_F(HfReader, RolesSpecialIdsAndWordStartsComeFromTheTokenizer) {
  const Tokenizer wp = Tokenizer::load(path_of("wordpiece-uncased"));
  EXPECT_EQ(wp.special_tokens(), (SpecialTokens{0, 1, 2, 3, 4})) << wp.special_tokens().describe();
  EXPECT_EQ(wp.special_ids(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  const auto ids = wp.encode("unbelievably");
  ASSERT_GE(ids.size(), 2u);
  EXPECT_TRUE(wp.is_word_start(ids[0])) << wp.id_to_piece(ids[0]);
  EXPECT_FALSE(wp.is_word_start(ids[1])) << wp.id_to_piece(ids[1]);  // "##..."

  const Tokenizer roberta = Tokenizer::load(path_of("bpe-roberta"));
  EXPECT_EQ(roberta.id_to_piece(roberta.special_tokens().mask), "<mask>");
  EXPECT_EQ(roberta.id_to_piece(roberta.special_tokens().cls), "<s>");
  EXPECT_EQ(roberta.id_to_piece(roberta.special_tokens().sep), "</s>");
  EXPECT_EQ(roberta.id_to_piece(roberta.special_tokens().pad), "<pad>");
  EXPECT_EQ(roberta.id_to_piece(roberta.special_tokens().unk), "<unk>");
  const auto the = roberta.encode("the the");
  ASSERT_EQ(the.size(), 2u);
  EXPECT_FALSE(roberta.is_word_start(the[0])) << roberta.id_to_piece(the[0]);  // "the": no space before
  EXPECT_TRUE(roberta.is_word_start(the[1])) << roberta.id_to_piece(the[1]);   // "Ġthe"
  // <mask> takes the space before it (lstrip), as in RoBERTa.
  EXPECT_EQ(roberta.encode("a <mask>").back(), roberta.special_tokens().mask);
  EXPECT_EQ(roberta.encode("a <mask>").size(), 2u);

  const Tokenizer modern = Tokenizer::load(path_of("bpe-modernbert"));
  const SpecialTokens& m = modern.special_tokens();
  EXPECT_EQ(modern.id_to_piece(m.cls), "[CLS]");
  EXPECT_EQ(modern.id_to_piece(m.sep), "[SEP]");
  EXPECT_EQ(modern.id_to_piece(m.pad), "[PAD]");
  EXPECT_EQ(modern.id_to_piece(m.mask), "[MASK]");
  const auto specials = modern.special_ids();
  for (const char* token : {"|||IP_ADDRESS|||", "<|padding|>", "<|endoftext|>", "[UNK]"})
    EXPECT_TRUE(modern.is_special(modern.encode(token).front())) << token;
  const auto spaces = modern.encode("a    b");  // the run of spaces is an added token, not special
  ASSERT_EQ(spaces.size(), 3u);
  EXPECT_FALSE(modern.is_special(spaces[1]));
  EXPECT_EQ(modern.id_to_piece(spaces[1]), "    ");
  EXPECT_EQ(specials.size(), 8u) << modern.special_tokens().describe();

  const Tokenizer uni = Tokenizer::load(path_of("unigram-metaspace"));
  EXPECT_EQ(uni.id_to_piece(uni.special_tokens().cls), "[CLS]");
  EXPECT_EQ(uni.id_to_piece(uni.special_tokens().unk), "[UNK]");
  for (const int32_t id : uni.encode("the cat sat"))
    EXPECT_EQ(uni.is_word_start(id), uni.id_to_piece(id).rfind("\u2581", 0) == 0) << uni.id_to_piece(id);

  // The fingerprint covers the file and the roles: without its special_tokens_map.json the roles are
  // found alike (the post-processor, the usual names), with another mask it is another tokenizer.
  TempDir other;
  write_file(other.str("tokenizer.json"), read_file(path_of("bpe-roberta") + "/tokenizer.json"));
  EXPECT_EQ(Tokenizer::load(other.str()).special_tokens(), roberta.special_tokens());
  EXPECT_EQ(Tokenizer::load(other.str()).fingerprint(), roberta.fingerprint());
  write_file(other.str("special_tokens_map.json"), R"({"mask_token": "<unk>"})");
  EXPECT_NE(Tokenizer::load(other.str()).fingerprint(), roberta.fingerprint());
  EXPECT_EQ(Tokenizer::load(other.str()).special_tokens().mask, roberta.special_tokens().unk);
}

// `roformer tokenizer encode` prints, for every line, the ids tokenizers gives (and with
// --add-special-tokens the post-processor's; with --pieces the pieces).
TEST_F(HfReader, EncodeCommandPrintsTheIdsOfEachLine) {
  const Suite& s = *suite_;
  std::vector<size_t> lines;  // the texts that are one line each
  std::string input;
  for (size_t i = 0; i < s.ordinary; ++i)
    if (s.texts[i].find('\n') == std::string::npos) {
      lines.push_back(i);
      input += s.texts[i] + "\n";
    }
  write_file(suite_->dir.str("lines.txt"), input);
  for (const std::string name : {"wordpiece-cased", "bpe-modernbert", "unigram-metaspace"}) {
    const ReferenceIds want = reference_of(name);
    for (const bool special : {false, true}) {
      const auto r = run_roformer("tokenizer encode --tokenizer " + path_of(name) +
                                  (special ? " --add-special-tokens" : "") + " < " + suite_->dir.str("lines.txt"));
      ASSERT_EQ(r.exit_code, 0) << r.output;
      std::istringstream out(r.output);
      size_t k = 0, same = 0;
      for (std::string line; std::getline(out, line) && k < lines.size(); ++k) {
        std::string expected;
        for (const int32_t id : (special ? want.special : want.plain)[lines[k]])
          expected += (expected.empty() ? "" : " ") + std::to_string(id);
        same += line == expected;
      }
      EXPECT_EQ(k, lines.size()) << name;
      EXPECT_EQ(same, lines.size()) << name << (special ? " with special tokens" : "");
    }
  }
  write_file(suite_->dir.str("two.txt"), "The cat.\n\nunbelievably\n");
  const auto r = run_roformer("tokenizer encode --pieces --tokenizer " + path_of("wordpiece-uncased") + " < " +
                              suite_->dir.str("two.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream out(r.output);
  std::string first, empty, third;
  std::getline(out, first);
  std::getline(out, empty);
  std::getline(out, third);
  const Tokenizer wp = Tokenizer::load(path_of("wordpiece-uncased"));
  json pieces = json::array();
  for (const int32_t id : wp.encode("The cat.")) pieces.push_back(wp.id_to_piece(id));
  EXPECT_EQ(json::parse(first), pieces) << r.output;
  EXPECT_EQ(pieces.back(), ".");
  EXPECT_EQ(json::parse(empty), json::array()) << r.output;
  ASSERT_GE(json::parse(third).size(), 2u) << r.output;
  EXPECT_EQ(json::parse(third)[1].get<std::string>().rfind("##", 0), 0u) << r.output;
}

// prepare with a tokenizer.json (a model directory holding one): the ids are the tokenizer's, its
// roles and special ids are recorded, and the loader frames and masks with them.
TEST_F(HfReader, PrepareAndTheLoaderUseTheTokenizersSpecialTokens) {
  const std::string out = suite_->dir.str("prepared-roberta");
  const auto r = run_roformer("prepare --tokenizer " + path_of("bpe-roberta") + " --input " + brown_dir() +
                              "/valid.txt --out " + out + " --no-progress");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Tokenizer tok = Tokenizer::load(path_of("bpe-roberta"));
  const json meta = json::parse(read_file(out + "/meta.json"));
  EXPECT_EQ(meta["special_tokens"]["mask"], tok.special_tokens().mask);
  EXPECT_EQ(meta["special_tokens"]["cls"], tok.special_tokens().cls);
  EXPECT_EQ(meta["special_ids"], json(tok.special_ids()));
  const auto corpus = roformer::data::PreparedCorpus::open(out, tok.fingerprint());
  EXPECT_EQ(corpus->special_tokens(), tok.special_tokens());
  // Brown's valid.txt is one document, its paragraphs encoded one by one.
  std::vector<int32_t> expected;
  for (const auto& line : first_lines(brown_dir() + "/valid.txt", 3)) {
    const auto ids = tok.encode(line);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  const auto doc = corpus->document(0);
  ASSERT_GE(doc.size(), expected.size());
  EXPECT_EQ(std::vector<int32_t>(doc.begin(), doc.begin() + static_cast<long>(expected.size())), expected);

  roformer::data::LoaderOptions o;
  o.batch_size = 8;
  o.max_seq_len = 64;
  o.num_workers = 0;
  o.masking.random_token_rate = 0.5;  // many random replacements, none of them special
  o.masking.mask_token_rate = 0.4;
  roformer::data::MlmLoader loader(corpus, o);
  const auto batch = loader.next();
  const auto ids = batch.input_ids.contiguous();
  const int64_t* p = ids.data_ptr<int64_t>();
  int64_t masks = 0;
  for (int64_t b = 0; b < 8; ++b) {
    EXPECT_EQ(p[b * 64], tok.special_tokens().cls);
    EXPECT_EQ(p[b * 64 + 63], tok.special_tokens().sep);
    for (int64_t t = 1; t < 63; ++t) masks += p[b * 64 + t] == tok.special_tokens().mask;
  }
  EXPECT_GT(masks, 0);
  const auto labels = batch.pred_labels.contiguous();
  for (int64_t k = 0; k < labels.numel(); ++k) EXPECT_FALSE(tok.is_special(static_cast<int32_t>(labels.data_ptr<int64_t>()[k])));
  for (int64_t k = 0; k < 8 * 64; ++k) {
    if (!tok.is_special(static_cast<int32_t>(p[k]))) continue;
    EXPECT_TRUE(p[k] == tok.special_tokens().cls || p[k] == tok.special_tokens().sep || p[k] == tok.special_tokens().mask)
        << p[k];
  }
}

namespace {

// A small tokenizer.json written by hand (BERT's layout), for the bad inputs.
json tiny_wordpiece() {
  json added = json::array();
  const std::vector<std::string> specials = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (size_t id = 0; id < specials.size(); ++id)
    added.push_back({{"id", id}, {"content", specials[id]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  json vocab = json::object();
  const std::vector<std::string> pieces = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on",
                                           "mat", ".", "##s"};
  for (size_t id = 0; id < pieces.size(); ++id) vocab[pieces[id]] = id;
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
          {"normalizer", {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                          {"strip_accents", nullptr}, {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}}},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                     {"max_input_chars_per_word", 100}, {"vocab", vocab}}}};
}

// `roformer prepare` with the tokenizer written as `text`: its one-line error (or "" on success),
// checked to leave --out unwritten.
std::string prepare_error(const std::string& text) {
  TempDir dir;
  write_file(dir.str("tokenizer.json"), text);
  write_file(dir.str("text.txt"), "the cat sat on the mat.\nthe cats sat.\n");
  const auto r = run_roformer("prepare --tokenizer " + dir.str("tokenizer.json") + " --input " + dir.str("text.txt") +
                              " --out " + dir.str("out") + " --no-progress");
  if (r.exit_code == 0) return "";
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(fs::exists(dir.str("out"))) << "prepare wrote " << dir.str("out") << " before refusing";
  std::string line;
  std::istringstream lines(r.output);
  int count = 0;
  for (std::string l; std::getline(lines, l);)
    if (!l.empty()) line = l, ++count;
  EXPECT_EQ(count, 1) << r.output;
  EXPECT_NE(line.find(dir.str("tokenizer.json")), std::string::npos) << line;
  return line;
}

}  // namespace

TEST(HfReaderBadInput, TheTinyTokenizerWorks) {
  TempDir dir;
  write_file(dir.str("tokenizer.json"), tiny_wordpiece().dump());
  const Tokenizer tok = Tokenizer::load(dir.str());
  EXPECT_EQ(tok.encode("The cats sat on the mat."), (std::vector<int32_t>{5, 6, 11, 7, 8, 5, 9, 10}));
  EXPECT_EQ(tok.add_special_tokens({5}), (std::vector<int32_t>{2, 5, 3}));
  EXPECT_EQ(tok.encode("dog"), (std::vector<int32_t>{1}));
  EXPECT_EQ(tok.decode({5, 6, 11, 9, 10}), "the cats mat.");
  EXPECT_EQ(prepare_error(tiny_wordpiece().dump()), "");
}

TEST(HfReaderBadInput, TruncatedOrNotJson) {
  const std::string whole = tiny_wordpiece().dump();
  for (const std::string& text : {whole.substr(0, whole.size() / 2), std::string("not json at all\n"), std::string()}) {
    const std::string msg = prepare_error(text);
    EXPECT_NE(msg.find("is not valid JSON"), std::string::npos) << msg;
    EXPECT_NE(msg.find("give a tokenizer.json saved by Hugging Face tokenizers"), std::string::npos) << msg;
  }
}

TEST(HfReaderBadInput, UnknownModelOrComponentIsNamed) {
  json t = tiny_wordpiece();
  t["model"]["type"] = "WordLevel";
  std::string msg = prepare_error(t.dump());
  EXPECT_NE(msg.find("\"model.type\" is \"WordLevel\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("WordPiece, BPE or Unigram"), std::string::npos) << msg;
  t = tiny_wordpiece();
  t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "UnicodeScripts"}}}}};
  msg = prepare_error(t.dump());
  EXPECT_NE(msg.find("\"pre_tokenizer.pretokenizers[0].type\" is \"UnicodeScripts\""), std::string::npos) << msg;
  t = tiny_wordpiece();
  t["normalizer"] = {{"type", "ByteLevel"}};
  msg = prepare_error(t.dump());
  EXPECT_NE(msg.find("\"normalizer.type\" is \"ByteLevel\""), std::string::npos) << msg;
  t = tiny_wordpiece();
  t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\bword\\b"}}}, {"behavior", "Isolated"}, {"invert", false}};
  msg = prepare_error(t.dump());
  EXPECT_NE(msg.find("\"pre_tokenizer.pattern\" is"), std::string::npos) << msg;
  EXPECT_NE(msg.find("it uses a word boundary (\\b)"), std::string::npos) << msg;
}

TEST(HfReaderBadInput, NoMaskTokenIsRefusedForMaskedLanguageModelling) {
  json t = tiny_wordpiece();
  t["added_tokens"].erase(4);
  t["model"]["vocab"].erase("[MASK]");
  const std::string msg = prepare_error(t.dump());
  EXPECT_NE(msg.find("has no mask token, which masked-language-model training needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("special_tokens_map.json"), std::string::npos) << msg;
  // Encoding needs no mask.
  TempDir dir;
  write_file(dir.str("tokenizer.json"), t.dump());
  write_file(dir.str("line.txt"), "the cat\n");
  const auto r = run_roformer("tokenizer encode --tokenizer " + dir.str() + " < " + dir.str("line.txt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "5 6\n");
  // A role naming a token the tokenizer lacks is refused, naming the file beside it.
  write_file(dir.str("special_tokens_map.json"), R"({"mask_token": "<mask>"})");
  const std::string role = error_of([&] { Tokenizer::load(dir.str()); });
  EXPECT_NE(role.find(dir.str("special_tokens_map.json") + ": \"mask_token\""), std::string::npos) << role;
}

TEST(HfReaderBadInput, MergesOfTokensNotInTheVocabulary) {
  json t = tiny_wordpiece();
  t["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                {"vocab", {{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}, {"[MASK]", 4}, {"c", 5}, {"a", 6},
                           {"t", 7}, {"ca", 8}}},
                {"merges", {"c a", "ca t"}}};
  std::string msg = prepare_error(t.dump());
  EXPECT_NE(msg.find("\"cat\" is not in \"vocab\""), std::string::npos) << msg;
  t["model"]["merges"] = json::array({json::array({"c", "a"}), json::array({"x", "t"})});
  msg = prepare_error(t.dump());
  EXPECT_NE(msg.find("\"x\" is not in \"vocab\""), std::string::npos) << msg;
  t["model"]["merges"] = {"c a"};
  t["model"]["dropout"] = 0.1;
  msg = prepare_error(t.dump());
  EXPECT_NE(msg.find("\"model.dropout\" is 0.1"), std::string::npos) << msg;
}

// A model whose embedding has fewer rows than the tokenizer has ids is refused before the run starts.
TEST(HfReaderBadInput, IdsBeyondTheEmbeddingRows) {
  TempDir dir;
  write_file(dir.str("tok/tokenizer.json"), tiny_wordpiece().dump());
  write_file(dir.str("train.txt"), "the cat sat on the mat.\n");
  write_file(dir.str("run.yaml"), "tokenizer:\n  model: " + dir.str("tok") + "\nmodel:\n  vocab_size: 8\n  hidden_size: 32\n"
             "  num_layers: 1\n  num_heads: 2\n  intermediate_size: 64\n  max_position_embeddings: 32\n"
             "data:\n  train_files: [" + dir.str("train.txt") + "]\n  max_seq_len: 16\n"
             "schedule:\n  warmup_steps: 0\ntrain:\n  steps: 1\n  batch_size: 2\n  device: cpu\n");
  const auto r = run_roformer("train -c " + dir.str("run.yaml") + " --run-dir " + dir.str("run"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("tokenizer " + dir.str("tok/tokenizer.json") + " has 12 ids but model.vocab_size is 8: ids "
                          "beyond the model's embedding rows; set model.vocab_size: 0"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.str("run"))) << r.output;
}

// A run with RoBERTa's tokenizer.json (<s>=0, <pad>=1, </s>=2, <mask>=4): trained, resumed,
// evaluated, asked to fill <mask>, exported (its tokenizer.json unchanged, loaded by transformers
// with the same ids and roles) and continued from the export.
TEST_F(HfReader, ARunTrainsResumesFillsExportsAndContinuesWithATokenizerJson) {
  const std::string roberta = path_of("bpe-roberta");
  const Tokenizer tok = Tokenizer::load(roberta);
  TempDir dir;
  std::string train;
  for (const auto& line : first_lines(brown_dir() + "/train.txt", 400)) train += line + "\n";
  write_file(dir.str("train.txt"), train);
  const auto yaml = [&](int steps) {
    return "tokenizer:\n  model: " + roberta + "\nmodel:\n  hidden_size: 32\n  num_layers: 1\n  num_heads: 2\n"
           "  intermediate_size: 64\n  max_position_embeddings: 64\n"
           "data:\n  train_files: [" + dir.str("train.txt") + "]\n  max_seq_len: 32\n  packing: document\n"
           "schedule:\n  warmup_steps: 1\ntrain:\n  steps: " + std::to_string(steps) +
           "\n  batch_size: 4\n  precision: fp32\n  device: cpu\ncheckpoint:\n  every: 2\nlogging:\n  progress: plain\n";
  };
  write_file(dir.str("run.yaml"), yaml(2));
  auto r = run_roformer("train -c " + dir.str("run.yaml") + " --run-dir " + dir.str("run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = dir.str("run/checkpoints/step_00000002");
  EXPECT_EQ(read_file(ckpt + "/tokenizer.json"), read_file(roberta + "/tokenizer.json"));
  EXPECT_EQ(Tokenizer::load(ckpt).fingerprint(), tok.fingerprint());
  EXPECT_FALSE(fs::exists(ckpt + "/tokenizer.model"));

  write_file(dir.str("run.yaml"), yaml(4));
  r = run_roformer("train -c " + dir.str("run.yaml") + " --run-dir " + dir.str("run") + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Tokenizer::load(dir.str("run/tokenizer")).fingerprint(), tok.fingerprint());

  r = run_roformer("eval --device cpu --checkpoint " + dir.str("run") + " --data " + brown_dir() + "/valid.txt --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  r = run_roformer("fill-mask --device cpu --checkpoint " + dir.str("run") + " \"The <mask> of the city.\" --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json filled = last_json(r.output);
  ASSERT_EQ(filled["masks"].size(), 1u) << r.output;
  const auto framed = tok.add_special_tokens(tok.encode("The <mask> of the city."));
  const size_t at = std::find(framed.begin(), framed.end(), tok.special_tokens().mask) - framed.begin();
  EXPECT_EQ(filled["masks"][0]["position"], at) << r.output;  // the tokenizer found its <mask>
  auto the_mask = tok.encode("The");
  the_mask.push_back(tok.special_tokens().mask);
  EXPECT_EQ(tok.encode("The <mask>"), the_mask) << "<mask> takes the space before it";
  r = run_roformer("fill-mask --device cpu --checkpoint " + dir.str("run") + " \"no mask here\"");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("it has no <mask> to fill; write <mask> where a word is to be predicted"), std::string::npos)
      << r.output;

  r = run_roformer("export --checkpoint " + dir.str("run") + " --format hf --out " + dir.str("hf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_file(dir.str("hf/tokenizer.json")), read_file(roberta + "/tokenizer.json"));
  EXPECT_FALSE(fs::exists(dir.str("hf/spiece.model")));
  const json config = json::parse(read_file(dir.str("hf/config.json")));
  EXPECT_EQ(config["pad_token_id"], tok.special_tokens().pad);
  const json map = json::parse(read_file(dir.str("hf/special_tokens_map.json")));
  EXPECT_EQ(map["mask_token"]["content"], "<mask>");
  EXPECT_EQ(map["mask_token"]["lstrip"], true);
  const std::string text = "The jury said <mask> was over.";
  std::string ids;
  for (const int32_t id : tok.add_special_tokens(tok.encode(text))) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  r = run_command(python() + " -c \"from transformers import AutoTokenizer; t = AutoTokenizer.from_pretrained('" +
                  dir.str("hf") + "'); print(t('" + text + "')['input_ids'], t.mask_token_id, t.pad_token_id, t.cls_token_id)\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[" + ids + "] " + std::to_string(tok.special_tokens().mask) + " " +
                          std::to_string(tok.special_tokens().pad) + " " + std::to_string(tok.special_tokens().cls)),
            std::string::npos) << r.output;

  write_file(dir.str("init.yaml"), yaml(1));
  r = run_roformer("train -c " + dir.str("init.yaml") + " --set tokenizer.model= --init-from " + dir.str("hf") +
                   " --run-dir " + dir.str("continued"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Tokenizer::load(dir.str("continued/tokenizer")).fingerprint(), tok.fingerprint());
}
