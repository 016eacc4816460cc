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

#include "core/error.h"
#include "core/file.h"
#include "core/json_read.h"
#include "data/corpus_format.h"

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
  for (auto& p : parts_)
    if (p.index_map.base) ::munmap(p.index_map.base, p.index_map.size);
  if (word_map_.base) ::munmap(word_map_.base, word_map_.size);
}

std::shared_ptr<const PreparedCorpus> PreparedCorpus::open(const std::string& dir, const std::string& expected_fingerprint) {
  return open(std::vector<std::string>{dir}, expected_fingerprint);
}

std::shared_ptr<const PreparedCorpus> PreparedCorpus::open(const std::vector<std::string>& dirs,
                                                           const std::string& expected_fingerprint) {
  if (dirs.empty()) throw Error("no prepared corpus given");
  std::shared_ptr<PreparedCorpus> c(new PreparedCorpus());
  for (const auto& dir : dirs) {
    c->add_part(dir, expected_fingerprint);
    c->dir_ += (c->dir_.empty() ? "" : ", ") + dir;
  }
  return c;
}

namespace {

// What a prepared directory's meta.json says, checked for type and range.
struct PartMeta {
  struct Shard {
    std::string file;
    int64_t tokens = 0;
  };
  std::string fingerprint;
  int64_t vocab = 0, documents = 0, tokens = 0;
  int64_t token_bytes = 0;
  std::vector<Shard> shards;
  SpecialTokens special = SpecialTokens::sentencepiece();
  std::vector<int64_t> special_ids = {0, 1, 2, 3, 4};
};

// The roles and special ids of meta.json ("special_tokens", "special_ids"); absent in a corpus
// prepared before they were recorded, whose tokenizer had SentencePiece's fixed ids.
void read_special_tokens(const core::JsonReader& j, PartMeta& m) {
  if (!j.has("special_tokens")) return;
  const core::JsonReader roles = j.object("special_tokens");
  const auto role = [&](const std::string& name) { return roles.at(name).is_null() ? -1 : roles.count(name); };
  m.special = {static_cast<int32_t>(role("pad")), static_cast<int32_t>(role("unk")), static_cast<int32_t>(role("cls")),
               static_cast<int32_t>(role("sep")), static_cast<int32_t>(role("mask"))};
  m.special_ids.clear();
  for (const auto& id : j.list("special_ids")) {
    if (!id.is_number_unsigned()) j.wrong("special_ids", id, "a list of token ids");
    m.special_ids.push_back(id.get<int64_t>());
  }
}

PartMeta read_part_meta(const std::string& dir, const std::string& expected_fingerprint) {
  const fs::path meta_path = fs::path(dir) / format::kMetaFile;
  if (!fs::exists(meta_path))
    throw Error("no prepared corpus in " + dir + " (meta.json missing: prepare was never run there or did not finish); run `roformer prepare`");
  const std::string path = meta_path.string(), advice = "re-run `roformer prepare`";
  const nlohmann::json meta = core::parse_json(core::read_file(path, "meta.json"), path, advice);
  const core::JsonReader j(meta, path, advice);
  if (j.string("format") != "roformer-prepared") j.wrong("format", "\"roformer-prepared\" (a corpus `roformer prepare` wrote)");
  PartMeta m;
  m.fingerprint = j.string("tokenizer_fingerprint");
  m.vocab = j.count("vocab_size");
  m.documents = j.count("num_documents");
  m.tokens = j.count("num_tokens");
  m.token_bytes = j.integer("token_bytes");
  for (const auto& shard : j.objects("shards")) {
    m.shards.push_back({shard.string("file"), shard.count("tokens")});
    const std::string& name = m.shards.back().file;
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      throw Error("shard name '" + name + "' is not a file name in " + dir + "; " + advice);
  }
  read_special_tokens(j, m);
  if (m.token_bytes != 2 && m.token_bytes != 4)
    throw Error("corrupt " + path + ": token_bytes is " + std::to_string(m.token_bytes) + " (2 or 4 expected); " + advice);
  if (m.vocab < 1 || m.vocab > (int64_t{1} << (8 * m.token_bytes)))
    throw Error("corrupt " + path + ": vocab_size is out of range; " + advice);
  for (const int64_t id : m.special_ids)
    if (id >= m.vocab) throw Error("corrupt " + path + ": a special id is beyond vocab_size; " + advice);
  for (const int32_t id : {m.special.pad, m.special.unk, m.special.cls, m.special.sep, m.special.mask})
    if (id >= m.vocab) throw Error("corrupt " + path + ": a special token's id is beyond vocab_size; " + advice);
  if (!expected_fingerprint.empty() && expected_fingerprint != m.fingerprint)
    throw Error("the prepared corpus in " + dir + " was encoded with tokenizer " + m.fingerprint +
                ", but the tokenizer in use has fingerprint " + expected_fingerprint +
                "; re-run `roformer prepare` with this tokenizer (or use the tokenizer it was prepared with)");
  return m;
}

// One byte per id of the part's vocabulary: 1 for its special ids and its roles' ids.
std::vector<uint8_t> special_id_flags(const PartMeta& m) {
  std::vector<uint8_t> flags(static_cast<size_t>(m.vocab), 0);
  for (const int64_t id : m.special_ids) flags[static_cast<size_t>(id)] = 1;
  for (const int32_t id : {m.special.pad, m.special.unk, m.special.cls, m.special.sep, m.special.mask})
    if (id >= 0) flags[static_cast<size_t>(id)] = 1;
  return flags;
}

}  // namespace

