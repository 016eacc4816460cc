// Added tokens: their ids and how they are found in a text (added_tokens.h), as tokenizers'
// tokenizer/added_vocabulary.rs does it.
#include "data/hf_tokenizer/added_tokens.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "data/hf_tokenizer/unicode.h"

namespace roformer::data::hf {

void LiteralMatcher::add(const std::string& pattern, int32_t value) {
  int32_t node = 0;
  for (const char c : pattern) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
    const auto it = children_.find(key);
    if (it != children_.end()) {
      node = it->second;
      continue;
    }
    const int32_t next = static_cast<int32_t>(values_.size());
    values_.push_back(-1);
    children_.emplace(key, next);
    node = next;
  }
  values_[node] = value;
  first_byte_[static_cast<uint8_t>(pattern[0])] = true;
}

int32_t LiteralMatcher::child(int32_t node, uint8_t byte) const {
  const auto it = children_.find((static_cast<uint64_t>(node) << 8) | byte);
  return it == children_.end() ? -1 : it->second;
}

void LiteralMatcher::find(std::string_view text, std::vector<std::tuple<size_t, size_t, int32_t>>& out) const {
  out.clear();
  if (values_.size() == 1) return;
  for (size_t start = 0; start < text.size();) {
    if (!first_byte_[static_cast<uint8_t>(text[start])]) {
      ++start;
      continue;
    }
    size_t end = 0;
    int32_t value = -1;
    int32_t node = 0;
    for (size_t i = start; i < text.size();) {
      node = child(node, static_cast<uint8_t>(text[i++]));
      if (node < 0) break;
      if (values_[node] >= 0) end = i, value = values_[node];
    }
    if (value < 0) {
      ++start;
      continue;
    }
    out.emplace_back(start, end, value);
    start = end;
  }
}

namespace {

bool ends_with_word(std::string_view s) {
  return !s.empty() && is_word_char(first_char(s.substr(s.size() - last_char_length(s))));
}

bool starts_with_word(std::string_view s) { return !s.empty() && is_word_char(first_char(s)); }

// Where the whitespace that ends `s` begins (tokenizers' \s*$).
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    const size_t n = last_char_length(s.substr(0, end));
    if (!is_whitespace(first_char(s.substr(end - n, n)))) break;
    end -= n;
  }
  return end;
}

// The length of the whitespace that begins `s` (^\s*).
size_t leading_space_length(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!is_whitespace(next_char(s, next))) break;
    i = next;
  }
  return i;
}

}  // namespace

AddedVocabulary::AddedVocabulary(const core::JsonReader& file, const nlohmann::json& list, const Model& model,
                                 const Normalizer* normalizer) {
  if (!list.is_array()) file.wrong("added_tokens", "a list of tokens");
  // tokenizers' AddedVocabulary::add_tokens, called once with every token of the file.
  int32_t next_id = static_cast<int32_t>(model.size());
  for (const nlohmann::json& entry : list) {
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string())
      file.wrong("added_tokens", entry, "a list of {\"content\": ..., ...} objects");
    AddedToken t;
    t.content = entry["content"].get<std::string>();
    const auto flag = [&](const char* key, bool fallback) {
      if (!entry.contains(key)) return fallback;
      if (!entry[key].is_boolean()) file.wrong("added_tokens", entry, std::string("tokens whose \"") + key + "\" is true or false");
      return entry[key].get<bool>();
    };
    t.special = flag("special", false);
    t.single_word = flag("single_word", false);
    t.lstrip = flag("lstrip", false);
    t.rstrip = flag("rstrip", false);
    t.normalized = flag("normalized", !t.special);
    if (t.content.empty()) continue;
    int32_t id = this->id(t.content);
    if (id < 0) id = model.token_to_id(t.content);
    if (id < 0) id = next_id++;
    ids_[t.content] = id;
    by_id_[id] = t;
  }
  // The strings to find: a normalized token as the normalizer writes it.
  std::unordered_map<std::string, int32_t> seen_raw, seen_normalized;
  for (const auto& [id, t] : by_id_) {
    std::string pattern = t.content;
    if (t.normalized && normalizer) {
      Piece p;
      p.text = t.content;
      normalizer->normalize(p);
      if (p.text != t.content) normalized_form_[id] = p.text;
      pattern = p.text;
    }
    auto& seen = t.normalized ? seen_normalized : seen_raw;
    if (pattern.empty() || !seen.emplace(pattern, id).second)
      file.wrong("added_tokens", nlohmann::json(t.content),
                 "added tokens that tokenizers can match (this one is empty or the same as another once normalized)");
    (t.normalized ? normalized_ : raw_).add(pattern, id);
  }
}

const std::string& AddedVocabulary::decoded_form(int32_t id) const {
  const auto it = normalized_form_.find(id);
  return it != normalized_form_.end() ? it->second : by_id_.at(id).content;
}

// tokenizers' find_matches and split_with_indices for each piece still text.
void AddedVocabulary::split(std::vector<Piece>& pieces, const LiteralMatcher& matcher) const {
  if (matcher.empty()) {
    pieces.erase(std::remove_if(pieces.begin(), pieces.end(), [](const Piece& p) { return p.token < 0 && p.text.empty(); }),
                 pieces.end());
    return;
  }
  thread_local std::vector<std::tuple<size_t, size_t, int32_t>> found;
  split_each(pieces, [&](Piece& piece, std::vector<Piece>& out) {
    const std::string& s = piece.text;
    matcher.find(s, found);
    if (found.empty()) {
      if (!s.empty()) out.push_back(std::move(piece));
      return;
    }
    auto emit = [&](size_t start, size_t end, int32_t token) {
      if (end <= start) return;
      Piece p;
      p.text.assign(s, start, end - start);
      p.token = token;
      p.at_start = token < 0 && piece.at_start && start == 0 && piece.first_aligned;
      out.push_back(std::move(p));
    };
    size_t done = 0;  // start_offset
    for (auto [start, stop, id] : found) {
      const AddedToken& t = by_id_.at(id);
      if (t.single_word) {
        const bool space_before = start == 0 || !ends_with_word(std::string_view(s).substr(0, start));
        const bool space_after = stop == s.size() || !starts_with_word(std::string_view(s).substr(stop));
        if (!space_before || !space_after) continue;
      }
      if (t.lstrip) start = std::max(trailing_space_start(std::string_view(s).substr(0, start)), done);
      if (t.rstrip) stop += leading_space_length(std::string_view(s).substr(stop));
      if (done < start) emit(done, start, -1);
      emit(start, stop, id);
      done = stop;
    }
    if (done < s.size()) emit(done, s.size(), -1);
  });
}

}  // namespace roformer::data::hf
