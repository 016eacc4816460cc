// Corpus preparation: shards read back equal to direct encoding, output independent of the thread
// count, JSONL input, and every bad input (message checked, existing prepared data untouched).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "data/byte_stream.h"
#include "data/corpus.h"
#include "data/text_reader.h"
#include "data/sentencepiece_tokenizer.h"
#include "data_test_text.h"
#include "test_util.h"

using namespace roformer::data;
using roformer::Error;
namespace rt = roformer::test;

using roformer::test::error_of;

namespace {

// Every file under dir (relative name -> bytes), to prove a failed run changed nothing.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : rt::fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[rt::fs::relative(e.path(), dir).string()] = rt::read_file(e.path().string());
  return files;
}

// Documents of a plain-text file as the reader sees them (parts joined), encoded directly.
std::vector<std::vector<int32_t>> encode_directly(const Tokenizer& tok, const std::string& path) {
  std::vector<std::vector<int32_t>> docs;
  DocumentReader reader(path);
  std::vector<std::string> paragraphs;
  bool continued = false;
  while (reader.next(paragraphs)) {
    if (!continued) docs.emplace_back();
    for (const auto& p : paragraphs) {
      const auto e = tok.encode(p);
      docs.back().insert(docs.back().end(), e.begin(), e.end());
    }
    continued = reader.document_continues();
  }
  return docs;
}

// `text` encoded word by word: the exact segmentation of a SentencePiece model that splits at spaces
// (encoding hundreds of KB at once drifts from it: the unigram Viterbi sums scores in float32).
std::vector<int32_t> encode_by_word(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids;
  for (size_t start = 0, end; start < text.size(); start = end + 1) {
    end = std::min(text.find(' ', start), text.size());
    const auto e = tok.encode(text.substr(start, end - start));
    ids.insert(ids.end(), e.begin(), e.end());
  }
  return ids;
}

// `text` encoded in the pieces the reader cuts a long paragraph into.
std::vector<int32_t> encode_in_pieces(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids;
  for (size_t start = 0; start < text.size();) {
    const size_t cut = text_cut(std::string_view(text).substr(start), kMaxParagraphBytes);
    const auto e = tok.encode(text.substr(start, cut));
    ids.insert(ids.end(), e.begin(), e.end());
    start += cut;
  }
  return ids;
}

class CorpusTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new rt::TempDir();
    rt::write_file(dir_->str("a.txt"), rt::synthetic_text(25, 5, 1));
    rt::write_file(dir_->str("b.txt"), rt::synthetic_text(15, 3, 2));
    for (const auto& [name, vocab] : {std::pair<std::string, int64_t>{"tok", 300}, {"tok-other", 280}}) {
      TokenizerTrainOptions o;
      o.inputs = {dir_->str("a.txt")};
      o.out_dir = dir_->str(name);
      o.vocab_size = vocab;
      train_tokenizer(o);
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static PrepareOptions options(const std::string& out, std::vector<std::string> inputs = {}) {
    PrepareOptions o;
    o.tokenizer_model = dir_->str("tok/tokenizer.model");
    o.inputs = inputs.empty() ? std::vector<std::string>{dir_->str("a.txt"), dir_->str("b.txt")} : inputs;
    o.out_dir = dir_->str(out);
    o.num_threads = 2;
    o.progress = false;
    o.force = true;  // the bad-input cases would replace the corpus in "existing" (--force), and fail
    return o;
  }
  static rt::TempDir* dir_;
};
rt::TempDir* CorpusTest::dir_ = nullptr;

}  // namespace

