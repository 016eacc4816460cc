// PreparedCorpus: the read-only, mmap-backed view of a prepared directory (written by prepare.cpp).
// Every file's header, size, token ids and the document index are checked on open, so a damaged
// or mixed directory is named then, never read past.
#include "data/corpus.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/corpus_format.h"
#include "data/tokenizer.h"

namespace roformer::data {

namespace fs = std::filesystem;
using format::FileHeader;
using format::kIndexMagic;
using format::kShardMagic;
using format::kWordMagic;

namespace {

struct MappedFile {
  void* base = nullptr;
  size_t size = 0;
  FileHeader header{};
};

// Maps a file and checks its header: magic, version, fingerprint and that the size matches the
// element count (a truncated file is an error, never read past).
MappedFile map_checked(const fs::path& path, const char (&magic)[8], uint32_t dtype_bytes, const std::string& fingerprint) {
  const std::string p = path.string();
  const std::string hint = "; re-run `roformer prepare` into " + path.parent_path().string();
  const int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) throw Error("prepared corpus file missing: " + p + hint);
  struct stat st {};
  ::fstat(fd, &st);
  MappedFile f;
  f.size = static_cast<size_t>(st.st_size);
  if (f.size < sizeof(FileHeader)) {
    ::close(fd);
    throw Error("prepared corpus file " + p + " is truncated (" + std::to_string(f.size) + " bytes, shorter than its header)" + hint);
  }
  f.base = ::mmap(nullptr, f.size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (f.base == MAP_FAILED) throw Error("cannot map " + p + ": " + std::strerror(errno));
  std::memcpy(&f.header, f.base, sizeof(FileHeader));
  auto fail = [&](const std::string& what) {
    ::munmap(f.base, f.size);
    throw Error("prepared corpus file " + p + " " + what + hint);
  };
  if (std::memcmp(f.header.magic, magic, 8) != 0) fail("is not a roformer prepared file (bad magic)");
  if (f.header.version != format::kVersion)
    fail("has format version " + std::to_string(f.header.version) + ", this build reads " + std::to_string(format::kVersion));
  const std::string file_fp(f.header.fingerprint, 16);
  if (file_fp != fingerprint)
    fail("was encoded with tokenizer " + file_fp + " but the directory's meta.json says " + fingerprint +
         " (files from different prepare runs are mixed)");
  if (f.header.dtype_bytes != dtype_bytes)
    fail("has " + std::to_string(f.header.dtype_bytes) + "-byte elements, expected " + std::to_string(dtype_bytes) +
         " (corrupt header)");
  const uint64_t payload = f.size - sizeof(FileHeader);
  if (f.header.count != payload / dtype_bytes || payload % dtype_bytes != 0)
    fail("is truncated or corrupt: " + std::to_string(f.size) + " bytes, its header promises " +
         std::to_string(f.header.count) + " elements of " + std::to_string(dtype_bytes) + " bytes after the header");
  return f;
}

}  // namespace

PreparedCorpus::~PreparedCorpus() {
  for (auto& s : shards_)
    if (s.map.base) ::munmap(s.map.base, s.map.size);
  if (index_map_.base) ::munmap(index_map_.base, index_map_.size);
  if (word_map_.base) ::munmap(word_map_.base, word_map_.size);
}

std::shared_ptr<const PreparedCorpus> PreparedCorpus::open(const std::string& dir, const std::string& expected_fingerprint) {
  const fs::path root(dir);
  const fs::path meta_path = root / format::kMetaFile;
  if (!fs::exists(meta_path))
    throw Error("no prepared corpus in " + dir + " (meta.json missing: prepare was never run there or did not finish); run `roformer prepare`");
  nlohmann::json meta;
  try {
    std::ifstream in(meta_path);
    meta = nlohmann::json::parse(in);
    if (meta.at("format") != "roformer-prepared") throw Error("not a roformer meta.json");
  } catch (const std::exception& e) {
    throw Error("cannot read " + meta_path.string() + ": " + e.what() + "; re-run `roformer prepare`");
  }
  std::shared_ptr<PreparedCorpus> c(new PreparedCorpus());
  c->dir_ = dir;
  try {
    c->fingerprint_ = meta.at("tokenizer_fingerprint").get<std::string>();
    c->vocab_size_ = meta.at("vocab_size").get<int64_t>();
    c->num_documents_ = meta.at("num_documents").get<int64_t>();
    c->num_tokens_ = meta.at("num_tokens").get<int64_t>();
    c->token_bytes_ = meta.at("token_bytes").get<int>();
    if (!meta.at("shards").is_array()) throw Error("\"shards\" is not a list");
    for (const auto& shard : meta.at("shards")) {
      shard.at("file").get<std::string>();
      shard.at("tokens").get<int64_t>();
    }
  } catch (const std::exception& e) {
    throw Error("corrupt " + meta_path.string() + ": " + e.what() + "; re-run `roformer prepare`");
  }
  if (c->token_bytes_ != 2 && c->token_bytes_ != 4)
    throw Error("corrupt " + meta_path.string() + ": token_bytes is " + std::to_string(c->token_bytes_) +
                " (2 or 4 expected); re-run `roformer prepare`");
  if (c->vocab_size_ < Tokenizer::kNumSpecial || c->vocab_size_ > (int64_t{1} << (8 * c->token_bytes_)) ||
      c->num_documents_ < 0 || c->num_tokens_ < 0)
    throw Error("corrupt " + meta_path.string() + ": vocab_size, num_documents or num_tokens is out of range; "
                "re-run `roformer prepare`");
  if (!expected_fingerprint.empty() && expected_fingerprint != c->fingerprint_)
    throw Error("the prepared corpus in " + dir + " was encoded with tokenizer " + c->fingerprint_ +
                ", but the tokenizer in use has fingerprint " + expected_fingerprint +
                "; re-run `roformer prepare` with this tokenizer (or use the tokenizer it was prepared with)");

  const MappedFile index = map_checked(root / format::kIndexFile, kIndexMagic, 8, c->fingerprint_);
  c->index_map_ = {index.base, index.size};
  c->offsets_ = reinterpret_cast<const uint64_t*>(static_cast<const uint8_t*>(index.base) + sizeof(FileHeader));
  if (static_cast<int64_t>(index.header.count) != c->num_documents_ + 1 ||
      static_cast<int64_t>(c->offsets_[c->num_documents_]) != c->num_tokens_)
    throw Error("document index in " + dir + " disagrees with meta.json; re-run `roformer prepare`");
  const MappedFile words = map_checked(root / format::kWordStartsFile, kWordMagic, 1, c->fingerprint_);
  c->word_map_ = {words.base, words.size};
  c->word_starts_ = static_cast<const uint8_t*>(words.base) + sizeof(FileHeader);
  if (static_cast<int64_t>(words.header.count) != c->vocab_size_)
    throw Error("word_starts.bin in " + dir + " disagrees with meta.json; re-run `roformer prepare`");

  int64_t first = 0;
  for (const auto& s : meta.at("shards")) {
    const std::string name = s.at("file").get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      throw Error("corrupt " + meta_path.string() + ": shard name '" + name + "' is not a file name in " + dir +
                  "; re-run `roformer prepare`");
    const MappedFile f = map_checked(root / name, kShardMagic, static_cast<uint32_t>(c->token_bytes_), c->fingerprint_);
    Shard shard;
    shard.map = {f.base, f.size};
    shard.tokens = static_cast<const uint8_t*>(f.base) + sizeof(FileHeader);
    shard.first_token = first;
    shard.num_tokens = static_cast<int64_t>(f.header.count);
    c->shards_.push_back(shard);  // owned from here on (unmapped by the destructor)
    if (shard.num_tokens != s.at("tokens").get<int64_t>())
      throw Error("shard " + (root / name).string() + " disagrees with meta.json; re-run `roformer prepare`");
    c->check_token_ids(c->shards_.back(), (root / name).string());
    first += shard.num_tokens;
  }
  if (first != c->num_tokens_) throw Error("the shards in " + dir + " hold fewer tokens than meta.json says; re-run `roformer prepare`");
  c->check_document_index();
  return c;
}

// Every id below vocab_size: checked once here, so a damaged shard is named when the corpus is
// opened instead of failing inside a training step (the embedding lookup) hours later.
void PreparedCorpus::check_token_ids(const Shard& shard, const std::string& path) const {
  int64_t bad = -1;
  uint32_t id = 0;
  const auto limit = static_cast<uint64_t>(vocab_size_);
  if (token_bytes_ == 2) {
    const auto* p = reinterpret_cast<const uint16_t*>(shard.tokens);
    for (int64_t k = 0; k < shard.num_tokens && bad < 0; ++k)
      if (p[k] >= limit) bad = k, id = p[k];
  } else {
    const auto* p = reinterpret_cast<const uint32_t*>(shard.tokens);
    for (int64_t k = 0; k < shard.num_tokens && bad < 0; ++k)
      if (p[k] >= limit) bad = k, id = p[k];
  }
  if (bad >= 0)
    throw Error("shard " + path + " holds token id " + std::to_string(id) + " at token " + std::to_string(bad) +
                ", beyond the vocabulary of " + std::to_string(vocab_size_) + " ids in " + dir_ +
                "/meta.json: the shard is damaged or was written for another tokenizer; re-run `roformer prepare`");
}

// Offsets start at 0, never decrease, end at num_tokens, and no document crosses a shard boundary
// (copy_tokens reads a document from one shard).
void PreparedCorpus::check_document_index() const {
  const std::string hint = "; re-run `roformer prepare` into " + dir_;
  if (offsets_[0] != 0) throw Error("document index in " + dir_ + " does not start at token 0" + hint);
  size_t shard = 0;
  for (int64_t i = 0; i < num_documents_; ++i) {
    const uint64_t begin = offsets_[i], end = offsets_[i + 1];
    if (end < begin || end > static_cast<uint64_t>(num_tokens_))
      throw Error("document index in " + dir_ + " is corrupt at document " + std::to_string(i) + hint);
    while (shard < shards_.size() &&
           begin >= static_cast<uint64_t>(shards_[shard].first_token + shards_[shard].num_tokens))
      ++shard;
    if (end > begin && (shard == shards_.size() ||
                        end > static_cast<uint64_t>(shards_[shard].first_token + shards_[shard].num_tokens)))
      throw Error("document index in " + dir_ + ": document " + std::to_string(i) + " crosses a shard boundary" + hint);
  }
}

const PreparedCorpus::Shard& PreparedCorpus::shard_of(int64_t token) const {
  if (shards_.size() == 1) return shards_[0];
  auto it = std::upper_bound(shards_.begin(), shards_.end(), token,
                             [](int64_t t, const Shard& s) { return t < s.first_token; });
  return *(it - 1);
}

int64_t PreparedCorpus::document_at(int64_t token) const {
  const uint64_t* end = offsets_ + num_documents_ + 1;
  const uint64_t* it = std::upper_bound(offsets_, end, static_cast<uint64_t>(token));
  return static_cast<int64_t>(it - offsets_) - 1;
}

void PreparedCorpus::copy_tokens(int64_t doc, int64_t offset, int64_t count, int64_t* out) const {
  const int64_t start = static_cast<int64_t>(offsets_[doc]) + offset;
  const Shard& s = shard_of(start);  // documents never cross shards
  const int64_t local = start - s.first_token;
  if (token_bytes_ == 2) {
    const auto* p = reinterpret_cast<const uint16_t*>(s.tokens) + local;
    for (int64_t k = 0; k < count; ++k) out[k] = p[k];
  } else {
    const auto* p = reinterpret_cast<const uint32_t*>(s.tokens) + local;
    for (int64_t k = 0; k < count; ++k) out[k] = p[k];
  }
}

void PreparedCorpus::append_document(int64_t i, std::vector<int32_t>& out) const {
  if (i < 0 || i >= num_documents_) throw Error("document " + std::to_string(i) + " out of range");
  const int64_t len = document_length(i);
  std::vector<int64_t> tmp(static_cast<size_t>(len));
  copy_tokens(i, 0, len, tmp.data());
  out.insert(out.end(), tmp.begin(), tmp.end());
}

std::vector<int32_t> PreparedCorpus::document(int64_t i) const {
  std::vector<int32_t> out;
  append_document(i, out);
  return out;
}

bool is_prepared_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / format::kMetaFile, ec);
}

}  // namespace roformer::data
