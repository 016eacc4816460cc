// The prepared-data cache check: a run's data opened as prepared, or (re-)prepared into the run's
// cache when the signature of its text files or tokenizer changed or the copy is damaged; see
// prepared_cache.h.
#include "data/prepared_cache.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/file.h"

namespace roformer::data {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A signature of the inputs of a prepared directory, so edited or replaced files are re-prepared.
json sources_signature(const std::vector<std::string>& files, const std::string& fingerprint) {
  json list = json::array();
  for (const auto& f : files) {
    std::error_code ec;
    const auto size = fs::file_size(f, ec);
    const auto mtime = fs::last_write_time(f, ec).time_since_epoch().count();
    list.push_back({{"path", fs::absolute(f).string()}, {"size", ec ? 0 : size}, {"mtime", static_cast<int64_t>(mtime)}});
  }
  return {{"files", list}, {"tokenizer_fingerprint", fingerprint}};
}

// The recorded signature; null when it cannot be read or parsed (the data is then prepared again).
json read_signature(const std::string& path) {
  try {
    return json::parse(core::read_file(path));
  } catch (const std::exception&) {
    return json();
  }
}

// Each listed path must be a text/JSONL file; a directory is only accepted as the one prepared corpus.
void check_listed_files(const PreparedDataRequest& r, const std::string& key) {
  for (const auto& f : r.files) {
    std::error_code ec;
    if (!fs::exists(f, ec))
      throw Error(fmt::format("data file '{}' does not exist ({}); fix the path or prepare the corpus first "
                              "(data/prepare_brown.sh)", f, key));
    if (fs::is_directory(f, ec)) {
      if (is_prepared_dir(f))
        throw Error(fmt::format("{}: '{}' is a prepared directory, which must be the only entry of {}; list either "
                                "it alone or text files", key, f, key));
      throw Error(fmt::format("{}: '{}' is a directory but not a prepared corpus (no meta.json: `roformer prepare` "
                              "never finished there); list the text or JSONL files themselves, or prepare it with "
                              "`roformer prepare --out {}`", key, f, f));
    }
  }
}

}  // namespace

std::shared_ptr<const PreparedCorpus> open_prepared_data(const PreparedDataRequest& r, const Tokenizer& tokenizer) {
  const std::string key = "data." + r.name + "_files";
  // Errors of the data layer name the file; the key is added here.
  auto with_key = [&](auto&& fn) {
    try {
      return fn();
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", key, e.what()));
    }
  };
  if (r.files.size() == 1 && is_prepared_dir(r.files[0]))
    return with_key([&] { return PreparedCorpus::open(r.files[0], tokenizer.fingerprint()); });
  check_listed_files(r, key);

  const std::string dir = (fs::path(r.cache_dir) / r.name).string();
  const std::string signature_path = (fs::path(r.cache_dir) / (r.name + ".sources.json")).string();
  const json signature = sources_signature(r.files, tokenizer.fingerprint());
  if (is_prepared_dir(dir) && fs::exists(signature_path)) {
    if (read_signature(signature_path) == signature) {
      try {
        auto corpus = PreparedCorpus::open(dir, tokenizer.fingerprint());
        spdlog::info("using prepared {} data in {}", r.name, dir);
        return corpus;
      } catch (const Error& e) {
        // The run's own cache: it can be rebuilt from the listed files, so nobody needs to step in.
        spdlog::warn("the prepared {} data in {} is damaged ({}); preparing it again from {}", r.name, dir, e.what(),
                     key);
      }
    } else if (r.resuming && r.name == "train") {
      spdlog::warn("{} changed since {} was prepared for this run (size, modification time or path): preparing "
                   "again. The resumed run is no longer an exact continuation of the original: it reads other "
                   "documents from the restored data position", key, dir);
    } else {
      spdlog::info("the {} files or the tokenizer changed since {} was prepared; preparing again", r.name, dir);
    }
  }
  spdlog::info("preparing {} data ({} file(s)) into {}", r.name, r.files.size(), dir);
  PrepareOptions o;
  o.tokenizer_model = tokenizer.model_path();
  o.inputs = r.files;
  o.out_dir = dir;
  o.jsonl_field = r.jsonl_field;
  const auto stats = with_key([&] { return prepare_corpus(o); });
  spdlog::info("prepared {} documents, {} tokens in {:.1f}s", stats.documents, stats.tokens, stats.seconds);
  core::write_file_atomic(signature_path, signature.dump(2) + "\n");
  return with_key([&] { return PreparedCorpus::open(dir, tokenizer.fingerprint()); });
}

}  // namespace roformer::data
