// Expansion of listed inputs (files, folders, glob patterns) into the files read; see input_files.h.
#include "data/input_files.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "data/corpus.h"
#include "data/corpus_format.h"

namespace roformer::data {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_pattern(const std::string& entry) { return entry.find_first_of("*?[") != std::string::npos; }

// Every corpus file under `folder` (recursively, hidden entries skipped), sorted by path.
std::vector<std::string> folder_files(const std::string& folder) {
  if (is_prepared_dir(folder))
    throw Error(fmt::format("input {} is a prepared corpus (the output of `roformer prepare`), not text to read; "
                            "list the text it was prepared from, or use the folder itself as training data "
                            "(data.train_files)", folder));
  std::vector<std::string> files;
  bool unfinished_prepare = false;
  std::error_code ec;
  fs::recursive_directory_iterator it(folder, fs::directory_options::none, ec), end;
  if (ec) throw Error(fmt::format("cannot list input folder {}: {}", folder, ec.message()));
  for (; it != end; it.increment(ec)) {
    if (ec) throw Error(fmt::format("cannot list input folder {}: {}", folder, ec.message()));
    const std::string name = it->path().filename().string();
    if (name.rfind('.', 0) == 0) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (name == format::kIndexFile || name == format::shard_name(0)) unfinished_prepare = true;
    if (it->is_regular_file(ec) && is_corpus_file_name(name)) files.push_back(it->path().string());
  }
  if (files.empty())
    throw Error(fmt::format(
        "input folder {} holds no corpus files (names ending .txt, .text, .jsonl, .json or .parquet, optionally "
        "followed by .gz or .zst){}", folder,
        unfinished_prepare ? "; it looks like a prepared corpus whose meta.json is missing (`roformer prepare` did "
                             "not finish there): prepare it again"
                           : "; list the files themselves to read other names"));
  std::sort(files.begin(), files.end());
  return files;
}

// The paths matching a glob pattern, sorted byte by byte (glob's own order follows the locale).
std::vector<std::string> pattern_matches(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  std::vector<std::string> paths(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
  globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && paths.empty()))
    throw Error(fmt::format("input pattern {} matches no file (check the path; quote the pattern so that the shell "
                            "leaves it to roformer)", pattern));
  if (rc != 0) throw Error(fmt::format("cannot expand input pattern {} (glob error {})", pattern, rc));
  std::sort(paths.begin(), paths.end());
  return paths;
}

void append_entry(const std::string& entry, bool from_pattern, std::vector<std::string>& files) {
  std::error_code ec;
  if (fs::is_directory(entry, ec)) {
    const auto found = folder_files(entry);
    files.insert(files.end(), found.begin(), found.end());
    return;
  }
  if (!fs::exists(entry, ec)) {
    if (!from_pattern && is_pattern(entry)) {
      for (const auto& path : pattern_matches(entry)) append_entry(path, true, files);
      return;
    }
    throw Error("input file not found: " + entry + " (check the path)");
  }
  if (!fs::is_regular_file(entry, ec)) throw Error("input is not a regular file: " + entry);
  files.push_back(entry);
}

}  // namespace

bool is_corpus_file_name(const std::string& file_name) {
  std::string name = file_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* compressed : {".gz", ".gzip", ".zst", ".zstd"})
    if (ends_with(name, compressed)) {
      name.resize(name.size() - std::char_traits<char>::length(compressed));
      break;
    }
  for (const char* ext : {".txt", ".text", ".jsonl", ".json", ".parquet"})
    if (ends_with(name, ext) && name.size() > std::char_traits<char>::length(ext)) return true;
  return false;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw Error("no input files given (pass at least one --input FILE, folder or pattern)");
  std::vector<std::string> files;
  for (const auto& entry : inputs) append_entry(entry, false, files);
  return files;
}

}  // namespace roformer::data
