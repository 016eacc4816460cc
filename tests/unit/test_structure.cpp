// The code keeps its shape (issues 14, 23, 37): no function in src/ longer than kMaxLines, except the
// declarative tables listed below. A newcomer reads the training run as a list of calls; a function
// that grows past the limit is split where it has parts, not exempted. The measurement front (bench/)
// sits above the library: nothing in src/ includes it, and the kernel policy is read where a choice
// is made, never threaded through the model as a member or parameter.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "model/kernel_policy.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
constexpr int kMaxLines = 60;
// Tables of data written as code (one entry per line), not logic.
const std::vector<std::string> kTables = {"build_fields", "build_alternatives"};

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

// The functions of src/ and bench/ against kMaxLines (the tables excepted); counts the longest.
void check_function_lengths(const fs::path& root, int* scanned, int* longest, std::string* longest_name) {
  ASSERT_TRUE(fs::is_directory(root)) << root;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.path().extension() != ".cpp") continue;
    for (const auto& f : functions_of(entry.path())) {
      ++*scanned;
      bool table = false;
      for (const auto& t : kTables) table = table || f.signature.find(t + "(") != std::string::npos;
      if (table) continue;
      if (f.length > *longest) *longest = f.length, *longest_name = f.file + ":" + std::to_string(f.line);
      EXPECT_LE(f.length, kMaxLines) << f.file << ":" << f.line << " " << f.signature << " has " << f.length
                                     << " lines: split it into named parts";
    }
  }
}

TEST(Structure, NoFunctionInSrcIsLongerThanTheLimit) {
  int scanned = 0, longest = 0;
  std::string longest_name;
  for (const char* folder : {"src", "bench"})
    check_function_lengths(fs::path(roformer::test::source_dir()) / folder, &scanned, &longest, &longest_name);
  EXPECT_GT(scanned, 200) << "the scanner found too few functions: has the layout changed?";
  std::cout << scanned << " functions scanned in src/ and bench/; the longest outside the tables: " << longest
            << " lines (" << longest_name << ")\n";
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

// Calls visit(path, line number, code) for every line of the C++/CUDA sources under `folders`, with
// its // comment cut off; returns how many files it read.
int for_each_code_line(const std::vector<std::string>& folders,
                       const std::function<void(const fs::path&, int, const std::string&)>& visit) {
  int scanned = 0;
  for (const auto& folder : folders) {
    const fs::path root = fs::path(roformer::test::source_dir()) / folder;
    if (!fs::is_directory(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      const auto ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
      ++scanned;
      std::ifstream in(entry.path());
      int line_no = 0;
      for (std::string line; std::getline(in, line);) visit(entry.path(), ++line_no, line.substr(0, line.find("//")));
    }
  }
  return scanned;
}

// std::filesystem::remove_all may bind to the pip LibTorch's broken copy (core/file.h): folders are
// removed through roformer::core::remove_tree only. Comments may name it; code may not call it.
TEST(Structure, NoCodeCallsStdFilesystemRemoveAll) {
  const std::string call = std::string("remove_all") + "(";  // not written whole: this file would match
  const int scanned = for_each_code_line({"src", "app", "bench", "tests"}, [&](const fs::path& file, int line,
                                                                               const std::string& code) {
    EXPECT_EQ(code.find(call), std::string::npos)
        << file.string() << ":" << line << " calls remove_all; use roformer::core::remove_tree";
  });
  EXPECT_GT(scanned, 100) << "too few sources found under " << roformer::test::source_dir();
}

// The path of a source below src/ ("model/roformer.cpp").
std::string src_relative(const fs::path& file) {
  return fs::relative(file, fs::path(roformer::test::source_dir()) / "src").generic_string();
}

// bench/ (`roformer bench`: the step, the data, the kernels) is above the library and beside the
// app: no source of src/ includes it, and of app/ only the bench's commands do.
TEST(Structure, NothingBelowTheMeasurementFrontIncludesIt) {
  const fs::path root = roformer::test::source_dir();
  int includes = 0;
  const int scanned = for_each_code_line({"src", "app"}, [&](const fs::path& file, int line, const std::string& code) {
    if (code.find("#include \"bench/") == std::string::npos) return;
    ++includes;
    EXPECT_EQ(fs::relative(file, root).generic_string(), "app/commands_bench.cpp")
        << file.string() << ":" << line << " includes the measurement front (bench/): what the run shares with "
        << "the bench belongs in src/ (core/device.h holds the device peaks)";
  });
  EXPECT_GT(scanned, 100);
  EXPECT_GE(includes, 3) << "app/commands_bench.cpp no longer reaches bench/'s three modes?";
  EXPECT_TRUE(fs::is_directory(root / "bench")) << "the measurement front moved: update this test";
}

// A code line with its string literals emptied (no name looked for below is spelled in a string
// with an escaped quote).
std::string without_strings(const std::string& code) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i] == '"' && (i == 0 || code[i - 1] != '\\')) in_string = !in_string;
    else if (!in_string) out += code[i];
  }
  return out;
}

