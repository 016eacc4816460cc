// Covers and splits of pieces (pieces.h), as tokenizers' NormalizedString::split makes them.
#include "data/hf_tokenizer/pieces.h"

#include <algorithm>

namespace roformer::data::hf {

void cover(std::string_view text, const std::vector<std::pair<size_t, size_t>>& found, std::vector<Match>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (const auto& [start, end] : found) {
    if (last != start) out.push_back({last, start, false});
    out.push_back({start, end, true});
    last = end;
  }
  if (last != text.size()) out.push_back({last, text.size(), false});
}

namespace {

// The parts to keep, in order, as (start, end); `matches` rearranged under `behavior`.
void parts_of(const std::vector<Match>& matches, SplitBehavior behavior, std::vector<Match>& parts) {
  parts.clear();
  bool previous = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Match& m : matches) parts.push_back({m.start, m.end, false});
      return;
    case SplitBehavior::kRemoved:
      for (const Match& m : matches) parts.push_back(m);  // is_match: dropped
      return;
    case SplitBehavior::kContiguous:
      for (const Match& m : matches) {
        if (m.is_match == previous && !parts.empty()) parts.back().end = m.end;
        else parts.push_back({m.start, m.end, false});
        previous = m.is_match;
      }
      return;
    case SplitBehavior::kMergedWithPrevious:
      for (const Match& m : matches) {
        if (m.is_match && !previous && !parts.empty()) parts.back().end = m.end;
        else parts.push_back({m.start, m.end, false});
        previous = m.is_match;
      }
      return;
    case SplitBehavior::kMergedWithNext:
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous && !parts.empty()) parts.back().start = it->start;
        else parts.push_back({it->start, it->end, false});
        previous = it->is_match;
      }
      std::reverse(parts.begin(), parts.end());
      return;
  }
}

}  // namespace

void split_piece(Piece& piece, const std::vector<Match>& matches, SplitBehavior behavior, std::vector<Piece>& out) {
  thread_local std::vector<Match> parts;
  parts_of(matches, behavior, parts);
  if (parts.size() == 1 && !parts[0].is_match && parts[0].start == 0 && parts[0].end == piece.text.size()) {
    if (!piece.text.empty()) out.push_back(std::move(piece));  // unchanged: no copy
    return;
  }
  for (const Match& part : parts) {
    if (part.is_match || part.end == part.start) continue;
    Piece p;
    p.text.assign(piece.text, part.start, part.end - part.start);
    p.at_start = piece.at_start && part.start == 0 && piece.first_aligned;
    out.push_back(std::move(p));
  }
}

}  // namespace roformer::data::hf
