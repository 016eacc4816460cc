// The data commands end to end through the `roformer` executable: tokenizer train, prepare, bench
// data, and a user error (exit code 1, one readable message, nothing written).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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
  EXPECT_NE(r.output.find("tokenizer " + dir.str("folder") + " is a directory without a tokenizer.json or "
                          "tokenizer.model; give the file itself or the directory that holds one"),
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

namespace {

struct MeasuredRun {
  int exit_code = -1;
  std::string output;
  long peak_rss_mb = 0;  // of the process and what it waited for (wait4's ru_maxrss)
};

// Runs a shell command line (its last command exec'd, so the shell adds nothing) and measures its
// peak resident memory.
MeasuredRun run_measured(const std::string& command, const std::string& output_file) {
  MeasuredRun r;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (pid > 0 && ::wait4(pid, &status, 0, &usage) == pid) {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.peak_rss_mb = usage.ru_maxrss / 1024;
  }
  r.output = rt::read_file(output_file);
  return r;
}

}  // namespace

// Memory does not grow with what one line holds (issue 40): SentencePiece needs ~130 bytes a byte of
// what it encodes at once, so an 8 MB line took 1.1 GB more than a 1 MB one; read and encoded in
// pieces, preparing it peaks where a 1 MB line does. A JSONL line beyond 64 MiB (it is read whole) is
// refused, naming the file and line, without holding more than that. Each input is gzipped.
TEST(DataCli, PeakMemoryDoesNotGrowWithTheLengthOfALine) {
  rt::TempDir dir;
  rt::write_file(dir.str("a.txt"), rt::synthetic_text(40, 5, 3));
  ASSERT_EQ(rt::run_roformer("tokenizer train --input " + dir.str("a.txt") + " --vocab-size 300 --no-progress --out " +
                             dir.str("tok")).exit_code, 0);
  const std::string sentence = "the jury said the county election was quiet ";
  auto write_line = [&](const std::string& name, const std::string& head, size_t bytes, const std::string& tail) {
    const auto r = rt::run_command("{ printf '%s' '" + head + "'; yes '" + sentence + "' | tr -d '\\n' | head -c " +
                                   std::to_string(bytes) + "; printf '" + tail + "\\n'; } | gzip -1 > " + dir.str(name));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  };
  write_line("short.txt.gz", "", 1000000, "");
  write_line("long.txt.gz", "", 8000000, "");
  const std::string prepare = "exec " + rt::roformer_bin() + " prepare --no-progress --threads 2 --tokenizer " +
                              dir.str("tok/tokenizer.model") + " --out ";
  const auto shorter = run_measured(prepare + dir.str("p-short") + " --input " + dir.str("short.txt.gz"), dir.str("log"));
  ASSERT_EQ(shorter.exit_code, 0) << shorter.output;
  const auto longer = run_measured(prepare + dir.str("p-long") + " --input " + dir.str("long.txt.gz"), dir.str("log"));
  ASSERT_EQ(longer.exit_code, 0) << longer.output;
  EXPECT_NE(longer.output.find("prepare: 1 documents"), std::string::npos) << longer.output;
  EXPECT_LT(longer.peak_rss_mb, shorter.peak_rss_mb + 40)
      << "peak " << longer.peak_rss_mb << " MB for an 8 MB line, " << shorter.peak_rss_mb << " MB for a 1 MB one";

  write_line("big.jsonl.gz", "{\"text\": \"", 70000000, "\"}");
  const auto refused = run_measured(prepare + dir.str("p-big") + " --input " + dir.str("big.jsonl.gz"), dir.str("log"));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("big.jsonl.gz:1: the line is longer than 64 MiB"), std::string::npos) << refused.output;
  EXPECT_LT(refused.peak_rss_mb, shorter.peak_rss_mb + 3 * 64 + 40) << refused.output;
  EXPECT_FALSE(rt::fs::exists(dir.str("p-big")));
}

