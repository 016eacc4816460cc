// Texts the tokenizer tests encode with roformer and with a reference implementation (SentencePiece,
// Hugging Face tokenizers): Brown paragraphs and generated web-like lines full of what a Brown
// vocabulary lacks (mojibake, odd whitespace, zero-width and control characters, emoji, CJK and
// Korean, decomposed and compatibility characters).
#pragma once

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace roformer::test {

// The first `n` paragraphs (lines) of a file.
inline std::vector<std::string> first_lines(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line;
  while (out.size() < n && std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

// `n` web-like lines: Brown words, some glued together, mixed with the fragments below and joined by
// spaces or odd whitespace, some lines with leading or trailing whitespace. Deterministic: the
// generator's raw output (std::mt19937's is specified) picks everything.
inline std::vector<std::string> web_like_lines(const std::vector<std::string>& words, size_t n) {
  static const std::vector<std::vector<std::string>> kFragments = {
      // mojibake: UTF-8 read as Windows-1252 (é, ', ", ü, ö, è, à, the byte-order mark, twice over)
      {"\u00c3\u00a9", "\u00e2\u20ac\u2122", "\u00e2\u20ac\u0153", "\u00e2\u20ac\u009d", "\u00c3\u00bc",
       "\u00c3\u00b6", "\u00c2\u00a0", "\u00c3\u00a8", "\u00c3 ", "\u00ef\u00bb\u00bf",
       "\u00c3\u00a2\u00e2\u201a\u00ac\u00e2\u201e\u00a2", "\u00c3", "\u00c2"},
      // whitespace: tab, runs, no-break, thin, ideographic, zero-width, separators, CR LF
      {"\t", "  ", "   ", "\u00a0", "\u2009", "\u3000", "\u200b", "\u200c", "\u200d", "\ufeff", "\u2028", "\r",
       "\r\n", "\x0b", "\x0c", " \t ", "\u2003", "\u202f", "\u205f", "\u00a0\u200d", "\u2581"},
      // control characters, C0 and C1
      {"\x01", "\x1b", "\x7f", "\u0085", "\u009d"},
      // emoji: plain, skin tone, joined family, variation selectors, flag, keycap
      {"\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\u2764\ufe0f",
       "\U0001F1EB\U0001F1F7", "\u2728", "#\ufe0f\u20e3", "\u00a9\ufe0f", "\u2122\ufe0f", "\u263a\ufe0e"},
      // CJK and other scripts
      {"\u65e5\u672c\u8a9e", "\u4e2d\u6587", "\ud55c\uad6d\uc5b4", "\u30c6\u30b9\u30c8", "\u4f60\u597d",
       "\u0645\u0631\u062d\u0628\u0627", "\u043f\u0440\u0438\u0432\u0435\u0442", "\u03b1\u03b2\u03b3"},
      // decomposed letters (NFD), Hangul jamo
      {"e\u0301", "Vie\u0323\u0302t", "n\u0303", "A\u030a", "\u1100\u1161\u11a8", "a\u0306\u0301", "o\u0308"},
      // compatibility characters (NFKC maps them), some followed by a joiner or a mark
      {"\uff26\uff55\uff4c\uff4c", "\ufb01", "\ufb01\u200d", "\u00b2", "\u00b2\u200d", "\u00b2\u0301", "\u01c5",
       "\u338f", "\u2177", "\uff8a\uff9f", "\uff76\uff9e", "\u00bd\u200c", "\u2122", "\u00bd", "\u2460",
       "\u00a8", "\u00b4", "\u2026", "\u00aa", "\u00b5", "\u0149", "\U0001D400\U0001D401"},
      // punctuation and symbols
      {"\u2014", "\u2013", "\u2018", "\u2019", "\u201c", "\u201d", "\u20ac", "\u00b0", "\u00a9", "\ufffd"}};
  const std::vector<std::string>& spaces = kFragments[1];
  std::mt19937 rng(20261126);
  const auto pick = [&](size_t k) { return static_cast<size_t>(rng() % k); };
  const auto chance = [&](int percent) { return static_cast<int>(rng() % 100) < percent; };
  std::vector<std::string> lines;
  while (lines.size() < n) {
    std::vector<std::string> parts;
    if (chance(15)) parts.push_back(spaces[pick(spaces.size())]);
    for (size_t i = 0, count = 3 + pick(18); i < count; ++i) {
      const auto& group = kFragments[pick(kFragments.size())];
      const std::string token = chance(60) ? words[pick(words.size())] : group[pick(group.size())];
      if (!parts.empty() && chance(30)) parts.back() += token;
      else parts.push_back(token);
    }
    std::string line;
    for (const auto& part : parts) line += part + (chance(80) ? " " : spaces[pick(spaces.size())]);
    if (chance(70)) line.erase(line.find_last_not_of(' ') + 1);
    lines.push_back(line);
  }
  return lines;
}

// The words of `paragraphs`, split at spaces.
inline std::vector<std::string> words_of(const std::vector<std::string>& paragraphs) {
  std::vector<std::string> words;
  for (const auto& p : paragraphs) {
    std::istringstream in(p);
    for (std::string w; in >> w;) words.push_back(w);
  }
  return words;
}

}  // namespace roformer::test
