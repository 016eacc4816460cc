// Expansion of listed inputs (data/input_files.h): folders recursively in path order with hidden
// and non-corpus names left out, glob patterns sorted byte by byte, the listed order kept, and every
// entry that names nothing refused with a message.
#include <gtest/gtest.h>

#include "data/input_files.h"
#include "test_util.h"

using namespace roformer::data;
namespace rt = roformer::test;
using rt::error_of;

namespace {

class InputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"corpus/b10.txt", "corpus/b9.txt", "corpus/B1.txt", "corpus/sub/a.jsonl.zst",
                             "corpus/sub.parquet", "corpus/x.json.GZ", "corpus/README.md", "corpus/.hidden.txt",
                             "corpus/.cache/c.txt", "corpus/notes.txt.bak", "other/z.text"})
      rt::write_file(dir_.str(name), "text\n");
  }
  std::string p(const std::string& name) const { return dir_.str(name); }
  rt::TempDir dir_;
};

}  // namespace

TEST_F(InputFiles, FolderIsItsCorpusFilesInPathOrder) {
  // Byte order: 'B' < 'b', "b10" < "b9", "sub.parquet" < "sub/" ('.' < '/').
  EXPECT_EQ(expand_inputs({p("corpus")}),
            (std::vector<std::string>{p("corpus/B1.txt"), p("corpus/b10.txt"), p("corpus/b9.txt"),
                                      p("corpus/sub.parquet"), p("corpus/sub/a.jsonl.zst"), p("corpus/x.json.GZ")}));
}

TEST_F(InputFiles, PatternsAreSortedAndEntriesKeepTheirOrder) {
  EXPECT_EQ(expand_inputs({p("other/z.text"), p("corpus/b*.txt"), p("corpus/B?.txt")}),
            (std::vector<std::string>{p("other/z.text"), p("corpus/b10.txt"), p("corpus/b9.txt"), p("corpus/B1.txt")}));
  // A matched folder is read like a folder; a file reached twice is refused, naming both ways.
  EXPECT_EQ(expand_inputs({p("corpu[s]"), p("other/z.text")}).size(), 7u);
  EXPECT_NE(error_of([&] { expand_inputs({p("corpu[s]"), p("other/z.text"), p("other/z.text")}); })
                .find("input " + p("other/z.text") + " would be read twice (listed itself, and listed itself"),
            std::string::npos);
  EXPECT_NE(error_of([&] { expand_inputs({p("corpus/b*.txt"), p("corpus/b9.txt")}); })
                .find("would be read twice (from " + p("corpus/b*.txt") + ", and listed itself"),
            std::string::npos);
  // A file is taken whatever its name, and a name holding pattern characters that exists is that file.
  rt::write_file(p("odd[1].md"), "text\n");
  EXPECT_EQ(expand_inputs({p("corpus/README.md"), p("odd[1].md")}),
            (std::vector<std::string>{p("corpus/README.md"), p("odd[1].md")}));
}

TEST_F(InputFiles, EntriesNamingNothingAreRefused) {
  EXPECT_NE(error_of([&] { expand_inputs({}); }).find("no input files given"), std::string::npos);
  EXPECT_NE(error_of([&] { expand_inputs({p("missing.txt")}); }).find("input file not found: " + p("missing.txt")),
            std::string::npos);
  EXPECT_NE(error_of([&] { expand_inputs({p("corpus/*.parquet.gz")}); })
                .find("input pattern " + p("corpus/*.parquet.gz") + " matches no file"),
            std::string::npos);
  rt::fs::create_directories(p("empty"));
  rt::write_file(p("empty/LICENSE"), "x");
  EXPECT_NE(error_of([&] { expand_inputs({p("empty")}); }).find("input folder " + p("empty") + " holds no corpus files"),
            std::string::npos);
  rt::write_file(p("unfinished/documents.idx"), "x");
  EXPECT_NE(error_of([&] { expand_inputs({p("unfinished")}); })
                .find("it looks like a prepared corpus whose meta.json is missing"),
            std::string::npos);
  rt::write_file(p("prepared/meta.json"), "{}");
  EXPECT_NE(error_of([&] { expand_inputs({p("prepared")}); })
                .find("input " + p("prepared") + " is a prepared corpus (the output of `roformer prepare`)"),
            std::string::npos);
}

TEST(CorpusFileName, SuffixesTakenFromAFolder) {
  for (const char* yes : {"a.txt", "a.text", "a.jsonl", "a.json", "a.parquet", "a.jsonl.gz", "a.json.gzip",
                          "a.txt.zst", "a.jsonl.ZSTD", "A.TXT"})
    EXPECT_TRUE(is_corpus_file_name(yes)) << yes;
  for (const char* no : {"README.md", "LICENSE", "a.gz", "a.parquet.gz.bak", "a.csv", ".txt", "a.txt.bz2"})
    EXPECT_FALSE(is_corpus_file_name(no)) << no;
}