TEST_F(CorpusTest, ShardsReadBackEqualToDirectEncoding) {
  PrepareOptions o = options("prep");
  o.shard_tokens = 1500;  // several shards
  const PrepareStats stats = prepare_corpus(o);
  const Tokenizer tok = Tokenizer::load(o.tokenizer_model);
  auto expected = encode_directly(tok, dir_->str("a.txt"));
  for (auto& d : encode_directly(tok, dir_->str("b.txt"))) expected.push_back(d);
  ASSERT_EQ(expected.size(), 40u);

  const auto corpus = PreparedCorpus::open(o.out_dir, tok.fingerprint());
  EXPECT_EQ(stats.documents, 40);
  ASSERT_EQ(corpus->num_documents(), 40);
  EXPECT_EQ(corpus->vocab_size(), 300);
  EXPECT_EQ(corpus->fingerprint(), tok.fingerprint());
  int64_t total = 0;
  for (int64_t i = 0; i < corpus->num_documents(); ++i) {
    EXPECT_EQ(corpus->document(i), expected[i]) << "document " << i;
    EXPECT_EQ(corpus->document_offset(i), total);
    EXPECT_EQ(corpus->document_at(total), i);
    total += static_cast<int64_t>(expected[i].size());
  }
  EXPECT_EQ(corpus->num_tokens(), total);
  EXPECT_EQ(stats.tokens, total);
  EXPECT_TRUE(rt::fs::exists(o.out_dir + "/shard_00001.tok"));  // the shard limit split the output
  EXPECT_TRUE(is_prepared_dir(o.out_dir));
  EXPECT_FALSE(is_prepared_dir(dir_->str("tok")));
  // Word-start flags travel with the data (whole-word masking needs no tokenizer).
  for (int32_t id = 0; id < tok.vocab_size(); ++id) EXPECT_EQ(corpus->is_word_start(id), tok.is_word_start(id));
  // uint16 ids below 65536: header (64 bytes) + 2 bytes a token.
  int64_t shard_bytes = 0;
  for (const auto& e : rt::fs::directory_iterator(o.out_dir))
    if (e.path().extension() == ".tok") shard_bytes += static_cast<int64_t>(e.file_size()) - 64;
  EXPECT_EQ(shard_bytes, 2 * total);
}

TEST_F(CorpusTest, OutputDoesNotDependOnThreadCount) {
  PrepareOptions one = options("t1"), four = options("t4");
  one.num_threads = 1;
  four.num_threads = 4;
  prepare_corpus(one);
  prepare_corpus(four);
  EXPECT_EQ(snapshot(one.out_dir), snapshot(four.out_dir));
}

// Enough text for several 256 KiB work chunks and several shards, so encoder threads finish chunks
// out of order and the writer must restore the order: the bytes of every file must not change.
TEST_F(CorpusTest, ShardsAreByteIdenticalAcrossThreadCounts) {
  const std::string text = dir_->str("several_chunks.txt");
  rt::write_file(text, rt::synthetic_text(3000, 4, 7));
  ASSERT_GT(rt::fs::file_size(text), 3u * 256 * 1024) << "the text must span several work chunks";
  std::map<std::string, std::string> one_thread;
  for (const int64_t threads : {1, 2, 4}) {
    PrepareOptions o = options("threads_" + std::to_string(threads), {text});
    o.num_threads = threads;
    o.shard_tokens = 100000;
    prepare_corpus(o);
    const auto files = snapshot(o.out_dir);
    ASSERT_TRUE(files.count("shard_00002.tok")) << "the output must span several shards";
    if (threads == 1) {
      one_thread = files;
      continue;
    }
    ASSERT_EQ(files.size(), one_thread.size()) << threads << " threads";
    for (const auto& [name, bytes] : one_thread)
      EXPECT_TRUE(files.at(name) == bytes) << name << " differs between 1 and " << threads << " threads";
  }
}

