// The text of one encode on its way through a tokenizer.json's components: a list of pieces, each
// still text (normalized, then cut by the pre-tokenizer, then handed to the model) or already a
// token (an added token found in the text). `tokenizers` calls a piece a Split of a
// PreTokenizedString and tracks every byte's offset in the original text; roformer needs ids only,
// so a piece keeps just what a component can ask of those offsets: whether the piece starts at the
// beginning of the original text (Metaspace's prepend_scheme "first").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/hf_tokenizer/unicode.h"

namespace roformer::data::hf {

struct Piece {
  std::string text;
  int32_t token = -1;          // the id when the piece is an added token (then never split again)
  bool at_start = false;       // its original text starts at offset 0 of the whole text
  bool first_aligned = true;   // its first byte still comes from its original's first byte (no
                               // leading character deleted by a normalizer): a piece cut at its
                               // start keeps at_start only then
};

// What becomes of a delimiter when a piece is split (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A part of a piece's text and whether it matched the pattern; a list of them covers the text.
struct Match {
  size_t start, end;
  bool is_match;
};

// The cover of `text` by the [start, end) ranges of `found` (in order, not overlapping): matches and
// the gaps between them (tokenizers' Pattern::find_matches; a single (0, 0, false) for empty text).
void cover(std::string_view text, const std::vector<std::pair<size_t, size_t>>& found, std::vector<Match>& out);

// The cover of `text` by the characters for which `is_delimiter(c)` holds, each one a match of its
// own (tokenizers' Pattern for a char predicate).
template <typename Predicate>
void cover_chars(std::string_view text, Predicate is_delimiter, std::vector<Match>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    if (!is_delimiter(next_char(text, i))) continue;
    if (last < at) out.push_back({last, at, false});
    out.push_back({at, i, true});
    last = i;
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
}

// Appends the parts of `piece` that `matches` (its cover) make under `behavior`, empty ones dropped
// (tokenizers' NormalizedString::split and PreTokenizedString::split).
void split_piece(Piece& piece, const std::vector<Match>& matches, SplitBehavior behavior, std::vector<Piece>& out);

// Runs `cut(piece, out)` on every piece still text, keeping added tokens as they are.
template <typename Cut>
void split_each(std::vector<Piece>& pieces, Cut cut) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  for (Piece& p : pieces) {
    if (p.token >= 0) out.push_back(std::move(p));
    else cut(p, out);
  }
  pieces.swap(out);
}

}  // namespace roformer::data::hf