// Maps and checks one directory's files; they follow the parts before it in the stream.
void PreparedCorpus::add_part(const std::string& dir, const std::string& expected_fingerprint) {
  const fs::path root(dir);
  const PartMeta m = read_part_meta(dir, expected_fingerprint);
  const std::string& fingerprint = m.fingerprint;
  const int64_t vocab = m.vocab, documents = m.documents, tokens = m.tokens;
  const int token_bytes = static_cast<int>(m.token_bytes);
  if (parts_.empty()) {
    fingerprint_ = fingerprint;
    vocab_size_ = vocab;
    token_bytes_ = token_bytes;
    special_ = m.special;
    special_ids_ = special_id_flags(m);
    const MappedFile words = map_checked(root / format::kWordStartsFile, kWordMagic, 1, fingerprint_);
    word_map_ = {words.base, words.size};
    word_starts_ = static_cast<const uint8_t*>(words.base) + sizeof(FileHeader);
    if (static_cast<int64_t>(words.header.count) != vocab_size_)
      throw Error("word_starts.bin in " + dir + " disagrees with meta.json; re-run `roformer prepare`");
  } else if (fingerprint != fingerprint_ || vocab != vocab_size_ || token_bytes != token_bytes_) {
    throw Error("the prepared corpora " + dir_ + " and " + dir + " were encoded with different tokenizers (" +
                fingerprint_ + " and " + fingerprint + "); prepare every part with one tokenizer");
  }

  Part part;
  part.dir = dir;
  part.first_document = num_documents_;
  part.first_token = num_tokens_;
  part.num_documents = documents;
  part.num_tokens = tokens;
  const MappedFile index = map_checked(root / format::kIndexFile, kIndexMagic, 8, fingerprint);
  part.index_map = {index.base, index.size};
  part.offsets = reinterpret_cast<const uint64_t*>(static_cast<const uint8_t*>(index.base) + sizeof(FileHeader));
  parts_.push_back(part);  // owned from here on (unmapped by the destructor)
  if (static_cast<int64_t>(index.header.count) != documents + 1 || static_cast<int64_t>(part.offsets[documents]) != tokens)
    throw Error("document index in " + dir + " disagrees with meta.json; re-run `roformer prepare`");

  int64_t first = part.first_token;
  parts_.back().first_shard = shards_.size();
  for (const auto& s : m.shards) {
    const std::string& name = s.file;
    const MappedFile f = map_checked(root / name, kShardMagic, static_cast<uint32_t>(token_bytes_), fingerprint_);
    Shard shard;
    shard.map = {f.base, f.size};
    shard.tokens = static_cast<const uint8_t*>(f.base) + sizeof(FileHeader);
    shard.first_token = first;
    shard.num_tokens = static_cast<int64_t>(f.header.count);
    shards_.push_back(shard);  // owned from here on (unmapped by the destructor)
    if (shard.num_tokens != s.tokens)
      throw Error("shard " + (root / name).string() + " disagrees with meta.json; re-run `roformer prepare`");
    check_token_ids(shards_.back(), (root / name).string(), dir);
    first += shard.num_tokens;
  }
  parts_.back().end_shard = shards_.size();
  if (first - part.first_token != tokens)
    throw Error("the shards in " + dir + " hold fewer tokens than meta.json says; re-run `roformer prepare`");
  check_document_index(parts_.back());
  num_documents_ += documents;
  num_tokens_ += tokens;
}