TEST_F(CorpusTest, ReadsUint32Shards) {
  // Vocabularies of 65536 or more are stored as uint32; too large to train here, so a uint16
  // directory is rewritten in that layout (header dtype 4, widened ids, meta token_bytes 4).
  PrepareOptions o = options("u16");
  o.shard_tokens = 1500;
  prepare_corpus(o);
  const std::string wide = dir_->str("u32");
  rt::fs::create_directories(wide);
  for (const auto& e : rt::fs::directory_iterator(o.out_dir)) {
    const std::string name = e.path().filename().string();
    std::string bytes = rt::read_file(e.path().string());
    if (e.path().extension() == ".tok") {
      std::string out = bytes.substr(0, 64);
      const uint32_t four = 4;
      std::memcpy(&out[12], &four, 4);
      for (size_t k = 64; k + 1 < bytes.size(); k += 2) {
        uint16_t v;
        std::memcpy(&v, &bytes[k], 2);
        const uint32_t w = v;
        out.append(reinterpret_cast<const char*>(&w), 4);
      }
      bytes = out;
    } else if (name == "meta.json") {
      auto meta = nlohmann::json::parse(bytes);
      meta["token_bytes"] = 4;
      bytes = meta.dump();
    }
    rt::write_file(wide + "/" + name, bytes);
  }
  const auto narrow_corpus = PreparedCorpus::open(o.out_dir), wide_corpus = PreparedCorpus::open(wide);
  ASSERT_EQ(wide_corpus->num_documents(), narrow_corpus->num_documents());
  for (int64_t i = 0; i < narrow_corpus->num_documents(); ++i) EXPECT_EQ(wide_corpus->document(i), narrow_corpus->document(i));
  // A shard whose element size disagrees with meta.json is refused.
  rt::write_file(wide + "/shard_00001.tok", rt::read_file(o.out_dir + "/shard_00001.tok"));
  const std::string msg = error_of([&] { PreparedCorpus::open(wide); });
  EXPECT_NE(msg.find("shard_00001.tok has 2-byte elements, expected 4 (corrupt header)"), std::string::npos) << msg;
}

TEST_F(CorpusTest, JsonlInput) {
  rt::write_file(dir_->str("docs.jsonl"), "{\"text\": \"the jury said\\nthe city\", \"n\": 1}\n\n{\"text\": \"evidence\"}\n{\"text\": \"\"}\n");
  const PrepareStats s = prepare_corpus(options("jsonl", {dir_->str("docs.jsonl")}));
  const auto corpus = PreparedCorpus::open(dir_->str("jsonl"));
  const Tokenizer tok = Tokenizer::load(dir_->str("tok/tokenizer.model"));
  EXPECT_EQ(s.documents, 2);  // the empty text is skipped
  auto first = tok.encode("the jury said");
  const auto city = tok.encode("the city");
  first.insert(first.end(), city.begin(), city.end());
  EXPECT_EQ(corpus->document(0), first);
  EXPECT_EQ(corpus->document(1), tok.encode("evidence"));
}

// A document of 2.5 MB without a blank line and a paragraph of 150 KB: read in parts and pieces
// (memory does not grow with them), they prepare to the tokens of each line encoded alone (the long
// paragraph word by word), one document each, never split across shards, the same for any thread
// count.
TEST_F(CorpusTest, LongParagraphsAndDocumentsPrepareToTheTokensOfTheWhole) {
  std::string doc, paragraph;
  for (const char c : rt::synthetic_text(10000, 4, 5))  // without its blank lines: one document
    if (c != '\n' || doc.empty() || doc.back() != '\n') doc += c;
  ASSERT_GT(doc.size(), 2 * kMaxDocumentPartBytes);
  for (size_t i = 0; paragraph.size() < 150000; ++i)
    paragraph += (i ? " " : "") + rt::synthetic_words()[(i * 7919) % rt::synthetic_words().size()];
  const std::string path = dir_->str("long.txt");
  rt::write_file(path, rt::synthetic_text(2, 2, 3) + doc + "\n" + paragraph + "\n");
  const Tokenizer tok = Tokenizer::load(dir_->str("tok/tokenizer.model"));
  std::vector<int32_t> expected_doc, expected_paragraph = encode_by_word(tok, paragraph);
  for (size_t start = 0, end; (end = doc.find('\n', start)) != std::string::npos; start = end + 1) {
    const auto e = tok.encode(doc.substr(start, end - start));
    expected_doc.insert(expected_doc.end(), e.begin(), e.end());
  }
  EXPECT_EQ(encode_in_pieces(tok, paragraph), expected_paragraph);

  PrepareOptions one = options("long1", {path}), three = options("long3", {path});
  one.num_threads = 1;
  three.num_threads = 3;
  one.shard_tokens = three.shard_tokens = 5000;  // the long document starts near a shard's end
  prepare_corpus(one);
  prepare_corpus(three);
  EXPECT_EQ(snapshot(one.out_dir), snapshot(three.out_dir));
  const auto corpus = PreparedCorpus::open(one.out_dir, tok.fingerprint());
  ASSERT_EQ(corpus->num_documents(), 4);
  EXPECT_EQ(corpus->document(2), expected_doc);
  EXPECT_EQ(corpus->document(3), expected_paragraph);
}

