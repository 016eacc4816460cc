// A tokenizer.json's added tokens (tokenizers' AddedVocabulary): their ids as tokenizers assigns
// them when it loads the file, and how they are found in a text before the model sees it: those
// with normalized false in the raw text, the others in the normalized text, leftmost-longest, with
// their single_word, lstrip and rstrip rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/json_read.h"
#include "data/hf_tokenizer/components.h"
#include "data/hf_tokenizer/models.h"
#include "data/hf_tokenizer/pieces.h"

namespace roformer::data::hf {

struct AddedToken {
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// Finds the leftmost, then longest, occurrences of a set of strings (daachorse's LeftmostLongest),
// scanning on after each one.
class LiteralMatcher {
 public:
  void add(const std::string& pattern, int32_t value);
  bool empty() const { return values_.empty(); }
  // (start, end, value) of each occurrence in `text`.
  void find(std::string_view text, std::vector<std::tuple<size_t, size_t, int32_t>>& out) const;

 private:
  int32_t child(int32_t node, uint8_t byte) const;
  std::unordered_map<uint64_t, int32_t> children_;  // (node << 8 | byte) -> node
  std::vector<int32_t> values_ = {-1};              // per node: the value of the pattern ending there
  bool first_byte_[256] = {};
};

class AddedVocabulary {
 public:
  // `list` is the file's "added_tokens" (their "id" fields are not used: tokenizers assigns ids
  // itself, the model's id of the content if it has one, else the next free id).
  AddedVocabulary(const core::JsonReader& file, const nlohmann::json& list, const Model& model,
                  const Normalizer* normalizer);

  // Cuts the pieces still text at the tokens matched in raw text (normalized false) or in
  // normalized text (normalized true): the found ones become pieces holding their id.
  void split_raw(std::vector<Piece>& pieces) const { split(pieces, raw_); }
  void split_normalized(std::vector<Piece>& pieces) const { split(pieces, normalized_); }

  // The token of an id, nullptr when it is not an added token.
  const AddedToken* token(int32_t id) const {
    const auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : &it->second;
  }
  // The id of a content, -1 when it is not an added token.
  int32_t id(const std::string& content) const {
    const auto it = ids_.find(content);
    return it == ids_.end() ? -1 : it->second;
  }
  // The string decode() starts from: the normalized form of a normalized token, else its content.
  const std::string& decoded_form(int32_t id) const;
  const std::unordered_map<int32_t, AddedToken>& tokens() const { return by_id_; }

 private:
  void split(std::vector<Piece>& pieces, const LiteralMatcher& matcher) const;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<int32_t, AddedToken> by_id_;
  std::unordered_map<int32_t, std::string> normalized_form_;
  LiteralMatcher raw_, normalized_;
};

}  // namespace roformer::data::hf
