// The code keeps its shape (issues 14, 23, 37): no function in src/ longer than kMaxLines, except the
// declarative tables listed below. A newcomer reads the training run as a list of calls; a function
// that grows past the limit is split where it has parts, not exempted. The bench's switches stay the
// bench's: only the bench includes train/bench.h, and the kernel policy is read where a choice is
// made, never threaded through the model as a member or parameter.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;
constexpr int kMaxLines = 60;
// Tables of data written as code (one entry per line), not logic.
const std::vector<std::string> kTables = {"build_fields"};

struct Function {
  std::string file, signature;
  int line = 0, length = 0;
};

bool top_level_start(const std::string& l) {
  if (l.empty() || l[0] == ' ' || l[0] == '#' || l[0] == '/' || l[0] == '}' || l[0] == '{') return false;
  for (const char* skip : {"namespace", "using ", "struct ", "class ", "enum ", "template", "extern", "static_assert"})
    if (l.rfind(skip, 0) == 0) return false;
  return l.find('(') != std::string::npos;
}

// Function definitions at namespace level: a signature starting in column 0 and a body that ends
// with a "}" in column 0 (the project's clang-format layout).
std::vector<Function> functions_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<Function> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!top_level_start(lines[i])) continue;
    size_t open = i;  // the line that opens the body
    while (open < lines.size() && lines[open].find('{') == std::string::npos && lines[open].find(';') == std::string::npos)
      ++open;
    if (open >= lines.size() || lines[open].find('{') == std::string::npos) continue;  // a declaration
    if (lines[open].back() == '}' || lines[open].find('}') != std::string::npos) continue;  // one-liner
    size_t close = open + 1;
    while (close < lines.size() && lines[close] != "}") ++close;
    if (close >= lines.size()) continue;
    out.push_back({file.filename().string(), lines[i], static_cast<int>(i + 1), static_cast<int>(close - i + 1)});
    i = close;
  }
  return out;
}

TEST(Structure, NoFunctionInSrcIsLongerThanTheLimit) {
  const fs::path src = fs::path(roformer::test::source_dir()) / "src";
  ASSERT_TRUE(fs::is_directory(src)) << src;
  int scanned = 0, longest = 0;
  std::string longest_name;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (entry.path().extension() != ".cpp") continue;
    for (const auto& f : functions_of(entry.path())) {
      ++scanned;
      bool table = false;
      for (const auto& t : kTables) table = table || f.signature.find(t + "(") != std::string::npos;
      if (table) continue;
      if (f.length > longest) longest = f.length, longest_name = f.file + ":" + std::to_string(f.line);
      EXPECT_LE(f.length, kMaxLines) << f.file << ":" << f.line << " " << f.signature << " has " << f.length
                                     << " lines: split it into named parts";
    }
  }
  EXPECT_GT(scanned, 200) << "the scanner found too few functions: has the layout changed?";
  std::cout << scanned << " functions scanned; the longest outside the tables: " << longest << " lines ("
            << longest_name << ")\n";
}

// The scanner itself: a long function is caught, declarations and one-liners are not functions.
TEST(Structure, TheScannerMeasuresFunctions) {
  roformer::test::TempDir tmp;
  std::string text = "int declared(int x);\nint one() { return 1; }\nint longer(int a,\n           int b) {\n";
  for (int i = 0; i < 120; ++i) text += "  a += b;\n";
  text += "  return a;\n}\n";
  const std::string path = tmp.str("x.cpp");
  roformer::test::write_file(path, text);
  const auto found = functions_of(path);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].line, 3);
  EXPECT_EQ(found[0].length, 124);  // lines 3 to 126: signature (2), body (121), "}"
}

// std::filesystem::remove_all may bind to the pip LibTorch's broken copy (core/file.h): folders are
// removed through roformer::core::remove_tree only. Comments may name it; code may not call it.
TEST(Structure, NoCodeCallsStdFilesystemRemoveAll) {
  const std::string call = std::string("remove_all") + "(";  // not written whole: this file would match
  int scanned = 0;
  for (const char* folder : {"src", "app", "bench", "tests"}) {
    const fs::path root = fs::path(roformer::test::source_dir()) / folder;
    if (!fs::is_directory(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      const auto ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
      ++scanned;
      std::ifstream in(entry.path());
      int line_no = 0;
      for (std::string line; std::getline(in, line);) {
        ++line_no;
        const std::string code = line.substr(0, line.find("//"));
        EXPECT_EQ(code.find(call), std::string::npos)
            << entry.path().string() << ":" << line_no << " calls remove_all; use roformer::core::remove_tree";
      }
    }
  }
  EXPECT_GT(scanned, 100) << "too few sources found under " << roformer::test::source_dir();
}

// Every .h and .cpp below src/, with its path relative to src/ ("train/bench.cpp").
std::vector<std::pair<std::string, fs::path>> sources() {
  const fs::path src = fs::path(roformer::test::source_dir()) / "src";
  std::vector<std::pair<std::string, fs::path>> out;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const auto ext = entry.path().extension();
    if (ext == ".h" || ext == ".cpp") out.emplace_back(fs::relative(entry.path(), src).generic_string(), entry.path());
  }
  return out;
}