// The pieces of a long paragraph encode to the tokens of its words with real text and both model
// types: Brown's test split joined into one paragraph of 270 KB. (Encoded at once, 10 of its 91045
// unigram tokens differ from that: SentencePiece's float32 Viterbi over 270 KB breaks ties by
// rounding; BPE, whose merges never cross a space, gives the same either way.)
TEST_F(CorpusTest, PiecesOfABrownParagraphEncodeToTheTokensOfTheWhole) {
  ROFORMER_REQUIRE_BROWN();
  std::string text = rt::read_file(rt::brown_dir() + "/test.txt");
  std::replace(text.begin(), text.end(), '\n', ' ');
  for (const std::string type : {"unigram", "bpe"}) {
    SCOPED_TRACE(type);
    TokenizerTrainOptions o;
    o.inputs = {rt::brown_dir() + "/valid.txt"};
    o.out_dir = dir_->str("brown-" + type);
    o.vocab_size = 2000;
    o.model_type = type;
    o.progress = false;
    const Tokenizer tok = Tokenizer::load(train_tokenizer(o));
    EXPECT_EQ(encode_in_pieces(tok, text), encode_by_word(tok, text));
  }
}

TEST_F(CorpusTest, BrownValidationSplit) {
  ROFORMER_REQUIRE_BROWN();
  const std::string valid = rt::brown_dir() + "/valid.txt";
  const PrepareStats s = prepare_corpus(options("brown", {valid}));
  EXPECT_EQ(s.documents, 23);  // as documented in the corpus README
  const auto corpus = PreparedCorpus::open(dir_->str("brown"));
  const Tokenizer tok = Tokenizer::load(dir_->str("tok/tokenizer.model"));
  const auto expected = encode_directly(tok, valid);
  ASSERT_EQ(expected.size(), 23u);
  EXPECT_EQ(corpus->document(0), expected[0]);
  EXPECT_EQ(corpus->document(22), expected[22]);
}

// ---- Bad input: the message, and the previously prepared directory unchanged --------------------

class CorpusBadInput : public CorpusTest {
 protected:
  void SetUp() override {
    out_ = dir_->str("existing");
    if (!is_prepared_dir(out_)) prepare_corpus(options("existing"));
    before_ = snapshot(out_);
  }
  void expect_untouched() {
    EXPECT_EQ(snapshot(out_), before_);
    EXPECT_NO_THROW(PreparedCorpus::open(out_));
  }
  std::string out_;
  std::map<std::string, std::string> before_;
};

