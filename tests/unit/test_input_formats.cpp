// Input formats, with files from the real writers (tests/python/write_input_formats.py: Python's
// gzip, zstandard and pyarrow, run at test time into a temporary folder): the same documents as
// plain text, JSONL, .gz, .zst, Parquet (snappy, zstd, gzip, uncompressed; string, large_string,
// dictionary, string_view; several row groups; nulls) and a folder of mixed files prepare to
// byte-identical shards and train the same tokenizer; damaged files of each kind are one clear
// error, and an existing prepared directory stays as it was.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>

#include "data/byte_stream.h"
#include "data/corpus.h"
#include "data/input_files.h"
#include "data/parquet_reader.h"
#include "data/text_reader.h"
#include "data/sentencepiece_tokenizer.h"
#include "data_test_text.h"
#include "test_util.h"

using namespace roformer::data;
namespace rt = roformer::test;
using rt::error_of;

namespace {

// Every file of a prepared directory but meta.json (which lists the inputs), with the counts of meta.json.
std::map<std::string, std::string> prepared_bytes(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : rt::fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "meta.json") {
      const auto meta = nlohmann::json::parse(rt::read_file(e.path().string()));
      files[name] = meta["num_documents"].dump() + " " + meta["num_tokens"].dump() + " " + meta["shards"].dump();
    } else {
      files[name] = rt::read_file(e.path().string());
    }
  }
  return files;
}

// Every file under dir, to prove a failed run changed nothing.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : rt::fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[rt::fs::relative(e.path(), dir).string()] = rt::read_file(e.path().string());
  return files;
}

bool is_parquet(const std::string& name) { return name.find(".parquet") != std::string::npos || name == "mixed"; }

class InputFormats : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new rt::TempDir();
    rt::write_file(dir_->str("docs.txt"), rt::synthetic_text(90, 3, 11));
    if (rt::python().empty()) return;
    const auto r = rt::run_command(rt::python() + " " + rt::source_dir() + "/tests/python/write_input_formats.py " +
                                   dir_->str("docs.txt") + " " + dir_->str("fx"));
    writer_output_ = new std::string(r.exit_code == 0 ? "" : r.output.empty() ? "failed" : r.output);
    TokenizerTrainOptions t;
    t.inputs = {dir_->str("docs.txt")};
    t.out_dir = dir_->str("tok");
    t.vocab_size = 300;
    t.progress = false;
    train_tokenizer(t);
    reference_ = new PrepareStats(prepare_corpus(options("reference", {dir_->str("docs.txt")})));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete writer_output_;
    delete reference_;
  }
  void SetUp() override {
    if (rt::python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
    ASSERT_EQ(*writer_output_, "") << "write_input_formats.py failed (pyarrow and zstandard come from scripts/setup.sh)";
  }
  static PrepareOptions options(const std::string& out, const std::vector<std::string>& inputs) {
    PrepareOptions o;
    o.tokenizer_model = dir_->str("tok/tokenizer.model");
    o.inputs = inputs;
    o.out_dir = dir_->str(out);
    o.num_threads = 2;
    o.progress = false;
    o.shard_tokens = 3000;  // several shards
    o.force = true;         // the damaged-file cases would replace the corpus in "existing" (--force), and fail
    return o;
  }
  static std::string fx(const std::string& name) { return dir_->str("fx/" + name); }
  static rt::TempDir* dir_;
  static std::string* writer_output_;
  static PrepareStats* reference_;  // of docs.txt
};
rt::TempDir* InputFormats::dir_ = nullptr;
std::string* InputFormats::writer_output_ = nullptr;
PrepareStats* InputFormats::reference_ = nullptr;

// What a Parquet file is refused with where the Parquet plugin is not built or cannot load.
const char* const kWithoutArrow = " is a Parquet file, but ";

}  // namespace

TEST_F(InputFormats, EveryFormatPreparesToTheSameShards) {
  const auto reference = prepared_bytes(dir_->str("reference"));
  ASSERT_TRUE(reference.count("shard_00001.tok")) << "the reference must span several shards";
  const std::vector<std::string> inputs = {
      "docs.jsonl", "docs.jsonl.gz", "docs.jsonl.zst", "docs.txt.gz", "docs.txt.zst", "gzip_named.txt",
      "snappy_string.parquet", "zstd_large_string.parquet", "gzip_dictionary.parquet", "none_string_view.parquet",
      "mixed", "m*/[a-c]_*"};
  for (const auto& name : inputs) {
    const std::string out = "as_" + std::to_string(&name - inputs.data());
    if (is_parquet(name) && !parquet_supported()) {
      const std::string msg = error_of([&] { prepare_corpus(options(out, {fx(name)})); });
      EXPECT_NE(msg.find(kWithoutArrow), std::string::npos) << msg;
      continue;
    }
    const PrepareStats stats = prepare_corpus(options(out, {fx(name)}));
    EXPECT_EQ(stats.documents, 90) << name;
    EXPECT_EQ(stats.text_bytes, reference_->text_bytes) << name;  // the same paragraphs
    int64_t stored = 0;  // the files as stored, whatever their format
    for (const auto& f : expand_inputs({fx(name)})) stored += static_cast<int64_t>(rt::fs::file_size(f));
    EXPECT_EQ(stats.bytes, stored) << name;
    EXPECT_TRUE(prepared_bytes(dir_->str(out)) == reference) << name << " prepares to other bytes than docs.txt";
  }
  // The folder's expansion: its corpus files in path order, README.md and .hidden.txt left out.
  if (!parquet_supported()) return;  // the folder holds a Parquet file
  const auto meta = nlohmann::json::parse(rt::read_file(dir_->str("as_10/meta.json")));
  EXPECT_EQ(meta["inputs"], nlohmann::json({fx("mixed/a_first.txt.gz"), fx("mixed/b_second.jsonl"),
                                             fx("mixed/c_third.parquet")}));
}

