// The prepared-data cache check: a run's data opened as prepared, or (re-)prepared into the run's
// cache when the signature of its input files, text field or tokenizer changed or the copy is
// damaged; see prepared_cache.h.
#include "data/prepared_cache.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/file.h"
#include "core/hash.h"
#include "data/input_files.h"

namespace roformer::data {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A signature of the files of a prepared directory (after expanding folders and patterns) and how
// they were read, so an edited, added, removed or replaced file is prepared again.
json sources_signature(const std::vector<std::string>& files, const std::string& fingerprint,
                       const std::string& text_field) {
  return {{"files", files_signature(files)}, {"tokenizer_fingerprint", fingerprint}, {"text_field", text_field}};
}

// The signature as recorded after preparing: each file also with a hash of its content, so a file
// touched but not changed (a new modification time, the same bytes) is recognised as the same.
json signature_with_hashes(json signature, const std::vector<std::string>& files) {
  for (size_t i = 0; i < files.size(); ++i) signature["files"][i]["hash"] = core::file_checksum(files[i]);
  return signature;
}

// Whether the recorded signature describes the current files: equal, but for modification times
// of files whose size and content hash (when recorded) are unchanged. `touched` is set when such a
// file was found; `recorded` then carries the new times (its hashes kept), to be written back.
bool same_sources(json& recorded, const json& current, const std::vector<std::string>& files, bool& touched) {
  touched = false;
  if (!recorded.is_object() || !recorded.contains("files") || !recorded["files"].is_array() ||
      recorded["files"].size() != files.size())
    return false;
  json plain = recorded;  // without the hashes, to compare with `current`
  for (size_t i = 0; i < files.size(); ++i) {
    json& r = recorded["files"][i];
    const json& c = current["files"][i];
    if (!r.is_object()) return false;
    if (r.value("path", json()) == c["path"] && r.value("size", json()) == c["size"] &&
        r.value("mtime", json()) != c["mtime"] && r.contains("hash")) {
      try {
        if (r["hash"] != core::file_checksum(files[i])) return false;
      } catch (const Error&) {
        return false;
      }
      r["mtime"] = c["mtime"];
      touched = true;
    }
    plain["files"][i] = r;
    plain["files"][i].erase("hash");
  }
  return plain == current;
}

// The recorded signature; null when it cannot be read or parsed (the data is then prepared again).
// Signatures written before the text field was recorded read the default field, "text".
json read_signature(const std::string& path) {
  try {
    json signature = json::parse(core::read_file(path));
    if (signature.is_object() && !signature.contains("text_field")) signature["text_field"] = "text";
    return signature;
  } catch (const std::exception&) {
    return json();
  }
}

// Prepared directories are opened as they are, and together only with each other.
size_t count_prepared(const PreparedDataRequest& r, const std::string& key) {
  size_t prepared = 0;
  for (const auto& f : r.files) prepared += is_prepared_dir(f) ? 1 : 0;
  if (prepared > 0 && prepared < r.files.size())
    throw Error(fmt::format("{} mixes prepared directories with text files; list either prepared directories only "
                            "(read as one corpus) or text, JSONL and Parquet files, folders and patterns only", key));
  return prepared;
}

// The run's cache `dir` when it was prepared from these very sources (a touched file with the same
// content included) and opens intact; null (saying why) when it must be prepared again.
std::shared_ptr<const PreparedCorpus> reuse_cache(const PreparedDataRequest& r, const std::string& key,
                                                  const std::string& dir, const std::string& signature_path,
                                                  const json& signature, const std::vector<std::string>& files,
                                                  const Tokenizer& tokenizer) {
  json recorded = read_signature(signature_path);
  bool touched = false;
  if (same_sources(recorded, signature, files, touched)) {
    if (touched) {  // touched, not changed: the same data, recorded with the new times
      spdlog::info("{}: a file's modification time changed but not its content; using the prepared data as it is",
                   key);
      core::write_file_atomic(signature_path, recorded.dump(2) + "\n");
    }
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
    spdlog::warn("{} changed since {} was prepared for this run (a file's size, modification time or path, or the "
                 "list of files): preparing again. The resumed run is no longer an exact continuation of the "
                 "original: it reads other documents from the restored data position", key, dir);
  } else {
    spdlog::info("the {} files, data.text_field or the tokenizer changed since {} was prepared; preparing again",
                 r.name, dir);
  }
  return nullptr;
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
  if (const size_t prepared = count_prepared(r, key); prepared > 0) {
    auto corpus = with_key([&] { return PreparedCorpus::open(r.files, tokenizer.fingerprint()); });
    spdlog::info("{} data: {} prepared director{} ({} documents, {} tokens)", r.name, prepared, prepared == 1 ? "y" : "ies",
                 corpus->num_documents(), corpus->num_tokens());
    return corpus;
  }
  const std::vector<std::string> files = with_key([&] { return expand_inputs(r.files); });

  const std::string dir = (fs::path(r.cache_dir) / r.name).string();
  const std::string signature_path = (fs::path(r.cache_dir) / (r.name + ".sources.json")).string();
  const json signature = sources_signature(files, tokenizer.fingerprint(), r.text_field);
  if (is_prepared_dir(dir) && fs::exists(signature_path))
    if (auto corpus = reuse_cache(r, key, dir, signature_path, signature, files, tokenizer)) return corpus;
  spdlog::info("preparing {} data ({} file(s)) into {}", r.name, files.size(), dir);
  PrepareOptions o;
  o.tokenizer_model = tokenizer.model_path();
  o.inputs = files;
  o.out_dir = dir;
  o.text_field = r.text_field;
  o.own_out_dir = true;  // the run's cache: replaced when its sources change
  const auto stats = with_key([&] { return prepare_corpus(o); });
  spdlog::info("prepared {} documents, {} tokens in {:.1f}s", stats.documents, stats.tokens, stats.seconds);
  core::write_file_atomic(signature_path, signature_with_hashes(signature, files).dump(2) + "\n");
  return with_key([&] { return PreparedCorpus::open(dir, tokenizer.fingerprint()); });
}

}  // namespace roformer::data