TEST_F(CorpusBadInput, MissingInputFile) {
  const std::string msg = error_of([&] { prepare_corpus(options("existing", {dir_->str("a.txt"), dir_->str("missing.txt")})); });
  EXPECT_NE(msg.find("input file not found: " + dir_->str("missing.txt")), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(CorpusBadInput, EmptyCorpus) {
  rt::write_file(dir_->str("empty.txt"), "\n  \n\n");
  const std::string msg = error_of([&] { prepare_corpus(options("existing", {dir_->str("empty.txt")})); });
  EXPECT_NE(msg.find("the corpus is empty: no text in " + dir_->str("empty.txt")), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(CorpusBadInput, InvalidUtf8NamesFileAndLine) {
  // Enough good text first that encoding is under way when the bad line is read.
  rt::write_file(dir_->str("bad.txt"), rt::synthetic_text(400, 5, 9) + "good line\nbad \xFF byte\n");
  const int64_t bad_line = 400 * 6 + 2;
  const std::string msg = error_of([&] { prepare_corpus(options("existing", {dir_->str("bad.txt")})); });
  EXPECT_NE(msg.find(dir_->str("bad.txt") + ":" + std::to_string(bad_line) + ": invalid UTF-8 at byte 5"), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(CorpusBadInput, TokenizerFingerprintMismatch) {
  const Tokenizer other = Tokenizer::load(dir_->str("tok-other/tokenizer.model"));
  std::string msg = error_of([&] { PreparedCorpus::open(out_, other.fingerprint()); });
  EXPECT_NE(msg.find("was encoded with tokenizer " + PreparedCorpus::open(out_)->fingerprint()), std::string::npos) << msg;
  EXPECT_NE(msg.find("fingerprint " + other.fingerprint()), std::string::npos) << msg;
  expect_untouched();

  // A shard copied in from a directory prepared with another tokenizer.
  PrepareOptions o = options("other");
  o.tokenizer_model = dir_->str("tok-other/tokenizer.model");
  prepare_corpus(o);
  const std::string mixed = dir_->str("mixed");
  rt::fs::create_directories(mixed);
  for (const auto& e : rt::fs::directory_iterator(out_)) rt::fs::copy_file(e.path(), mixed + "/" + e.path().filename().string());
  rt::fs::copy_file(dir_->str("other/shard_00000.tok"), mixed + "/shard_00000.tok", rt::fs::copy_options::overwrite_existing);
  const auto mixed_before = snapshot(mixed);
  msg = error_of([&] { PreparedCorpus::open(mixed); });
  EXPECT_NE(msg.find("shard_00000.tok was encoded with tokenizer " + other.fingerprint()), std::string::npos) << msg;
  EXPECT_EQ(snapshot(mixed), mixed_before);
}

// A copy of the prepared directory to damage.
std::string copy_prepared(const std::string& from, const std::string& to) {
  rt::fs::create_directories(to);
  for (const auto& e : rt::fs::directory_iterator(from))
    rt::fs::copy_file(e.path(), to + "/" + e.path().filename().string(), rt::fs::copy_options::overwrite_existing);
  return to;
}

void poke(const std::string& path, size_t offset, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST_F(CorpusBadInput, TokenIdBeyondVocabularyIsFoundWhenOpened) {
  const std::string copy = copy_prepared(out_, dir_->str("bad_ids"));
  poke(copy + "/shard_00000.tok", 64 + 2 * 7, std::string("\xff\x7f", 2));  // token 7 := 32767 (vocabulary: 300)
  const std::string msg = error_of([&] { PreparedCorpus::open(copy); });
  EXPECT_NE(msg.find("shard " + copy + "/shard_00000.tok holds token id 32767 at token 7, beyond the vocabulary of 300 "
                     "ids"), std::string::npos) << msg;
  EXPECT_NE(msg.find("re-run `roformer prepare`"), std::string::npos) << msg;
}

TEST_F(CorpusBadInput, DamagedDocumentIndexIsFoundWhenOpened) {
  const std::string copy = copy_prepared(out_, dir_->str("bad_index"));
  poke(copy + "/documents.idx", 64 + 8 * 2, std::string(8, '\0'));  // document 1 would end before it starts
  const std::string msg = error_of([&] { PreparedCorpus::open(copy); });
  EXPECT_NE(msg.find("document index in " + copy + " is corrupt at document 1"), std::string::npos) << msg;
}

TEST_F(CorpusBadInput, ShardNameOutsideTheDirectoryIsRefused) {
  const std::string copy = copy_prepared(out_, dir_->str("bad_meta"));
  auto meta = nlohmann::json::parse(rt::read_file(copy + "/meta.json"));
  meta["shards"][0]["file"] = "../existing/shard_00000.tok";
  rt::write_file(copy + "/meta.json", meta.dump());
  const std::string msg = error_of([&] { PreparedCorpus::open(copy); });
  EXPECT_NE(msg.find("shard name '../existing/shard_00000.tok' is not a file name in " + copy), std::string::npos) << msg;
}

TEST_F(CorpusBadInput, FolderWithoutCorpusFilesOrAPreparedOneSaysWhatItIs) {
  rt::fs::create_directories(dir_->str("plain_folder"));
  rt::write_file(dir_->str("plain_folder/README.md"), "not corpus text\n");
  std::string msg = error_of([&] { prepare_corpus(options("existing", {dir_->str("plain_folder")})); });
  EXPECT_NE(msg.find("input folder " + dir_->str("plain_folder") + " holds no corpus files (names ending .txt, .text, "
                     ".jsonl, .json or .parquet, optionally followed by .gz or .zst); list the files themselves"),
            std::string::npos) << msg;
  msg = error_of([&] { prepare_corpus(options("existing", {out_})); });
  EXPECT_NE(msg.find("input " + out_ + " is a prepared corpus (the output of `roformer prepare`), not text to read"),
            std::string::npos) << msg;
  expect_untouched();
}

TEST_F(CorpusBadInput, TruncatedShard) {
  const std::string copy = dir_->str("truncated");
  rt::fs::create_directories(copy);
  for (const auto& e : rt::fs::directory_iterator(out_)) rt::fs::copy_file(e.path(), copy + "/" + e.path().filename().string(),
                                                                          rt::fs::copy_options::overwrite_existing);
  const auto size = rt::fs::file_size(copy + "/shard_00000.tok");
  rt::fs::resize_file(copy + "/shard_00000.tok", size - 10);
  const auto before = snapshot(copy);
  const std::string msg = error_of([&] { PreparedCorpus::open(copy); });
  EXPECT_NE(msg.find("shard_00000.tok is truncated or corrupt: " + std::to_string(size - 10) + " bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("re-run `roformer prepare`"), std::string::npos) << msg;
  EXPECT_EQ(snapshot(copy), before);
  // Missing meta.json (an interrupted prepare never wrote it): not a prepared directory.
  rt::fs::remove(copy + "/meta.json");
  EXPECT_FALSE(is_prepared_dir(copy));
  EXPECT_NE(error_of([&] { PreparedCorpus::open(copy); }).find("meta.json missing"), std::string::npos);
}

TEST_F(CorpusBadInput, FailedRunLeavesNoStagingOrTemporaryFiles) {
  rt::write_file(dir_->str("bad2.txt"), "ok\n\xC0\xAF\n");  // an overlong '/' is invalid UTF-8
  const std::string msg = error_of([&] { prepare_corpus(options("existing", {dir_->str("bad2.txt")})); });
  EXPECT_NE(msg.find("bad2.txt:2: invalid UTF-8"), std::string::npos) << msg;
  for (const auto& e : rt::fs::directory_iterator(out_)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find("staging"), std::string::npos) << name;
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
  }
  expect_untouched();
}

TEST_F(CorpusTest, StagingOfAKilledRunIsCleanedUp) {
  // A run killed mid-way leaves its staging folder (named after its process id) but no meta.json
  // change; the next run removes it.
  const std::string out = dir_->str("killed");
  rt::fs::create_directories(out + "/.prepare-staging-999999999");
  rt::write_file(out + "/.prepare-staging-999999999/shard_00000.tok.tmp", "partial");
  EXPECT_FALSE(is_prepared_dir(out));
  prepare_corpus(options("killed"));
  EXPECT_FALSE(rt::fs::exists(out + "/.prepare-staging-999999999"));
  EXPECT_TRUE(is_prepared_dir(out));
}

TEST(Utf8, Validation) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), -1);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE2\x96\x81 \xF0\x9F\x98\x80"), -1);
  EXPECT_EQ(find_invalid_utf8("ab\xC3"), 2);              // truncated sequence
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0);            // overlong
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1);       // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0);    // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("a\x80"), 1);               // stray continuation byte
}
