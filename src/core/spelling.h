// "Did you mean": the known word closest to a mistyped one (config keys and sections, commands).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace roformer::core {

// Levenshtein distance: insertions, deletions and substitutions, one each.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word`: edit distance, also against the candidate's prefix of the same
// length plus one, so a key typed short (model.hiden for model.hidden_size) still finds its match.
// Empty when there are no candidates.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace roformer::core
