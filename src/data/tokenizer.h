// The tokenizer of a run: one interface, two implementations.
//
//   SentencePiece   a .model file, as `roformer tokenizer train` writes it (data/sentencepiece_tokenizer.h):
//                   [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, never produced from text
//   tokenizer.json  a Hugging Face `tokenizers` file (data/hf_tokenizer/hf_tokenizer.h): its
//                   normalizer, pre-tokenizer, model (WordPiece, BPE, Unigram) and post-processor,
//                   giving the ids `tokenizers` gives, its special tokens where the file (and a
//                   tokenizer_config.json or special_tokens_map.json beside it) puts them
//
// Whatever the implementation, a Tokenizer says which ids play the special roles (SpecialTokens:
// the loader's [CLS]/[SEP]/[PAD] and masking, fill-mask's mask, the export), which ids are special
// (never masked, never a random replacement), which pieces begin a word (whole-word masking), and
// its fingerprint: FNV-1a 64 of its file's bytes (a tokenizer.json's followed by its special ids),
// stored with prepared data and checkpoints so data encoded by another tokenizer is refused.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roformer::data {

// The ids of the special roles; -1 where the tokenizer has none.
struct SpecialTokens {
  int32_t pad = -1, unk = -1, cls = -1, sep = -1, mask = -1;

  // The fixed ids of roformer's SentencePiece tokenizers: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4.
  static SpecialTokens sentencepiece() { return {0, 1, 2, 3, 4}; }
  // "pad=0 unk=1 cls=2 sep=3 mask=4" (an absent role as "unk=none").
  std::string describe() const;
  // The roles masked-language-model training needs (cls, sep, pad, mask) that are missing: "" when
  // none, else their names ("mask, pad").
  std::string missing_for_mlm() const;
  bool operator==(const SpecialTokens& o) const {
    return pad == o.pad && unk == o.unk && cls == o.cls && sep == o.sep && mask == o.mask;
  }
};

// One implementation (SentencePiece or tokenizer.json). Thread-safe: encode runs on many threads.
class TokenizerBackend {
 public:
  virtual ~TokenizerBackend() = default;
  // The ids of `text` (valid UTF-8), without special tokens around them.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // `ids` with the tokenizer's special tokens around them (its post-processor; SentencePiece: [CLS] [SEP]).
  virtual std::vector<int32_t> add_special_tokens(const std::vector<int32_t>& ids) const = 0;
  // The text of `ids`, special tokens left out.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The piece (token string) of an id in [0, vocab_size()); "" for an id with none.
  virtual std::string id_to_piece(int32_t id) const = 0;
  // One more than the highest id.
  virtual int64_t vocab_size() const = 0;
  virtual SpecialTokens special_tokens() const = 0;
  // Special ids besides the roles (a tokenizer.json's other special added tokens, ids without a piece).
  virtual std::vector<int32_t> other_special_ids() const { return {}; }
  // Whether the piece of an ordinary id begins a word.
  virtual bool is_word_start(int32_t id) const = 0;
  // "SentencePiece unigram", "tokenizer.json BPE", ...
  virtual std::string description() const = 0;
  // The files that hold the tokenizer, (name, bytes), the first the one load() takes; a
  // tokenizer.json's side files written as roformer resolved them.
  virtual std::vector<std::pair<std::string, std::string>> files() const = 0;
};

class Tokenizer {
 public:
  // A SentencePiece .model, a tokenizer.json, or a directory holding one (tokenizer.json preferred).
  // Throws roformer::Error naming the file and what to do when it is missing, unreadable, damaged,
  // or uses what roformer does not implement.
  static Tokenizer load(const std::string& path);

  std::vector<int32_t> encode(std::string_view text) const { return backend_->encode(text); }
  std::vector<int32_t> add_special_tokens(const std::vector<int32_t>& ids) const { return backend_->add_special_tokens(ids); }
  std::string decode(const std::vector<int32_t>& ids) const { return backend_->decode(ids); }
  // Throws roformer::Error for an id outside [0, vocab_size()).
  std::string id_to_piece(int32_t id) const;
  int64_t vocab_size() const { return static_cast<int64_t>(flags_.size()); }
  const SpecialTokens& special_tokens() const { return special_; }
  bool is_special(int32_t id) const { return id >= 0 && id < vocab_size() && (flags_[id] & kSpecialFlag) != 0; }
  // The special ids, ascending (the roles and the tokenizer's other special tokens).
  std::vector<int32_t> special_ids() const;
  // The piece begins a word (SentencePiece's and Metaspace's "▁", byte-level BPE's "Ġ", a WordPiece
  // piece without "##"); special ids are not word starts.
  bool is_word_start(int32_t id) const { return id >= 0 && id < vocab_size() && (flags_[id] & kWordStartFlag) != 0; }
  // One byte per id: 1 for word-start pieces (stored with prepared data for whole-word masking).
  std::vector<uint8_t> word_start_table() const;
  const std::string& fingerprint() const { return fingerprint_; }
  // The file it was loaded from (a directory resolved to its tokenizer.json or tokenizer.model).
  const std::string& model_path() const { return model_path_; }
  std::string description() const { return backend_->description(); }
  std::vector<std::pair<std::string, std::string>> files() const { return backend_->files(); }
  // Writes files() into `dir` (created if needed) and returns the path load() takes.
  std::string save(const std::string& dir) const;
  // Throws roformer::Error naming the file when a role masked-language-model training needs is missing.
  void check_mlm_roles() const;

 private:
  static constexpr uint8_t kWordStartFlag = 1, kSpecialFlag = 2;
  Tokenizer() = default;  // only load() makes one, so a Tokenizer always holds a backend

  std::shared_ptr<const TokenizerBackend> backend_;
  std::string model_path_;
  std::string fingerprint_;
  SpecialTokens special_;
  std::vector<uint8_t> flags_;  // per id: kWordStartFlag, kSpecialFlag
};

// The files a tokenizer is kept in.
constexpr const char* kTokenizerModelFile = "tokenizer.model";       // SentencePiece
constexpr const char* kTokenizerJsonFile = "tokenizer.json";         // Hugging Face tokenizers
constexpr const char* kSpecialTokensMapFile = "special_tokens_map.json";  // beside tokenizer.json
constexpr const char* kTokenizerConfigFile = "tokenizer_config.json";     // beside tokenizer.json

// FNV-1a 64 of the file's bytes as 16 lowercase hex digits. Throws roformer::Error if unreadable.
std::string file_fingerprint(const std::string& path);
// The same of bytes in memory.
std::string bytes_fingerprint(std::string_view bytes);

}  // namespace roformer::data
