// The data commands end to end through the `roformer` executable: tokenizer train, prepare, bench
// data, and a user error (exit code 1, one readable message, nothing written).
#include <gtest/gtest.h>

#include "data/corpus.h"
#include "data/tokenizer.h"
#include "test_util.h"
#include "unit/data_test_text.h"

namespace rt = roformer::test;
using namespace roformer::data;

TEST(DataCli, TokenizerTrainPrepareBench) {
  rt::TempDir dir;
  rt::write_file(dir.str("a.txt"), rt::synthetic_text(40, 5, 3));
  auto r = rt::run_roformer("tokenizer train --input " + dir.str("a.txt") + " --vocab-size 300 --model-type bpe --out " + dir.str("tok"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Tokenizer tok = Tokenizer::load(dir.str("tok/tokenizer.model"));
  EXPECT_EQ(tok.vocab_size(), 300);

  r = rt::run_roformer("prepare --tokenizer " + dir.str("tok/tokenizer.model") + " --input " + dir.str("a.txt") + " --out " +
                       dir.str("prep") + " --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prepare: 40 documents"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("100.0%"), std::string::npos) << "a progress line (not a TTY: log lines)\n" << r.output;
  EXPECT_EQ(PreparedCorpus::open(dir.str("prep"), tok.fingerprint())->num_documents(), 40);

  r = rt::run_roformer("bench data --input " + dir.str("a.txt") + " --tokenizer " + dir.str("tok/tokenizer.model") +
                       " --seq-len 64 --batch-size 4 --threads-list 1,2 --seconds 0.2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| prepare | 1 thread(s) |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| prepare | 2 thread(s) |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("num_workers=0 (synchronous, one core), B=4 T=64"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("num_workers=2, B=4 T=64"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("whole-word masking, B=4 T=64"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("packing=document, B=4 T=64"), std::string::npos) << r.output;
  // Not silent while it measures: a line before each measurement.
  EXPECT_NE(r.output.find("bench data: 1 of 6: prepare with 1 thread(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bench data: 6 of 6: loader with 0 worker(s), document for 0.2s"), std::string::npos)
      << r.output;
}

TEST(DataCli, UserErrorsExitOneWithAMessage) {
  rt::TempDir dir;
  // Usage errors the argument parser finds (unknown option, missing required option, a value out of
  // range) exit 1 like every user error, not with CLI11's own codes (105, 106, ...).
  for (const std::string args : {"train --no-such-flag", "prepare --input a.txt", "eval --top-k x"}) {
    auto usage = rt::run_roformer(args);
    EXPECT_EQ(usage.exit_code, 1) << args << "\n" << usage.output;
  }
  EXPECT_EQ(rt::run_roformer("--help").exit_code, 0);
  auto r = rt::run_roformer("tokenizer train --input " + dir.str("missing.txt") + " --vocab-size 300 --out " + dir.str("tok"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[error] input file not found: " + dir.str("missing.txt")), std::string::npos) << r.output;
  EXPECT_FALSE(rt::fs::exists(dir.str("tok")));
  r = rt::run_roformer("prepare --tokenizer " + dir.str("none.model") + " --input " + dir.str("missing.txt") + " --out " + dir.str("prep"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("input file not found"), std::string::npos) << r.output;
  EXPECT_FALSE(rt::fs::exists(dir.str("prep")));
  // A directory where a file is expected.
  rt::fs::create_directories(dir.str("folder"));
  r = rt::run_roformer("tokenizer train --input " + dir.str("folder") + " --vocab-size 300 --out " + dir.str("tok"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("input folder " + dir.str("folder") + " holds no corpus files"), std::string::npos) << r.output;
  rt::write_file(dir.str("a.txt"), "some text\n");
  r = rt::run_roformer("prepare --tokenizer " + dir.str("folder") + " --input " + dir.str("a.txt") + " --out " +
                       dir.str("prep"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("tokenizer model " + dir.str("folder") + " is a directory; give the .model file itself"),
            std::string::npos) << r.output;
  r = rt::run_roformer("prepare --tokenizer " + dir.str("a.txt") + " --input " + dir.str("a.txt") + " --out " +
                       dir.str("prep"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot load tokenizer " + dir.str("a.txt") + ": the file is not a SentencePiece model"),
            std::string::npos) << r.output;
  r = rt::run_roformer("tokenizer train --input " + dir.str("a.txt") + " --vocab-size 300 --character-coverage 0.5 "
                       "--out " + dir.str("tok"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--character-coverage = 0.5 is outside what SentencePiece accepts, [0.98, 1]"),
            std::string::npos) << r.output;
  r = rt::run_roformer("bench data --input " + dir.str("missing.txt"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("benchmark input not found"), std::string::npos) << r.output;
}

// Folders and quoted patterns as inputs, the text field by name, and progress over many files.
TEST(DataCli, FoldersPatternsTextFieldAndProgress) {
  rt::TempDir dir;
  rt::write_file(dir.str("corpus/a.txt"), rt::synthetic_text(20, 3, 3));
  rt::write_file(dir.str("corpus/part/b.jsonl"), "{\"body\": \"the jury said\\nthe city\"}\n{\"body\": \"evidence\"}\n");
  rt::write_file(dir.str("corpus/README.md"), "# not corpus text\n");
  auto r = rt::run_roformer("tokenizer train --input " + dir.str("corpus") + " --vocab-size 200 --text-field body --out " +
                            dir.str("tok"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenizer: reading: 100.0% 2/2 files"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SentencePiece is training the model now"), std::string::npos) << r.output;  // not silent
  r = rt::run_roformer("prepare --tokenizer " + dir.str("tok/tokenizer.model") + " --input " + dir.str("corpus") +
                       " --text-field body --out " + dir.str("prep"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prepare: 100.0% 2/2 files"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prepare: 22 documents"), std::string::npos) << r.output;
  // One document of more than a work item (256 KiB): the last item ends with the file, and the final
  // line counts the file done (it said 0/1).
  std::string big;
  while (big.size() < 300 * 1024) big += "the jury said the city\n";
  rt::write_file(dir.str("big/big.txt"), big);
  r = rt::run_roformer("prepare --tokenizer " + dir.str("tok/tokenizer.model") + " --input " + dir.str("big/big.txt") +
                       " --out " + dir.str("prep_big"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prepare: 100.0% 1/1 files"), std::string::npos) << r.output;
  // The old flag name still works; a quoted pattern is expanded by roformer, sorted.
  r = rt::run_roformer("prepare --tokenizer " + dir.str("tok/tokenizer.model") + " --input '" + dir.str("corpus") +
                       "/*/*.jsonl' --jsonl-field body --out " + dir.str("prep2") + " --no-progress");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("prepare: 100.0%"), std::string::npos) << r.output;
  EXPECT_EQ(PreparedCorpus::open(dir.str("prep2"))->num_documents(), 2);
  r = rt::run_roformer("prepare --tokenizer " + dir.str("tok/tokenizer.model") + " --input '" + dir.str("corpus") +
                       "/*.parquet' --out " + dir.str("prep3"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("input pattern " + dir.str("corpus") + "/*.parquet matches no file"), std::string::npos)
      << r.output;
  EXPECT_FALSE(rt::fs::exists(dir.str("prep3")));
}
