// The models of a tokenizer.json: WordPiece, BPE and Unigram, each turning one pre-tokenized piece
// into ids exactly as tokenizers' models/*/ does (greedy longest match; merges by rank; Viterbi over
// the pieces' scores).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/json_read.h"

namespace roformer::data::hf {

// token -> id, looked up by string_view (the tokens are kept in a deque, so the keys stay valid).
class VocabMap {
 public:
  // Later insertions of a token replace earlier ones (a JSON object or list with a repeated token).
  void insert(std::string token, int32_t id);
  int32_t find(std::string_view token) const {
    const auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
  }
  size_t size() const { return ids_.size(); }
  // The tokens by id (ids without a token hold nullptr): for id_to_token.
  std::vector<const std::string*> by_id() const;

 private:
  std::deque<std::string> tokens_;
  std::unordered_map<std::string_view, int32_t> ids_;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `piece` (not empty). Throws roformer::Error where tokenizers fails (an
  // unknown character and no unk token to give it).
  virtual void tokenize(std::string_view piece, std::vector<int32_t>& ids) const = 0;
  int32_t token_to_id(std::string_view token) const { return vocab_.find(token); }
  // The token of `id`, or nullptr when the model has none.
  const std::string* id_to_token(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < by_id_.size() ? by_id_[id] : nullptr;
  }
  // The number of tokens (tokenizers' get_vocab_size: ids above it may be missing in between).
  size_t size() const { return vocab_.size(); }
  // One more than the highest id.
  int32_t id_end() const { return static_cast<int32_t>(by_id_.size()); }
  // The unknown token, "" when the model has none.
  virtual std::string unk_token() const = 0;
  // The prefix of a piece that continues a word ("##"), "" when the model marks none.
  virtual std::string continuing_prefix() const { return ""; }
  // "WordPiece", "BPE", "Unigram".
  virtual std::string type() const = 0;

 protected:
  // Reads "vocab", an object of token: id (WordPiece's, BPE's), into vocab_ and by_id_.
  void read_vocab_object(const core::JsonReader& j);
  void finish_vocab() { by_id_ = vocab_.by_id(); }
  VocabMap vocab_;
  std::vector<const std::string*> by_id_;
};

// Reads the "model" object; throws a JsonReader error naming what it refuses (another type, BPE
// dropout, merges of tokens not in the vocabulary).
std::unique_ptr<Model> parse_model(const core::JsonReader& j);

std::unique_ptr<Model> make_wordpiece(const core::JsonReader& j);
std::unique_ptr<Model> make_bpe(const core::JsonReader& j);
std::unique_ptr<Model> make_unigram(const core::JsonReader& j);

}  // namespace roformer::data::hf