// A line without its // comment and with its string literals emptied (escapes aside: none of the
// names looked for here is spelled in a string with an escaped quote).
std::string code_of(const std::string& line) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (!in_string && line.compare(i, 2, "//") == 0) break;
    if (line[i] == '"' && (i == 0 || line[i - 1] != '\\')) in_string = !in_string;
    if (!in_string && line[i] != '"') out += line[i];
  }
  return out;
}

TEST(Structure, OnlyTheBenchIncludesBenchH) {
  int scanned = 0;
  for (const auto& [name, path] : sources()) {
    ++scanned;
    if (name == "train/bench.cpp") continue;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      EXPECT_EQ(line.find("#include \"train/bench.h\""), std::string::npos)
          << name << " includes train/bench.h: what the run shares with the bench belongs elsewhere "
             "(core/device.h holds the device peaks)";
  }
  EXPECT_GT(scanned, 100);
}

// The entries of struct KernelPolicy in model/kernel_policy.h: {type, name}.
using PolicyEntries = std::vector<std::pair<std::string, std::string>>;
PolicyEntries kernel_policy_entries(const fs::path& header) {
  std::ifstream in(header);
  PolicyEntries out;
  bool inside = false;
  const std::regex field(R"(^\s+(\w+)\s+(\w+)\s*=)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("struct KernelPolicy {", 0) == 0) inside = true;
    else if (inside && line.rfind("};", 0) == 0) break;
    std::smatch m;
    const std::string code = code_of(line);
    if (inside && std::regex_search(code, m, field)) out.emplace_back(m[1], m[2]);
  }
  return out;
}

// The lines of `file` that carry a kernel policy entry as a value of their own: a member or
// parameter of the entry's enum type or, for a bool entry, of its name; the policy itself
// (KernelPolicy) or the old per-model struct (Kernels) passed around.
std::vector<std::string> policy_threading(const fs::path& file, const PolicyEntries& entries) {
  std::vector<std::regex> patterns = {std::regex(R"(\bKernels?\b|\bKernelPolicy\b|\bkernels\(\))")};
  for (const auto& [type, name] : entries)
    patterns.emplace_back(type == "bool" ? R"(\bbool\s+)" + name + R"(_?\b)" : R"(\b)" + type + R"(\s*&?\s+\w)");
  std::ifstream in(file);
  std::vector<std::string> found;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const std::string code = code_of(line);
    for (const auto& p : patterns)
      if (std::regex_search(code, p)) {
        found.push_back(std::to_string(line_no) + ": " + line);
        break;
      }
  }
  return found;
}

// The kernel policy is read at the call sites (kernel_policy().entry), not passed through
// RoFormerOptions, a constructor or a member: outside model/kernel_policy.* and the bench that sets
// it, no source holds an entry of its own. A new entry is checked without touching this test.
TEST(Structure, TheKernelPolicyIsReadNotThreaded) {
  const fs::path src = fs::path(roformer::test::source_dir()) / "src";
  const auto entries = kernel_policy_entries(src / "model" / "kernel_policy.h");
  ASSERT_GE(entries.size(), 5u) << "struct KernelPolicy's entries not found: has its layout changed?";
  int readers = 0;
  for (const auto& [name, path] : sources()) {
    if (name.rfind("model/kernel_policy.", 0) == 0 || name.rfind("train/bench.", 0) == 0) continue;
    for (const auto& line : policy_threading(path, entries))
      ADD_FAILURE() << name << ":" << line << "\n  read the entry where it matters: kernel_policy()."
                    << "ENTRY (model/kernel_policy.h)";
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    readers += text.find("kernel_policy().") != std::string::npos || text.find("rotary_impl(") != std::string::npos;
  }
  EXPECT_GE(readers, 2) << "the model no longer reads the kernel policy?";
}

// The checker itself: the threading that issue 37 removed is found; reading the policy is not.
TEST(Structure, TheKernelPolicyCheckerFindsThreading) {
  roformer::test::TempDir tmp;
  const std::string path = tmp.str("layer.h");
  roformer::test::write_file(path,
                             "struct Options { Kernels kernels; };\n"
                             "torch::Tensor linear(const torch::Tensor& x, bool bias_in_gemm);\n"
                             "  RotaryImpl rotary_impl_;\n"
                             "  bool fused_qkv_;  // cached\n"
                             "  if (kernel_policy().fused_qkv && rotary_impl(x.device()) == RotaryImpl::kFused) {}\n"
                             "  spdlog::info(\"bool dense_head\");  // bool bias_in_gemm\n");
  const PolicyEntries entries = {
      {"RotaryImpl", "rotary"}, {"bool", "fused_qkv"}, {"bool", "bias_in_gemm"}, {"bool", "dense_head"}};
  const auto found = policy_threading(path, entries);
  ASSERT_EQ(found.size(), 4u) << ::testing::PrintToString(found);
  EXPECT_EQ(found[0].substr(0, 2), "1:");
  EXPECT_EQ(found[3].substr(0, 2), "4:");
}

}  // namespace
