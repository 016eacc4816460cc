// The on-disk format of a prepared corpus, shared by its writer (prepare.cpp) and its reader
// (corpus.cpp): the 64-byte header every binary file starts with, the magics and the file names.
// docs/data.md has the byte layout; changing anything here is a new format version.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace roformer::data::format {

constexpr uint32_t kVersion = 1;
constexpr char kShardMagic[8] = {'R', 'F', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr char kIndexMagic[8] = {'R', 'F', 'D', 'O', 'C', 'I', 'D', 'X'};
constexpr char kWordMagic[8] = {'R', 'F', 'W', 'O', 'R', 'D', 'S', 'T'};
constexpr const char* kIndexFile = "documents.idx";
constexpr const char* kWordStartsFile = "word_starts.bin";
constexpr const char* kMetaFile = "meta.json";

// The 64-byte header at the start of every binary file (little-endian).
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t dtype_bytes;    // bytes per element: 2/4 for token ids, 8 for offsets, 1 for flags
  uint64_t count;          // elements after the header
  uint64_t num_documents;  // documents covered by this file
  uint64_t vocab_size;
  char fingerprint[16];    // tokenizer fingerprint, 16 hex digits
  uint32_t shard_index;
  uint32_t reserved;
};
static_assert(sizeof(FileHeader) == 64, "header layout is part of the file format");

inline FileHeader make_header(const char (&magic)[8], uint32_t dtype_bytes, uint64_t count, uint64_t docs,
                              uint64_t vocab, const std::string& fingerprint, uint32_t shard_index) {
  FileHeader h{};
  std::memcpy(h.magic, magic, 8);
  h.version = kVersion;
  h.dtype_bytes = dtype_bytes;
  h.count = count;
  h.num_documents = docs;
  h.vocab_size = vocab;
  std::memcpy(h.fingerprint, fingerprint.data(), std::min<size_t>(16, fingerprint.size()));
  h.shard_index = shard_index;
  return h;
}

// "shard_00000.tok", "shard_00001.tok", ...
inline std::string shard_name(int64_t index) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard_%05lld.tok", static_cast<long long>(index));
  return name;
}

}  // namespace roformer::data::format
