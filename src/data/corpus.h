// Corpus preparation (text -> binary token shards, encoded once) and the mmap-backed reader.
//
// A prepared directory holds (docs/data.md has the byte layout):
//   shard_00000.tok ...  header + token ids (uint16 when the vocabulary is < 65536, else uint32)
//   documents.idx        header + num_documents+1 uint64 offsets of each document in the token stream
//   word_starts.bin      header + one byte per vocabulary id (1 = the piece begins a word)
//   meta.json            written last: counts, shards, tokenizer fingerprint, the special tokens'
//                        roles and ids; its presence marks the directory complete
// Every binary file starts with the same 64-byte header (magic, version, dtype, counts, tokenizer
// fingerprint), so a file from another tokenizer or a truncated file is detected on open.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace roformer::data {

// More encoding threads than any machine has cores for is a mistake, not a wish.
constexpr int64_t kMaxPrepareThreads = 1024;

struct PrepareOptions {
  std::string tokenizer_model;            // a tokenizer Tokenizer::load reads (.model, tokenizer.json, a folder)
  std::vector<std::string> inputs;        // files, folders or glob patterns (input_files.h), in order
  std::string out_dir;
  int64_t num_threads = 0;                // encoding threads, at most kMaxPrepareThreads; 0 = hardware
  std::string text_field = "text";        // JSONL field / Parquet column holding the text
  bool progress = true;                   // progress bar on a TTY, periodic log lines otherwise
  int64_t shard_tokens = int64_t{1} << 28;  // tokens per shard at most (a shard ends on a document end)
  // out_dir must be new or empty; one holding a prepared corpus is replaced only with `force` (the
  // old corpus stays whole until the new one is complete); anything else is refused. A caller that
  // owns out_dir (a run's data cache) sets own_out_dir to skip the check.
  bool force = false;
  bool own_out_dir = false;
};

struct PrepareStats {
  int64_t documents = 0, tokens = 0;
  int64_t bytes = 0;       // of the input files, as stored (compressed, Parquet)
  int64_t text_bytes = 0;  // of the text encoded: each paragraph and a newline
  double seconds = 0;
};

// Encodes the inputs into out_dir. Output bytes do not depend on num_threads. Memory is bounded
// (a fixed number of text chunks in flight). Everything is written into a staging directory inside
// out_dir and moved into place only on success, so a failed or interrupted run leaves an existing
// prepared directory untouched. Throws roformer::Error on bad input.
PrepareStats prepare_corpus(const PrepareOptions& options);

class PreparedCorpus {  // mmap-backed, read-only, thread-safe
 public:
  // Throws roformer::Error when missing/corrupt/truncated, or when expected_fingerprint is
  // non-empty and differs.
  static std::shared_ptr<const PreparedCorpus> open(const std::string& dir, const std::string& expected_fingerprint = "");
  // Several prepared directories read as one corpus, their documents in the listed order (a corpus
  // prepared in parts, e.g. on several machines). They must share one tokenizer.
  static std::shared_ptr<const PreparedCorpus> open(const std::vector<std::string>& dirs,
                                                    const std::string& expected_fingerprint = "");
  ~PreparedCorpus();
  PreparedCorpus(const PreparedCorpus&) = delete;
  PreparedCorpus& operator=(const PreparedCorpus&) = delete;

  int64_t num_documents() const { return num_documents_; }
  int64_t num_tokens() const { return num_tokens_; }
  int64_t vocab_size() const { return vocab_size_; }
  const std::string& fingerprint() const { return fingerprint_; }
  // The roles of the tokenizer it was encoded with (meta.json; a corpus prepared before they were
  // recorded has SentencePiece's fixed ids).
  const SpecialTokens& special_tokens() const { return special_; }
  // Special ids are never masked and never drawn as a random replacement.
  bool is_special(int64_t id) const { return id >= 0 && id < vocab_size_ && special_ids_[id] != 0; }
  // The directory, or the directories separated by ", ".
  const std::string& dir() const { return dir_; }

  int64_t document_length(int64_t i) const {
    const Part& p = part_of_document(i);
    const int64_t k = i - p.first_document;
    return static_cast<int64_t>(p.offsets[k + 1] - p.offsets[k]);
  }
  // Offset of document i's first token in the whole token stream (documents are contiguous).
  int64_t document_offset(int64_t i) const {
    const Part& p = part_of_document(i);
    return p.first_token + static_cast<int64_t>(p.offsets[i - p.first_document]);
  }
  // Token ids of document i appended to out.
  void append_document(int64_t i, std::vector<int32_t>& out) const;
  std::vector<int32_t> document(int64_t i) const;
  // Copies `count` tokens of document `doc` from `offset` into out, widened to int64 (hot path of
  // the loader: no allocation).
  void copy_tokens(int64_t doc, int64_t offset, int64_t count, int64_t* out) const;
  // Word-start flag of a vocabulary id (whole-word masking); false for special ids.
  bool is_word_start(int64_t id) const { return id >= 0 && id < vocab_size_ && word_starts_[id] != 0; }
  // The document holding token-stream offset `token` (binary search over the index).
  int64_t document_at(int64_t token) const;

 private:
  PreparedCorpus() = default;
  struct Mapping {
    void* base = nullptr;
    size_t size = 0;
  };
  struct Shard {
    Mapping map;
    const uint8_t* tokens = nullptr;  // first token
    int64_t first_token = 0;          // offset of its first token in the stream
    int64_t num_tokens = 0;
  };
  // One prepared directory: its document index, its place in the stream and its shards.
  struct Part {
    std::string dir;
    Mapping index_map;
    const uint64_t* offsets = nullptr;  // (documents + 1,), relative to first_token
    int64_t first_document = 0, first_token = 0, num_documents = 0, num_tokens = 0;
    size_t first_shard = 0, end_shard = 0;  // its shards: shards_[first_shard, end_shard)
  };
  void add_part(const std::string& dir, const std::string& expected_fingerprint);
  const Part& part_of_document(int64_t doc) const {
    if (parts_.size() == 1) return parts_[0];
    size_t lo = 0, hi = parts_.size() - 1;  // the last part starting at or before doc
    while (lo < hi) {
      const size_t mid = (lo + hi + 1) / 2;
      if (parts_[mid].first_document <= doc) lo = mid; else hi = mid - 1;
    }
    return parts_[lo];
  }
  const Shard& shard_of(int64_t token) const;
  void check_token_ids(const Shard& shard, const std::string& path, const std::string& dir) const;
  void check_document_index(const Part& part) const;

  std::string dir_;
  std::string fingerprint_;
  SpecialTokens special_;
  std::vector<uint8_t> special_ids_;  // (vocab_size,) 1 for a special id
  int64_t num_documents_ = 0, num_tokens_ = 0, vocab_size_ = 0;
  int token_bytes_ = 2;
  std::vector<Shard> shards_;
  std::vector<Part> parts_;
  Mapping word_map_;
  const uint8_t* word_starts_ = nullptr;  // (vocab_size,)
};

// True when `path` is a directory holding a complete prepared corpus (its meta.json).
bool is_prepared_dir(const std::string& path);

}  // namespace roformer::data