// The entries of struct KernelPolicy in model/kernel_policy.h: {type, name}.
using PolicyEntries = std::vector<std::pair<std::string, std::string>>;
PolicyEntries kernel_policy_entries() {
  PolicyEntries out;
  bool inside = false, done = false;
  const std::regex field(R"(^\s+(\w+)\s+(\w+)\s*=)");
  for_each_code_line({"src/model"}, [&](const fs::path& file, int, const std::string& code) {
    if (file.filename() != "kernel_policy.h" || done) return;
    if (code.rfind("struct KernelPolicy {", 0) == 0) inside = true;
    else if (inside && code.rfind("};", 0) == 0) done = true;
    std::smatch m;
    if (inside && !done && std::regex_search(code, m, field)) out.emplace_back(m[1], m[2]);
  });
  return out;
}

// What carries a kernel policy entry as a value of its own: a member or parameter of the entry's
// enum type or, for a bool entry, of its name; the policy itself (KernelPolicy) or the old
// per-model struct (Kernels) passed around.
std::vector<std::regex> policy_threading_patterns(const PolicyEntries& entries) {
  std::vector<std::regex> patterns = {std::regex(R"(\bKernels?\b|\bKernelPolicy\b|\bkernels\(\))")};
  for (const auto& [type, name] : entries)
    patterns.emplace_back(type == "bool" ? R"(\bbool\s+)" + name + R"(_?\b)" : R"(\b)" + type + R"(\s*&?\s+\w)");
  return patterns;
}

bool threads_policy(const std::string& code, const std::vector<std::regex>& patterns) {
  const std::string bare = without_strings(code);
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::regex& p) { return std::regex_search(bare, p); });
}

// The kernel policy is read at the call sites (kernel_policy().entry), not passed through
// RoFormerOptions, a constructor or a member: outside model/kernel_policy.* and the bench that sets
// it, no source holds an entry of its own. A new entry is checked without touching this test.
TEST(Structure, TheKernelPolicyIsReadNotThreaded) {
  const auto entries = kernel_policy_entries();
  ASSERT_GE(entries.size(), 5u) << "struct KernelPolicy's entries not found: has its layout changed?";
  const auto patterns = policy_threading_patterns(entries);
  std::set<std::string> readers;
  for_each_code_line({"src"}, [&](const fs::path& file, int line, const std::string& code) {
    const std::string name = src_relative(file);
    if (name.rfind("model/kernel_policy.", 0) == 0) return;
    if (code.find("kernel_policy().") != std::string::npos || code.find("rotary_impl(") != std::string::npos)
      readers.insert(name);
    EXPECT_FALSE(threads_policy(code, patterns))
        << name << ":" << line << " " << code << "\n  read the entry where it matters: kernel_policy().ENTRY "
        << "(model/kernel_policy.h)";
  });
  EXPECT_GE(readers.size(), 2u) << "the model no longer reads the kernel policy?";
}

