// The Unicode of the tokenizer.json reader: UTF-8 decoding and encoding, and the character classes,
// case mapping and normalization forms as Hugging Face `tokenizers` computes them (Rust's char
// methods, the unicode_categories and unicode-normalization crates, each of its own Unicode age):
// the classes and lowercase from unicode_tables.h, the normalization forms from utf8proc but for the
// characters those crates do not decompose (tests/integration/test_hf_tokenizer_reader.cpp checks
// every code point of planes 0-3 and 14 against the venv's `tokenizers`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace roformer::data::hf {

// The length of the UTF-8 sequence that `lead` begins (1 for a continuation byte: never split).
inline size_t utf8_length(uint8_t lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// The character at s[i] (valid UTF-8), and i moved past it.
inline char32_t next_char(std::string_view s, size_t& i) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    ++i;
    return b;
  }
  const size_t n = utf8_length(b);
  char32_t c = n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
  for (size_t k = 1; k < n && i + k < s.size(); ++k) c = (c << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

// The first character of s (not empty).
inline char32_t first_char(std::string_view s) {
  size_t i = 0;
  return next_char(s, i);
}

// The byte length of the last character of s (not empty).
inline size_t last_char_length(std::string_view s) {
  size_t n = 1;
  while (n < s.size() && (static_cast<uint8_t>(s[s.size() - n]) & 0xC0) == 0x80) ++n;
  return n;
}

void append_utf8(std::string& out, char32_t c);

// Rust's char::is_whitespace (the White_Space property).
bool is_whitespace(char32_t c);
// Rust's char::is_numeric: general category Nd, Nl or No.
bool is_numeric(char32_t c);
// BertPreTokenizer's and Punctuation's test: ASCII punctuation or a general category P*.
bool is_punctuation(char32_t c);
// BertNormalizer's clean_text deletes it: NUL, U+FFFD and unicode_categories' is_other (Cc, Cf, Co,
// Cs) but tab, LF and CR.
bool is_removed_by_clean_text(char32_t c);
// unicode_categories' is_mark_nonspacing: Mn (BertNormalizer's strip_accents).
bool is_mark_nonspacing(char32_t c);
// unicode-normalization's is_combining_mark: Mn, Mc or Me (the StripAccents normalizer).
bool is_combining_mark(char32_t c);
// Rust regex's \w (Unicode): Alphabetic, M, Nd, Pc and Join_Control (added tokens' single_word).
bool is_word_char(char32_t c);

// Appends Rust's char::to_lowercase of c (one or more characters).
void append_lowercase(std::string& out, char32_t c);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
// `text` in the normalization form, as unicode-normalization writes it.
std::string normalize(std::string_view text, NormalForm form);

}  // namespace roformer::data::hf