TEST_F(InputFormats, TextFieldChoosesTheColumn) {
  if (!parquet_supported()) GTEST_SKIP() << "built without Parquet support";
  PrepareOptions o = options("body", {fx("body_column.parquet")});
  o.text_field = "body";
  prepare_corpus(o);
  EXPECT_TRUE(prepared_bytes(o.out_dir) == prepared_bytes(dir_->str("reference")));
}

// SentencePiece sees the same paragraphs in the same order from every format, so the model's bytes agree.
TEST_F(InputFormats, TokenizerTrainsTheSameFromEveryFormat) {
  const std::string reference = rt::read_file(dir_->str("tok/tokenizer.model"));
  for (const std::string name : {"docs.jsonl.zst", "docs.txt.gz", "zstd_large_string.parquet", "mixed"}) {
    TokenizerTrainOptions t;
    t.inputs = {fx(name)};
    t.out_dir = dir_->str("tok_" + name);
    t.vocab_size = 300;
    t.progress = false;
    if (is_parquet(name) && !parquet_supported()) {
      EXPECT_NE(error_of([&] { train_tokenizer(t); }).find(kWithoutArrow), std::string::npos);
      continue;
    }
    EXPECT_TRUE(rt::read_file(train_tokenizer(t)) == reference) << name;
  }
}

TEST_F(InputFormats, DamagedFilesAreClearErrorsAndWriteNothing) {
  const std::string existing = dir_->str("existing");
  prepare_corpus(options("existing", {dir_->str("docs.txt")}));
  const auto before = snapshot(existing);
  // (file, text field, what the message says after the file's path)
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"truncated.jsonl.gz", "text", ": the gzip stream ends early, at byte"},
      {"corrupt.jsonl.gz", "text", ": corrupt gzip data after byte"},
      {"truncated.jsonl.zst", "text", ": the zstd stream ends early, at byte"},
      {"corrupt.jsonl.zst", "text", ": corrupt zstd data after byte"},
      {"not_gzip.txt.gz", "text", " is named .gz but does not start like one (no gzip magic 1f 8b)"},
      {"not_parquet.parquet", "text", " is named .parquet but does not start like one (no PAR1 magic)"},
      {"truncated.parquet", "text", " starts like a Parquet file but does not end like one (no PAR1 footer): the file "
                                    "is truncated"},
      {"corrupt.parquet", "text", ": cannot read column \"text\" in row group 1 (rows 7 to 13 of 90)"},
      {"bad_utf8.parquet", "text", ": row 1 (counting from 0), column \"text\": invalid UTF-8 at byte 3 of the text"},
      {"snappy_string.parquet", "body", " has no column \"body\"; its columns: id (int64), text (string). Choose"},
      {"snappy_string.parquet", "id", ": column \"id\" holds int64, not text; choose the text column with --text-field"},
  };
  for (const auto& [name, field, says] : cases) {
    // After a good file, so that encoding is under way when the damage is found.
    PrepareOptions o = options("existing", {dir_->str("docs.txt"), fx(name)});
    o.text_field = field;
    const std::string msg = error_of([&] { prepare_corpus(o); });
    const bool without_arrow = name.find(".parquet") != std::string::npos && name != "not_parquet.parquet" &&
                               name != "truncated.parquet" && !parquet_supported();
    EXPECT_NE(msg.find(fx(name) + (without_arrow ? kWithoutArrow : says)),
              std::string::npos) << name << ": " << msg;
    EXPECT_TRUE(snapshot(existing) == before) << name << " changed the existing prepared directory";
  }
  EXPECT_NE(error_of([&] { prepare_corpus(options("existing", {fx("corrupt.jsonl.gz")})); }).find("incorrect data check"),
            std::string::npos);
  EXPECT_NE(error_of([&] { prepare_corpus(options("existing", {fx("corrupt.jsonl.zst")})); }).find("checksum"),
            std::string::npos);
  for (const auto& e : rt::fs::directory_iterator(existing))
    EXPECT_EQ(e.path().filename().string().find("staging"), std::string::npos) << e.path();
}

