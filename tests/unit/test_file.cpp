// core/file: whole-file reads, atomic replacement (old or new content, never a part; no temporary
// left behind; errors name the file) and folder removal (remove_tree, also where the pip LibTorch's
// std::filesystem copies are bound ahead of libstdc++'s).
#include <dlfcn.h>
#include <link.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/file.h"
#include "core/utf8.h"
#include "test_util.h"

namespace rt = roformer::test;
using roformer::core::read_file;
using roformer::core::remove_tree;
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

namespace {

// A folder with files, a nested folder, and links (to a folder and a file outside it, and one
// dangling) that removal must delete without following.
void fill_tree(const std::string& root, const std::string& outside) {
  rt::write_file(outside + "/kept.txt", "not to be removed\n");
  rt::write_file(root + "/a.txt", "a\n");
  rt::write_file(root + "/sub/deeper/b.bin", std::string(100000, 'b'));
  rt::fs::create_directories(root + "/sub/empty");
  rt::fs::create_directory_symlink(outside, root + "/sub/link-to-folder");
  rt::fs::create_symlink(outside + "/kept.txt", root + "/link-to-file");
  rt::fs::create_symlink(root + "/no-such-file", root + "/dangling");
}

}  // namespace

TEST(File, RemoveTreeRemovesAFilledFolderWithoutFollowingLinks) {
  rt::TempDir dir;
  fill_tree(dir.str("tree"), dir.str("outside"));
  std::error_code ec;
  EXPECT_TRUE(remove_tree(dir.str("tree"), ec)) << ec.message();
  EXPECT_FALSE(ec);
  EXPECT_FALSE(rt::fs::exists(rt::fs::symlink_status(dir.str("tree"))));
  EXPECT_EQ(rt::read_file(dir.str("outside/kept.txt")), "not to be removed\n");
  // A single file, a link to a folder (the link goes, the folder stays) and a missing path.
  remove_tree(dir.str("outside/kept.txt"));
  EXPECT_FALSE(rt::fs::exists(dir.str("outside/kept.txt")));
  rt::fs::create_directory_symlink(dir.str("outside"), dir.str("link"));
  remove_tree(dir.str("link"));
  EXPECT_FALSE(rt::fs::exists(rt::fs::symlink_status(dir.str("link"))));
  EXPECT_TRUE(rt::fs::is_directory(dir.str("outside")));
  EXPECT_TRUE(remove_tree(dir.str("never-existed"), ec)) << ec.message();
}

TEST(File, RemoveTreeNamesWhatItCannotRemove) {
  rt::TempDir dir;
  rt::write_file(dir.str("file"), "x");
  const std::string path = dir.str("file/below-a-file");  // ENOTDIR, even for root
  std::error_code ec;
  EXPECT_FALSE(remove_tree(path, ec));
  EXPECT_EQ(ec, std::errc::not_a_directory);
  const std::string msg = rt::error_of([&] { remove_tree(path); });
  EXPECT_EQ(msg, "cannot remove '" + path + "': " + ec.message());
  EXPECT_EQ(rt::read_file(dir.str("file")), "x");
}

namespace {

// std::filesystem::remove_all(const path&, std::error_code&), mangled: the copy a call binds to is
// the first definition in the process's lookup order (what dlsym(RTLD_DEFAULT) returns).
const char* const kRemoveAllSymbol = "_ZNSt10filesystem10remove_allERKNS_7__cxx114pathERSt10error_code";
// The folder the death-test child removes (set by the parent; the child re-runs the test body).
const char* const kChildTreeEnv = "ROFORMER_TEST_REMOVE_TREE";

// The path of the loaded shared library whose file name is `name` ("" when none is loaded).
// The path of a library this process has loaded whose file is `name` or a version of it (name.N...).
std::string loaded_library(const std::string& name) {
  struct Search {
    std::string name, path;
  } search{name, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        const std::string file = path.substr(path.rfind('/') + 1);
        if (file == s->name || file.rfind(s->name + ".", 0) == 0) s->path = path;
        return s->path.empty() ? 0 : 1;
      },
      &search);
  return search.path;
}