// Every id below vocab_size: checked once here, so a damaged shard is named when the corpus is
// opened instead of failing inside a training step (the embedding lookup) hours later.
void PreparedCorpus::check_token_ids(const Shard& shard, const std::string& path, const std::string& dir) const {
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
                ", beyond the vocabulary of " + std::to_string(vocab_size_) + " ids in " + dir +
                "/meta.json: the shard is damaged or was written for another tokenizer; re-run `roformer prepare`");
}

// Offsets start at 0, never decrease, end at the part's token count, and no document crosses a
// shard boundary (copy_tokens reads a document from one shard).
void PreparedCorpus::check_document_index(const Part& part) const {
  const std::string hint = "; re-run `roformer prepare` into " + part.dir;
  const uint64_t* offsets = part.offsets;
  if (offsets[0] != 0) throw Error("document index in " + part.dir + " does not start at token 0" + hint);
  size_t shard = part.first_shard;
  // The end of a shard, relative to the part's first token.
  auto shard_end = [&](size_t s) { return static_cast<uint64_t>(shards_[s].first_token - part.first_token + shards_[s].num_tokens); };
  for (int64_t i = 0; i < part.num_documents; ++i) {
    const uint64_t begin = offsets[i], end = offsets[i + 1];
    if (end < begin || end > static_cast<uint64_t>(part.num_tokens))
      throw Error("document index in " + part.dir + " is corrupt at document " + std::to_string(i) + hint);
    while (shard < part.end_shard && begin >= shard_end(shard)) ++shard;
    if (end > begin && (shard == part.end_shard || end > shard_end(shard)))
      throw Error("document index in " + part.dir + ": document " + std::to_string(i) + " crosses a shard boundary" + hint);
  }
}

const PreparedCorpus::Shard& PreparedCorpus::shard_of(int64_t token) const {
  if (shards_.size() == 1) return shards_[0];
  auto it = std::upper_bound(shards_.begin(), shards_.end(), token,
                             [](int64_t t, const Shard& s) { return t < s.first_token; });
  return *(it - 1);
}

int64_t PreparedCorpus::document_at(int64_t token) const {
  // The last part starting at or before `token`, then the last document there starting at or before it.
  auto part = std::upper_bound(parts_.begin(), parts_.end(), token, [](int64_t t, const Part& p) { return t < p.first_token; });
  const Part& p = *(part == parts_.begin() ? part : part - 1);
  const uint64_t* end = p.offsets + p.num_documents + 1;
  const uint64_t* it = std::upper_bound(p.offsets, end, static_cast<uint64_t>(token - p.first_token));
  return p.first_document + static_cast<int64_t>(it - p.offsets) - 1;
}

void PreparedCorpus::copy_tokens(int64_t doc, int64_t offset, int64_t count, int64_t* out) const {
  const int64_t start = document_offset(doc) + offset;
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