// Where the build made the Parquet plugin (CMake found Arrow), it loads: otherwise every Parquet
// test above would quietly take its without-Arrow branch.
TEST(ParquetPlugin, LoadsWhereTheBuildMadeIt) {
  const bool built = rt::fs::exists(rt::fs::path(rt::roformer_bin()).parent_path() / "libroformer_parquet.so");
  EXPECT_EQ(parquet_supported(), built);
}

// Lines are found across the 1 MiB read buffer; a last line without '\n' is still read.
TEST(LineReader, LongLinesAndAFinalLineWithoutNewline) {
  rt::TempDir dir;
  const std::string long_line(3 * 1024 * 1024 + 17, 'x');
  rt::write_file(dir.str("a.txt"), "short\n" + long_line + "\n\nlast");
  LineReader lines(dir.str("a.txt"));
  std::string line;
  std::vector<std::string> got;
  while (lines.next(line)) got.push_back(line);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], "short");
  EXPECT_TRUE(got[1] == long_line);
  EXPECT_EQ(got[2], "");
  EXPECT_EQ(got[3], "last");
  EXPECT_EQ(lines.stream().compression(), Compression::kNone);
  EXPECT_EQ(lines.stream().content_bytes(), static_cast<int64_t>(rt::fs::file_size(dir.str("a.txt"))));
}

// A line longer than a piece comes in pieces of at most max bytes, each cut before a space (the
// next piece starts with it), or at a character boundary where a stretch has no space.
TEST(LineReader, PiecesOfALongLineAreCutBeforeASpaceOrBetweenCharacters) {
  rt::TempDir dir;
  std::string words;
  for (int i = 0; words.size() < 5000; ++i) words += (i ? " word" : "word") + std::to_string(i % 97);
  std::string no_space;
  while (no_space.size() < 3000) no_space += "\xC3\xA9\xE2\x96\x81";  // e-acute and "▁": 2- and 3-byte characters
  rt::write_file(dir.str("a.txt"), "short\n" + words + "\n" + no_space + "\n");
  LineReader lines(dir.str("a.txt"));
  std::string piece;
  bool ends = false;
  ASSERT_TRUE(lines.next_piece(piece, 1000, ends));
  EXPECT_EQ(piece, "short");
  EXPECT_TRUE(ends);
  for (const std::string* line : {&words, &no_space}) {
    std::string joined;
    int pieces = 0;
    do {
      ASSERT_TRUE(lines.next_piece(piece, 1000, ends));
      EXPECT_LE(piece.size(), 1000u);
      EXPECT_EQ(find_invalid_utf8(piece), -1) << "a character was cut";
      if (line == &words && !ends) {
        EXPECT_EQ(words[joined.size() + piece.size()], ' ');
      }
      joined += piece;
      ++pieces;
    } while (!ends);
    EXPECT_EQ(joined, *line);
    EXPECT_GE(pieces, static_cast<int>(line->size() / 1000));
  }
  EXPECT_FALSE(lines.next_piece(piece, 1000, ends));
}

// A plain-text document longer than kMaxDocumentPartBytes comes in parts; a bad byte far into a long
// line is named by its place in the line, not in its piece.
TEST(DocumentReader, LongDocumentsComeInPartsAndErrorsNameTheLineByte) {
  rt::TempDir dir;
  std::string doc;
  while (doc.size() < 3 * kMaxDocumentPartBytes) doc += "the jury said the city was quiet\n";
  rt::write_file(dir.str("a.txt"), doc + "\nnext document\n");
  DocumentReader reader(dir.str("a.txt"));
  std::vector<std::string> paragraphs;
  std::string joined;
  int parts = 0;
  do {
    ASSERT_TRUE(reader.next(paragraphs));
    ++parts;
    for (const auto& p : paragraphs) joined += p + "\n";
  } while (reader.document_continues());
  EXPECT_EQ(joined, doc);
  EXPECT_GE(parts, 3);
  ASSERT_TRUE(reader.next(paragraphs));
  EXPECT_EQ(paragraphs, std::vector<std::string>{"next document"});
  EXPECT_FALSE(reader.document_continues());
  EXPECT_FALSE(reader.next(paragraphs));

  std::string line(200000, 'a');
  line[150000] = ' ';
  line[180000] = '\xff';
  rt::write_file(dir.str("b.txt"), "first\n" + line + "\n");
  DocumentReader bad(dir.str("b.txt"));
  const std::string msg = rt::error_of([&] { while (bad.next(paragraphs)) {} });
  EXPECT_NE(msg.find("b.txt:2: invalid UTF-8 at byte 180001 of the line"), std::string::npos) << msg;
}

TEST(ByteStream, CompressionIsFoundByMagicBytes) {
  EXPECT_EQ(compression_of(std::string("\x1f\x8b\x08\x00", 4)), Compression::kGzip);
  EXPECT_EQ(compression_of(std::string("\x28\xb5\x2f\xfd", 4)), Compression::kZstd);
  EXPECT_EQ(compression_of("PAR1"), Compression::kNone);
  EXPECT_EQ(compression_of(std::string("\x1f", 1)), Compression::kNone);
  EXPECT_EQ(compression_of(""), Compression::kNone);
}