namespace {

// A tokenizer of 300 pieces and its command line prefix for `prepare`, in `dir`.
std::string prepare_in(const rt::TempDir& dir) {
  if (!rt::fs::exists(dir.str("tok/tokenizer.model"))) {
    rt::write_file(dir.str("tok.txt"), rt::synthetic_text(40, 5, 3));
    EXPECT_EQ(rt::run_roformer("tokenizer train --input " + dir.str("tok.txt") + " --vocab-size 300 --no-progress --out " +
                               dir.str("tok")).exit_code, 0);
  }
  return "prepare --no-progress --tokenizer " + dir.str("tok/tokenizer.model") + " --out ";
}

void expect_refused(const rt::CommandResult& r, const std::string& says) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

}  // namespace

// `prepare --force` replaces the old corpus's own files (meta.json, the index, the word starts and
// the shards its meta.json lists), and nothing else kept in the folder.
TEST(DataCli, PrepareForceRemovesOnlyTheOldCorpusFiles) {
  rt::TempDir dir;
  const std::string prepare = prepare_in(dir);
  rt::write_file(dir.str("a.txt"), rt::synthetic_text(30, 4, 8));
  ASSERT_EQ(rt::run_roformer(prepare + dir.str("corpus") + " --input " + dir.str("a.txt")).exit_code, 0);
  rt::write_file(dir.str("corpus/shard_notes.txt"), "my notes\n");
  rt::write_file(dir.str("corpus/shard_00007.tok.orig"), "a backup of mine\n");
  const auto r = rt::run_roformer(prepare + dir.str("corpus") + " --force --input " + dir.str("a.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(rt::read_file(dir.str("corpus/shard_notes.txt")), "my notes\n");
  EXPECT_EQ(rt::read_file(dir.str("corpus/shard_00007.tok.orig")), "a backup of mine\n");
  EXPECT_EQ(PreparedCorpus::open(dir.str("corpus"))->num_documents(), 30);
}

// A prepared corpus whose meta.json is gone (a replacement killed outright between removing the old
// meta.json and renaming the new one) is still ours: refused without --force, naming that, and
// replaced with it, its stale shards included (issue 55: --force refused it as a folder of the user's).
TEST(DataCli, PrepareForceReplacesACorpusMissingItsMetaJson) {
  rt::TempDir dir;
  const std::string prepare = prepare_in(dir);
  rt::write_file(dir.str("big.txt"), rt::synthetic_text(400, 6, 8));
  rt::write_file(dir.str("a.txt"), rt::synthetic_text(30, 4, 8));
  ASSERT_EQ(rt::run_roformer(prepare + dir.str("corpus") + " --input " + dir.str("big.txt")).exit_code, 0);
  rt::write_file(dir.str("corpus/shard_00007.tok"), rt::read_file(dir.str("corpus/shard_00000.tok")));  // a stale shard
  rt::fs::remove(dir.str("corpus/meta.json"));
  expect_refused(rt::run_roformer(prepare + dir.str("corpus") + " --input " + dir.str("a.txt")),
                 "holds a prepared corpus without its meta.json (an interrupted prepare?), which cannot be read; pass "
                 "--force to replace it");
  const auto r = rt::run_roformer(prepare + dir.str("corpus") + " --force --input " + dir.str("a.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(PreparedCorpus::open(dir.str("corpus"))->num_documents(), 30);
  EXPECT_FALSE(rt::fs::exists(dir.str("corpus/shard_00007.tok"))) << "the stale shard went with the old corpus";
  // A user's file beside the corpus files: not all ours, so refused even with --force.
  rt::fs::remove(dir.str("corpus/meta.json"));
  rt::write_file(dir.str("corpus/notes.txt"), "mine\n");
  expect_refused(rt::run_roformer(prepare + dir.str("corpus") + " --force --input " + dir.str("a.txt")),
                 "is not empty and holds no prepared corpus");
}

// One 20 MB paragraph of one repeated word (a one-row Parquet file of it, or one line of text): read
// in 64 KiB pieces, it kept SentencePiece busy for over 15 minutes (issue 55; a regression of issue
// 40, when such a line was skipped whole). Now refused at once, as before, for the pieces it can learn.
TEST(DataCli, ALongRepeatedParagraphTrainsTheTokenizerInBoundedTime) {
  rt::TempDir dir;
  std::string line;
  for (int i = 0; i < 4000000; ++i) line += "word ";
  rt::write_file(dir.str("rep.txt"), line + "\n");
  std::vector<std::string> inputs = {dir.str("rep.txt")};
  if (!rt::python().empty() &&
      rt::run_command(rt::python() + " -c 'import pyarrow as pa, pyarrow.parquet as pq; pq.write_table(pa.table("
                      "{\"text\": [\"word \" * 4000000]}), \"" + dir.str("rep.parquet") + "\")'").exit_code == 0)
    inputs.push_back(dir.str("rep.parquet"));
  for (const auto& input : inputs) {
    SCOPED_TRACE(input);
    const auto r = rt::run_command("timeout 300 " + rt::roformer_bin() + " tokenizer train --no-progress --input " +
                                   input + " --vocab-size 4000 --out " + dir.str("tok"));
    expect_refused(r, "--vocab-size = 4000 is more pieces than this text supports");
  }
}

// The top of the int range, where SentencePiece's own arithmetic wraps and it trains without end, is
// refused at once like every size beyond the bound (issue 55: 2147483647 ran with no output and no end).
TEST(DataCli, AVocabularyBeyondTheBoundIsRefusedAtOnce) {
  rt::TempDir dir;
  rt::write_file(dir.str("a.txt"), rt::synthetic_text(10, 5, 3));
  for (const std::string size : {"2147483647", "2000000000", "1000001"}) {
    SCOPED_TRACE(size);
    const auto r = rt::run_command("timeout 120 " + rt::roformer_bin() + " tokenizer train --no-progress --input " +
                                   dir.str("a.txt") + " --vocab-size " + size + " --out " + dir.str("tok"));
    expect_refused(r, "--vocab-size = " + size + " is beyond the 1000000 pieces a tokenizer can have here");
    EXPECT_FALSE(rt::fs::exists(dir.str("tok")));
  }
}

// Valid input the reader does not take is named for what it is, with advice that fits: a zstd frame
// with a window beyond the bound (zstd --long=31), a compressed Parquet file; and valid input it
// takes: a gzip file padded with zero bytes (gzip ignores them), a text starting with "PAR1".
TEST(DataCli, CompressedAndLookalikeInputsAreReadOrNamedForWhatTheyAre) {
  rt::TempDir dir;
  const std::string prepare = prepare_in(dir);
  // A zstd frame declaring a 2 GiB window (Window_Descriptor exponent 21: 2^(10+21)) holding one raw
  // block of "hello\n".
  rt::write_file(dir.str("long.txt.zst"), std::string("\x28\xb5\x2f\xfd\x00\xa8", 6) +
                                              std::string("\x31\x00\x00", 3) + "hello\n");
  expect_refused(rt::run_roformer(prepare + dir.str("p1") + " --input " + dir.str("long.txt.zst")),
                 "needs a window larger than 128 MiB (it was compressed with zstd --long=28 or more)");
  EXPECT_FALSE(rt::fs::exists(dir.str("p1")));

  rt::write_file(dir.str("a.txt"), rt::synthetic_text(20, 3, 9));
  ASSERT_EQ(rt::run_command("gzip -k -c " + dir.str("a.txt") + " > " + dir.str("a.txt.gz") + " && head -c 4096 /dev/zero >> " +
                            dir.str("a.txt.gz")).exit_code, 0);
  ASSERT_EQ(rt::run_command("gzip -t " + dir.str("a.txt.gz") + " 2>/dev/null; gzip -dc " + dir.str("a.txt.gz") +
                            " | cmp - " + dir.str("a.txt")).exit_code, 0) << "gzip reads the padded file";
  ASSERT_EQ(rt::run_roformer(prepare + dir.str("plain") + " --input " + dir.str("a.txt")).exit_code, 0);
  const auto padded = rt::run_roformer(prepare + dir.str("padded") + " --input " + dir.str("a.txt.gz"));
  ASSERT_EQ(padded.exit_code, 0) << padded.output;
  EXPECT_EQ(rt::read_file(dir.str("padded/shard_00000.tok")), rt::read_file(dir.str("plain/shard_00000.tok")));

  rt::write_file(dir.str("x.parquet"), "PAR1 and then some text that is not parquet at all, ending PAR1");
  ASSERT_EQ(rt::run_command("gzip -k " + dir.str("x.parquet")).exit_code, 0);
  expect_refused(rt::run_roformer(prepare + dir.str("p2") + " --input " + dir.str("x.parquet.gz")),
                 "is a gzip-compressed Parquet file; Parquet compresses its pages itself and is read uncompressed: "
                 "decompress it first (gunzip -k");

  rt::write_file(dir.str("report.txt"), "PAR1 of the report: the jury said the city was quiet.\n");
  const auto text = rt::run_roformer(prepare + dir.str("p3") + " --input " + dir.str("report.txt"));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("prepare: 1 documents"), std::string::npos) << text.output;
}

// Each file is read once: one reached twice (listed twice, or by name and through its folder) is
// refused naming both ways; a link in a loop says so; roformer's own outputs inside an input folder
// (a prepared corpus, a tokenizer, a run directory) are skipped, not read as JSONL.
TEST(DataCli, EachInputIsReadOnceAndOutputsInsideAnInputFolderAreSkipped) {
  rt::TempDir dir;
  const std::string prepare = prepare_in(dir);
  rt::write_file(dir.str("corpus/a.txt"), rt::synthetic_text(10, 3, 1));
  rt::write_file(dir.str("corpus/b.txt"), rt::synthetic_text(10, 3, 2));
  expect_refused(rt::run_roformer(prepare + dir.str("p") + " --input " + dir.str("corpus") + " " + dir.str("corpus/b.txt")),
                 "input " + dir.str("corpus/b.txt") + " would be read twice (from " + dir.str("corpus") +
                     ", and listed itself as " + dir.str("corpus/b.txt") + ")");
  expect_refused(rt::run_roformer(prepare + dir.str("p") + " --input " + dir.str("corpus/a.txt") + " " +
                                  dir.str("corpus/a.txt")),
                 "would be read twice (listed itself, and listed itself");
  rt::fs::create_symlink(dir.str("loop.txt"), dir.str("loop.txt"));
  expect_refused(rt::run_roformer(prepare + dir.str("p") + " --input " + dir.str("loop.txt")),
                 "cannot read input " + dir.str("loop.txt") + ": Too many levels of symbolic links");
  EXPECT_FALSE(rt::fs::exists(dir.str("p")));

  // Outputs of roformer in the folder: a prepared corpus (meta.json), a tokenizer (training.json).
  ASSERT_EQ(rt::run_roformer(prepare + dir.str("corpus/prepared") + " --input " + dir.str("corpus/a.txt")).exit_code, 0);
  ASSERT_EQ(rt::run_roformer("tokenizer train --input " + dir.str("corpus/a.txt") + " --vocab-size 200 --no-progress "
                             "--out " + dir.str("corpus/tok")).exit_code, 0);
  const auto r = rt::run_roformer(prepare + dir.str("p") + " --input " + dir.str("corpus"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipping " + dir.str("corpus/prepared") + ", a prepared corpus"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prepare: 20 documents"), std::string::npos) << r.output;
}
