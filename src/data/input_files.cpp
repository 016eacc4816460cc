// Expansion of listed inputs (files, folders, glob patterns) into the files read; see input_files.h.
#include "data/input_files.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/run_dir_names.h"
#include "core/utf8.h"
#include "data/corpus.h"
#include "data/corpus_format.h"
#include "data/sentencepiece_tokenizer.h"

namespace roformer::data {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_pattern(const std::string& entry) { return entry.find_first_of("*?[") != std::string::npos; }

// What roformer wrote into `dir`, if it is one of its outputs (never input text: its .json files are
// records, not JSONL): "" otherwise.
std::string roformer_output_kind(const fs::path& dir) {
  std::error_code ec;
  auto has = [&](const char* name) { return fs::exists(dir / name, ec); };
  if (has(core::kRunLockFile)) return "a roformer run directory";
  if (is_prepared_dir(dir.string())) return "a prepared corpus";
  if (has(kTokenizerModelFile) && has(kTokenizerSettingsFile)) return "a tokenizer of `roformer tokenizer train`";
  if (has("config.json") && has("model.safetensors")) return "a model export";
  if (has("manifest.json") && has("trainer_state.json")) return "a checkpoint";
  return "";
}

// Every corpus file under `folder` (recursively, hidden entries skipped), sorted by path.
// Folders that are roformer's own outputs (a run directory, a prepared corpus, a tokenizer, an export,
// a checkpoint) are skipped with a note: a run whose directory lies inside its input folder must
// not read its own records.
std::vector<std::string> folder_files(const std::string& folder) {
  if (is_prepared_dir(folder))
    throw Error(fmt::format("input {} is a prepared corpus (the output of `roformer prepare`), not text to read; "
                            "list the text it was prepared from, or use the folder itself as training data "
                            "(data.train_files)", folder));
  if (const std::string kind = roformer_output_kind(folder); !kind.empty())
    throw Error(fmt::format("input folder {} is {}, not text to read; list the folder of text instead", folder, kind));
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
    if (it->is_directory(ec)) {
      if (const std::string kind = roformer_output_kind(it->path()); !kind.empty()) {
        spdlog::info("input folder {}: skipping {}, {} (roformer's output, not input text)", folder,
                     it->path().string(), kind);
        it.disable_recursion_pending();
      }
      continue;
    }
    if (name == format::kIndexFile || name == format::shard_name(0)) unfinished_prepare = true;
    if (!is_corpus_file_name(name)) continue;
    if (it->is_regular_file(ec)) files.push_back(it->path().string());
    else if (ec)  // a corpus name that cannot be read (a link in a loop): not to be left out silently
      throw Error(fmt::format("cannot read input {}: {} (check where its links lead)", it->path().string(), ec.message()));
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

// A file found, and the listed entry it came from.
struct Found {
  std::string path;
  std::string entry;
};

void append_entry(const std::string& entry, const std::string& listed, std::vector<Found>& files) {
  std::error_code ec;
  if (fs::is_directory(entry, ec)) {
    for (auto& path : folder_files(entry)) files.push_back({std::move(path), listed});
    return;
  }
  if (!fs::exists(entry, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory)  // a symbolic link loop, a component not a folder, ...
      throw Error(fmt::format("cannot read input {}: {} (check the path{})", entry, ec.message(),
                              ec == std::errc::too_many_symbolic_link_levels ? " and where its links lead" : ""));
    if (entry == listed && is_pattern(entry)) {
      for (const auto& path : pattern_matches(entry)) append_entry(path, listed, files);
      return;
    }
    struct stat link {};
    if (::lstat(entry.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
      throw Error("input " + entry + " is a symbolic link to nothing (its target is missing); check where it leads");
    throw Error("input file not found: " + entry + " (check the path)");
  }
  if (!fs::is_regular_file(entry, ec)) throw Error("input is not a regular file: " + entry);
  files.push_back({entry, listed});
}

// A file reached twice (listed twice, through a folder and by name, by two patterns, by a link) would
// be read twice: refused, naming both ways it was reached.
void check_each_file_once(const std::vector<Found>& files) {
  std::map<std::pair<dev_t, ino_t>, const Found*> seen;
  for (const auto& f : files) {
    struct stat st {};
    if (::stat(f.path.c_str(), &st) != 0) continue;  // reported when it is read
    const auto [it, fresh] = seen.emplace(std::make_pair(st.st_dev, st.st_ino), &f);
    if (fresh) continue;
    const Found& first = *it->second;
    auto how = [](const Found& x) { return x.path == x.entry ? "listed itself" : "from " + x.entry; };
    throw Error(fmt::format("input {} would be read twice ({}, and {} as {}); list each file once (to weight a file, "
                            "copy it)", first.path, how(first), how(f), f.path));
  }
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
  std::vector<Found> found;
  for (const auto& entry : inputs) append_entry(entry, entry, found);
  check_each_file_once(found);
  std::vector<std::string> files;
  for (auto& f : found) files.push_back(std::move(f.path));
  return files;
}

nlohmann::json files_signature(const std::vector<std::string>& files) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& f : files) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(f, ec);
    const auto mtime = std::filesystem::last_write_time(f, ec).time_since_epoch().count();
    list.push_back({{"path", core::utf8_or_escaped(std::filesystem::absolute(f).string())},
                    {"size", ec ? 0 : size},
                    {"mtime", static_cast<int64_t>(mtime)}});
  }
  return list;
}

}  // namespace roformer::data