// The checker itself: the threading that issue 37 removed is found; reading the policy is not.
TEST(Structure, TheKernelPolicyCheckerFindsThreading) {
  const auto patterns = policy_threading_patterns(
      {{"RotaryImpl", "rotary"}, {"bool", "fused_qkv"}, {"bool", "bias_in_gemm"}, {"bool", "dense_head"}});
  EXPECT_TRUE(threads_policy("struct Options { Kernels kernels; };", patterns));
  EXPECT_TRUE(threads_policy("torch::Tensor linear(const torch::Tensor& x, bool bias_in_gemm);", patterns));
  EXPECT_TRUE(threads_policy("  RotaryImpl rotary_impl_;", patterns));
  EXPECT_TRUE(threads_policy("  bool fused_qkv_;", patterns));
  EXPECT_TRUE(threads_policy("  void set(const KernelPolicy& p);", patterns));
  EXPECT_FALSE(threads_policy("  if (kernel_policy().fused_qkv && rotary_impl(x.device()) == RotaryImpl::kFused) {}",
                              patterns));
  EXPECT_FALSE(threads_policy("  spdlog::info(\"bool dense_head\");", patterns));
}

// An alternative of the kernel policy is declared once (issue 52): a field of KernelPolicy and its row
// in model::kernel_alternatives(), from which the bench's flags, its record keys, the device script's
// rows and the tests' entries are generated. Every field has exactly one row, and no other source
// spells a row's flag: a new entry cannot be forgotten in one of the places, nor spelled twice.
TEST(Structure, EveryKernelAlternativeIsOneRowOfTheTable) {
  const auto entries = kernel_policy_entries();
  ASSERT_GE(entries.size(), 5u);
  for (const auto& [type, name] : entries) {
    int rows = 0;
    for (const auto& row : roformer::model::kernel_alternatives()) rows += name == row.entry;
    EXPECT_EQ(rows, 1) << "KernelPolicy::" << name << " needs one row in kernel_alternatives() (model/kernel_policy.cpp)";
  }
  EXPECT_EQ(roformer::model::kernel_alternatives().size(), entries.size()) << "a row sets no field of KernelPolicy";
  for_each_code_line({"src", "app", "bench"}, [&](const fs::path& file, int line, const std::string& code) {
    if (file.filename() == "kernel_policy.cpp") return;
    for (const auto& row : roformer::model::kernel_alternatives())
      EXPECT_EQ(code.find('"' + std::string(row.flag) + '"'), std::string::npos)
          << file.string() << ":" << line << " spells " << row.flag << ": generate it from kernel_alternatives()";
  });
}

// The position scheme is chosen once (issue 37): model.position's values are compared only where
// the config names them, where the scheme is looked up (model/position.cpp) and where a Hugging Face
// family says which scheme it computes (src/hf/). Everything else asks the scheme, so a new scheme
// touches its own files and these places, not the layers, the exporter or --init-from.
TEST(Structure, ThePositionSchemeIsChosenInOnePlace) {
  const std::string use = std::string("Position::") + "k";  // not written whole: this file would match
  const fs::path root = roformer::test::source_dir();
  const int scanned = for_each_code_line({"src", "app"}, [&](const fs::path& file, int line, const std::string& code) {
    const std::string rel = file.lexically_relative(root).generic_string();
    if (rel.rfind("src/core/config.", 0) == 0 || rel == "src/model/position.cpp" || rel.rfind("src/hf/", 0) == 0)
      return;
    EXPECT_EQ(code.find(use), std::string::npos)
        << rel << ":" << line << " branches on model.position; ask the position scheme (model/position.h)";
  });
  EXPECT_GT(scanned, 100) << "too few sources found under " << root;
}