// The death-test child: LD_PRELOAD put libtorch first, so check that a remove_all call would bind
// to its copy (else the test proves nothing: exit 2), then remove the tree (exit 0 when it is gone).
[[noreturn]] void remove_tree_with_libtorch_first(const std::string& tree) {
  Dl_info info{};
  void* bound = dlsym(RTLD_DEFAULT, kRemoveAllSymbol);
  if (bound == nullptr || dladdr(bound, &info) == 0 || std::strstr(info.dli_fname, "libtorch.so") == nullptr) {
    std::fprintf(stderr, "LD_PRELOAD did not bind remove_all to libtorch (bound in %s)\n",
                 bound && info.dli_fname ? info.dli_fname : "nothing");
    std::_Exit(2);
  }
  std::error_code ec;
  remove_tree(tree, ec);
  std::fprintf(stderr, "remove_tree: %s\n", ec ? ec.message().c_str() : "ok");
  std::_Exit(!ec && !rt::fs::exists(rt::fs::symlink_status(tree)) ? 0 : 3);
}

}  // namespace

// The Ubuntu 24.04 crash: libtorch.so defines remove_all, whose recursive_directory_iterator::__erase
// no library exports; bound ahead of libstdc++ (LD_PRELOAD here; link order elsewhere), removing a
// filled folder jumped to address 0. remove_tree must work in that process, and a crash of the
// child is reported as a failure of this test instead of taking the test binary down.
TEST(FileDeathTest, RemoveTreeWorksWithLibtorchsFilesystemCopiesBoundFirst) {
  const std::string libtorch = loaded_library("libtorch.so");
  if (libtorch.empty()) GTEST_SKIP() << "no libtorch.so in this process (a static LibTorch): nothing to bind ahead";
  void* handle = dlopen(libtorch.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  const bool has_copy = handle != nullptr && dlsym(handle, kRemoveAllSymbol) != nullptr;
  if (handle != nullptr) dlclose(handle);
  if (!has_copy) GTEST_SKIP() << libtorch << " carries no copy of std::filesystem::remove_all";

  // The child is a fresh exec of this binary (so LD_PRELOAD applies) that runs this test up to the
  // EXPECT_EXIT below: it finds the parent's tree in the environment and prepares nothing.
  const char* child_tree = std::getenv(kChildTreeEnv);
  std::optional<rt::TempDir> dir;
  if (child_tree == nullptr) {
    dir.emplace();
    fill_tree(dir->str("tree"), dir->str("outside"));
    setenv(kChildTreeEnv, dir->str("tree").c_str(), 1);
    // Under AddressSanitizer (scripts/sanitize.sh) its runtime must stay the first library.
    const std::string asan = loaded_library("libasan.so");
    setenv("LD_PRELOAD", (asan.empty() ? libtorch : asan + ":" + libtorch).c_str(), 1);
  }
  const std::string tree = child_tree != nullptr ? child_tree : dir->str("tree");
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(remove_tree_with_libtorch_first(tree), testing::ExitedWithCode(0), "remove_tree: ok");
  GTEST_FLAG_SET(death_test_style, style);
  unsetenv("LD_PRELOAD");
  unsetenv(kChildTreeEnv);
  EXPECT_FALSE(rt::fs::exists(rt::fs::symlink_status(tree)));
  EXPECT_EQ(rt::read_file(dir->str("outside/kept.txt")), "not to be removed\n");
}

TEST(Utf8OrEscaped, KeepsValidTextAndEscapesEachStrayByte) {
  using roformer::core::utf8_or_escaped;
  EXPECT_EQ(utf8_or_escaped("plain/path.txt"), "plain/path.txt");
  EXPECT_EQ(utf8_or_escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(utf8_or_escaped("odd-\xff\xfe.txt"), "odd-\\xFF\\xFE.txt");
  EXPECT_EQ(utf8_or_escaped("\xc0\xaf"), "\\xC0\\xAF");          // an overlong '/'
  EXPECT_EQ(utf8_or_escaped("\xed\xa0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(utf8_or_escaped("ab\xe2\x82"), "ab\\xE2\\x82");      // cut short at the end
  EXPECT_EQ(roformer::core::listed_names({"b", "a", "c"}, 2), "a, b and 1 more");
}
