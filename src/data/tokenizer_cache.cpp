// The tokenizer cache of runs; see data/tokenizer_cache.h.
#include "data/tokenizer_cache.h"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/file.h"
#include "core/hash.h"
#include "data/input_files.h"
#include "data/tokenizer.h"

namespace roformer::data {
namespace fs = std::filesystem;

namespace {

// The files of an entry, in the order they are written; training.json last marks it complete.
constexpr const char* kEntryFiles[] = {kTokenizerModelFile, kTokenizerVocabFile, kTokenizerSettingsFile};

}  // namespace

std::optional<fs::path> tokenizer_cache_dir() {
  if (const char* env = std::getenv("ROFORMER_TOKENIZER_CACHE"); env != nullptr) {
    const std::string value = env;
    if (value == "off" || value.empty()) return std::nullopt;
    return fs::path(value);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/')
    return fs::path(xdg) / "roformer" / "tokenizers";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0')
    return fs::path(home) / ".cache" / "roformer" / "tokenizers";
  return std::nullopt;
}

std::string tokenizer_cache_key(const TokenizerTrainOptions& options) {
  const std::string text = training_settings(options) + "\n" + files_signature(expand_inputs(options.inputs)).dump();
  core::Hasher hasher;
  hasher.update(text.data(), text.size());
  return hasher.hex_digest();
}

std::optional<std::string> restore_cached_tokenizer(const fs::path& cache, const std::string& key,
                                                    const std::string& out_dir) {
  const fs::path entry = cache / key;
  std::error_code ec;
  for (const char* name : kEntryFiles)
    if (!fs::is_regular_file(entry / name, ec)) return std::nullopt;
  try {
    Tokenizer::load((entry / kTokenizerModelFile).string());  // a damaged entry is not used
    fs::create_directories(out_dir);
    for (const char* name : kEntryFiles)
      core::write_file_atomic((fs::path(out_dir) / name).string(),
                              core::read_file((entry / name).string(), "cached tokenizer"));
  } catch (const std::exception& e) {
    // The cache's own folder: a damaged entry is removed, so the tokenizer trained now takes its place.
    spdlog::warn("tokenizer cache: the entry {} cannot be used ({}): removed it; training the tokenizer instead",
                 entry.string(), e.what());
    core::remove_tree(entry.string(), ec);
    return std::nullopt;
  }
  return (fs::path(out_dir) / kTokenizerModelFile).string();
}

void store_cached_tokenizer(const fs::path& cache, const std::string& key, const std::string& out_dir) {
  const fs::path entry = cache / key;
  std::error_code ec;
  if (fs::exists(entry, ec)) return;
  // Staged beside the entries and renamed into place: a reader never sees half an entry.
  const fs::path staging = cache / fmt::format(".staging-{}-{}", key, ::getpid());
  try {
    fs::create_directories(staging);
    for (const char* name : kEntryFiles)
      core::write_file_checked((staging / name).string(),
                               core::read_file((fs::path(out_dir) / name).string(), "trained tokenizer"));
    fs::rename(staging, entry);  // another run storing the same key first: this one is dropped below
  } catch (const std::exception& e) {
    if (!fs::exists(entry / kTokenizerSettingsFile, ec))
      spdlog::warn("tokenizer cache: cannot keep the tokenizer in {} ({}); the next run trains its own", entry.string(),
                   e.what());
  }
  core::remove_tree(staging.string(), ec);
}

}  // namespace roformer::data