// The run directory's names are spelled once (checkpoint/run_layout.h; a checkpoint's own files in
// checkpoint/files.h, the tokenizer's in data/tokenizer.h, the lock's and the event files' for the
// folders below checkpoint/ in core/run_dir_names.h): every reader and writer asks the layout, so a
// renamed file cannot leave one reader behind, and no folder reaches another for a name (issue 52:
// checkpoint/ -> tensorboard/, tools/ -> train/). The folders of a run directory are checked where
// they are made into a path (dir / "data", "data/train"): "data" alone is also a JSON key. Tests may
// spell them: they check the contract.
bool spells_run_dir_name(const std::string& code, std::string* which) {
  static const std::vector<std::string> names = {"checkpoints",     "latest",         "metrics.jsonl",
                                                 "config.yaml",     "train.log",      "tokenizer.model",
                                                 "tokenizer.json",  "tensorboard",    ".lock",
                                                 "roformer_export.json", "events.out.tfevents.", "abandoned-"};
  static const std::vector<std::string> folders = {"tokenizer", "data", "checkpoints", "tensorboard"};
  if (code.rfind("#include", 0) == 0) return false;
  for (const auto& name : names)
    if (code.find('"' + name + '"') != std::string::npos) return *which = name, true;
  for (const auto& folder : folders)
    for (const std::string& path : {"/ \"" + folder + "\"", "\"" + folder + "/"})
      if (code.find(path) != std::string::npos) return *which = path, true;
  return false;
}

TEST(Structure, TheRunDirectoryLayoutIsNamedInOneFile) {
  const std::vector<std::string> homes = {"run_layout.h", "run_dir_names.h", "files.h", "tokenizer.h"};
  const int scanned = for_each_code_line({"src"}, [&](const fs::path& file, int line, const std::string& code) {
    if (std::find(homes.begin(), homes.end(), file.filename().string()) != homes.end()) return;
    std::string name;
    EXPECT_FALSE(spells_run_dir_name(code, &name))
        << file.string() << ":" << line << " spells " << name << ": use checkpoint::RunLayout (checkpoint/run_layout.h)";
  });
  EXPECT_GT(scanned, 100) << "too few sources found under src/";
}

// The checker itself: what launch.cpp spelled by hand before issue 52 is found, the layout's use is not.
TEST(Structure, TheRunDirectoryCheckerFindsFolderNames) {
  std::string name;
  EXPECT_TRUE(spells_run_dir_name("  own = (fs::path(plan.run_dir) / \"tokenizer\" / data::kTokenizerModelFile);", &name));
  EXPECT_EQ(name, "/ \"tokenizer\"");
  EXPECT_TRUE(spells_run_dir_name("  write(run_dir + \"/\" + \"checkpoints/latest\");", &name));
  EXPECT_TRUE(spells_run_dir_name("  fs::path(dir) / \"roformer_export.json\";", &name));
  EXPECT_FALSE(spells_run_dir_name("  own = RunLayout(plan.run_dir).tokenizer_model();", &name));
  EXPECT_FALSE(spells_run_dir_name("  rec[\"data\"] = \"synthetic\";", &name));
  EXPECT_FALSE(spells_run_dir_name("#include \"data/loader.h\"", &name));
}

// The metric records' fields are named once (metrics/records.h, issue 37): metrics.jsonl, TensorBoard,
// the console, inspect, the model card, `roformer eval --json` and the trainer state all go through
// the typed records, so a figure cannot be spelled one way by its writer and another by a reader.
// The keys checked are the records' own (plain "loss" or "step" are other files' words too).
TEST(Structure, TheMetricRecordsKeysAreSpelledInOneFile) {
  const std::vector<std::string> keys = {"loss_avg",   "accuracy_avg", "top5_accuracy", "perplexity",
                                         "n_predicted", "n_sequences", "grad_norm",     "ms_per_step",
                                         "data_wait_s"};
  int homes = 0;
  const int scanned = for_each_code_line({"src", "app"}, [&](const fs::path& file, int line, const std::string& code) {
    const bool home = file.filename() == "records.h" && file.parent_path().filename() == "metrics";
    for (const auto& key : keys) {
      if (code.find('"' + key + '"') == std::string::npos) continue;
      if (home) {
        ++homes;
        continue;
      }
      ADD_FAILURE() << file.string() << ":" << line << " spells \"" << key
                    << "\": read or write the record through metrics/records.h";
    }
  });
  EXPECT_GT(scanned, 100) << "too few sources found under src/";
  EXPECT_EQ(homes, static_cast<int>(keys.size())) << "metrics/records.h should name each key once";
}

}  // namespace
