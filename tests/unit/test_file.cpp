// core/file: whole-file reads and atomic replacement (old or new content, never a part; no
// temporary left behind; errors name the file).
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file.h"
#include "test_util.h"

namespace rt = roformer::test;
using roformer::core::read_file;
using roformer::core::write_file_atomic;

TEST(File, WriteAtomicCreatesAndReplaces) {
  rt::TempDir dir;
  const std::string path = dir.str("a.json");
  write_file_atomic(path, "first\n");
  EXPECT_EQ(read_file(path), "first\n");
  write_file_atomic(path, std::string("second\0with a NUL", 17));
  EXPECT_EQ(read_file(path), std::string("second\0with a NUL", 17));
  EXPECT_FALSE(rt::fs::exists(path + ".tmp"));
  EXPECT_EQ(std::distance(rt::fs::directory_iterator(dir.path()), rt::fs::directory_iterator()), 1);
}

TEST(File, WriteAtomicNamesTheFileItCannotWrite) {
  rt::TempDir dir;
  const std::string path = dir.str("missing_folder/a.json");
  const std::string msg = rt::error_of([&] { write_file_atomic(path, "x"); });
  EXPECT_NE(msg.find("cannot write '" + path + ".tmp'"), std::string::npos) << msg;
  EXPECT_FALSE(rt::fs::exists(path));
}

TEST(File, ReadNamesWhatItCannotRead) {
  rt::TempDir dir;
  const std::string msg = rt::error_of([&] { read_file(dir.str("none.yaml"), "config"); });
  EXPECT_EQ(msg, "cannot read config '" + dir.str("none.yaml") + "'");
}

TEST(File, AppendFileAppendsAndNeverOverwrites) {
  using roformer::core::AppendFile;
  rt::TempDir dir;
  const std::string path = dir.str("log.bin");
  {
    auto f = AppendFile::create_new(path, "log");
    f.append("one ");
    EXPECT_EQ(read_file(path), "one ") << "unbuffered: a reader sees it at once";
    f.append(std::string("two\0", 4));
    f.close();
  }
  EXPECT_EQ(read_file(path), std::string("one two\0", 8));
  const std::string msg = rt::error_of([&] { AppendFile::create_new(path, "log"); });
  EXPECT_NE(msg.find("cannot create log '" + path + "': File exists"), std::string::npos) << msg;
  EXPECT_EQ(read_file(path), std::string("one two\0", 8)) << "left as it was";
  auto again = AppendFile::open_existing(path, "log");
  again.append("three");
  again.close();
  EXPECT_EQ(read_file(path), std::string("one two\0three", 13));
}

TEST(File, AppendFileReportsAFullDevice) {
  using roformer::core::AppendFile;
  if (!rt::fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  auto f = AppendFile::open_existing("/dev/full", "event file");
  const std::string msg = rt::error_of([&] { f.append("x"); });
  EXPECT_EQ(msg, "cannot write event file '/dev/full': No space left on device (is the disk full?)");
}
