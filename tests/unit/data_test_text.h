// Synthetic text for the data tests (never corpus text): pseudo-random words, real ones and
// syllable compounds, so a few hundred SentencePiece pieces are learnable in well under a second.
#pragma once

#include <random>
#include <string>
#include <vector>

namespace roformer::test {

inline const std::vector<std::string>& synthetic_words() {
  static const std::vector<std::string> words = [] {
    std::vector<std::string> w = {"the", "of", "and", "a", "to", "in", "is", "was", "he", "for", "it", "with", "as", "his",
                                  "on", "be", "at", "by", "jury", "election", "county", "investigation", "irregularities",
                                  "international", "organization", "[bracketed]", "representatives", "unbelievable",
                                  "morning", "quickly", "river", "mountain", "city", "government", "said", "nineteen",
                                  "thousand", "hundred", "committee", "presentments", "evidence", "(parenthesis)", "Atlanta's"};
    static const char* kSyllables[] = {"ka", "lo", "mi", "ter", "san", "do", "ri", "pen", "tu", "vel", "ox", "qua",
                                       "zin", "bra", "ful", "nes", "ing", "ed", "pre", "con"};
    std::mt19937 lex(7);
    for (int i = 0; i < 300; ++i) {
      std::string s;
      for (int k = 0, n = 2 + static_cast<int>(lex() % 3); k < n; ++k) s += kSyllables[lex() % 20];
      w.push_back(s);
    }
    return w;
  }();
  return words;
}

// `docs` documents of `paras` paragraphs (one a line), a blank line between documents.
inline std::string synthetic_text(int docs, int paras, unsigned seed) {
  const auto& words = synthetic_words();
  std::mt19937 rng(seed);
  std::string text;
  for (int d = 0; d < docs; ++d) {
    for (int p = 0; p < paras; ++p) {
      const int n = 6 + static_cast<int>(rng() % 14);
      for (int w = 0; w < n; ++w) text += (w ? " " : "") + words[rng() % words.size()];
      text += ".\n";
    }
    text += "\n";
  }
  return text;
}

}  // namespace roformer::test
