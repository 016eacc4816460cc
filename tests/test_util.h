// Helpers shared by the tests: paths compiled in by tests/CMakeLists.txt, the Brown corpus (tests
// that need it skip with a message when it is absent), temporary directories and running the CLI.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/file.h"

namespace roformer::test {

namespace fs = std::filesystem;

inline std::string source_dir() { return ROFORMER_TEST_SOURCE_DIR; }
inline std::string roformer_bin() { return ROFORMER_TEST_BIN; }
inline std::string dist_worker_bin() { return ROFORMER_TEST_DIST_WORKER; }  // tests/dist_worker.cpp
// Python with torch + transformers (the setup script's venv); empty when not configured.
inline std::string python() {
  const char* env = std::getenv("ROFORMER_PYTHON");
  return env ? env : ROFORMER_TEST_PYTHON;
}
// ../shared next to the checkout (override with ROFORMER_SHARED_DIR).
inline std::string shared_dir() {
  const char* env = std::getenv("ROFORMER_SHARED_DIR");
  return env ? env : source_dir() + "/../shared";
}
inline std::string brown_dir() { return shared_dir() + "/data/brown"; }
inline bool have_brown() { return fs::exists(brown_dir() + "/train.txt"); }

#define ROFORMER_REQUIRE_BROWN()                                                                   \
  do {                                                                                             \
    if (!::roformer::test::have_brown())                                                           \
      GTEST_SKIP() << "Brown corpus not found at " << ::roformer::test::brown_dir()                \
                   << " (set ROFORMER_SHARED_DIR to the folder holding data/brown)";               \
  } while (0)

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("roformer-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    roformer::core::remove_tree(path_.string(), ec);  // never std::filesystem::remove_all (core/file.h)
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string str(const std::string& child = "") const { return child.empty() ? path_.string() : (path_ / child).string(); }

 private:
  fs::path path_;
};

inline void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Lowercase hex digits of bytes (for comparing binary encodings readably).
inline std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `fn`, expects roformer::Error, and returns its message (a test failure when none is thrown).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const roformer::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected roformer::Error";
  return "";
}

// Runs a shell command line, capturing stdout and stderr.
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Runs the roformer CLI with the given arguments (already shell-quoted).
inline CommandResult run_roformer(const std::string& args) { return run_command(roformer_bin() + " " + args); }

}  // namespace roformer::test

namespace roformer::test {

// Deterministic pseudo-English for tests that must not depend on ../shared: sentences from a small
// grammar (so an MLM can learn something), one paragraph a line, a blank line between documents.
inline std::string synthetic_corpus(int documents, int paragraphs_per_doc, unsigned seed = 7) {
  static const char* det[] = {"the", "a", "every", "this", "that", "one"};
  static const char* adj[] = {"small", "large", "red", "green", "quiet", "loud", "old", "young", "bright", "dark"};
  static const char* noun[] = {"cat", "dog", "bird", "house", "river", "tree", "car", "child", "teacher", "garden",
                               "city", "window", "book", "table", "horse", "boat"};
  static const char* verb[] = {"sees", "likes", "finds", "follows", "paints", "builds", "watches", "carries"};
  static const char* prep[] = {"near", "under", "behind", "beside", "over", "inside"};
  std::mt19937 rng(seed);
  auto pick = [&](const auto& arr) { return arr[rng() % (sizeof(arr) / sizeof(arr[0]))]; };
  std::string out;
  for (int d = 0; d < documents; ++d) {
    for (int p = 0; p < paragraphs_per_doc; ++p) {
      const int sentences = 2 + static_cast<int>(rng() % 4);
      for (int s = 0; s < sentences; ++s) {
        std::string sent = std::string(pick(det)) + " " + pick(adj) + " " + pick(noun) + " " + pick(verb) + " " +
                           pick(det) + " " + pick(noun) + " " + pick(prep) + " the " + pick(noun) + ".";
        sent[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(sent[0])));
        out += sent + (s + 1 < sentences ? " " : "");
      }
      out += "\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace roformer::test
