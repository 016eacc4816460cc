// Character classes, lowercase and normalization forms with `tokenizers`' answers (unicode.h).
#include "data/hf_tokenizer/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "data/hf_tokenizer/unicode_tables.h"

namespace roformer::data::hf {

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool is_whitespace(char32_t c) {
  // The White_Space property, unchanged since Unicode 6.3.
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return tables::contains(tables::kNumeric, tables::kNumericSize, c);
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
                       (c >= 0x7B && c <= 0x7E);
  return tables::contains(tables::kPunctuation, tables::kPunctuationSize, c);
}

bool is_removed_by_clean_text(char32_t c) {
  if (c < 0x80) return c != '\t' && c != '\n' && c != '\r' && (c < 0x20 || c == 0x7F);
  return tables::contains(tables::kCleanTextRemoved, tables::kCleanTextRemovedSize, c);
}

bool is_mark_nonspacing(char32_t c) {
  return c >= 0x300 && tables::contains(tables::kNonspacingMarks, tables::kNonspacingMarksSize, c);
}

bool is_combining_mark(char32_t c) {
  return c >= 0x300 && tables::contains(tables::kCombiningMarks, tables::kCombiningMarksSize, c);
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return tables::contains(tables::kWord, tables::kWordSize, c);
}

void append_lowercase(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  if (c == 0x130) {  // SpecialCasing: İ lowercases to i + combining dot above
    out += "i\xCC\x87";
    return;
  }
  using tables::kLowercase;
  const auto* end = kLowercase + tables::kLowercaseSize;
  const auto* run = std::upper_bound(kLowercase, end, c, [](char32_t x, const tables::LowerRun& r) { return x < r.first; });
  if (run != kLowercase) {
    --run;
    if (c <= run->last && (c - run->first) % static_cast<char32_t>(run->stride) == 0) {
      append_utf8(out, static_cast<char32_t>(static_cast<int32_t>(c) + run->delta));
      return;
    }
  }
  append_utf8(out, c);
}

namespace tables {

bool contains(const Range* table, size_t size, char32_t c) {
  const Range* end = table + size;
  const Range* r = std::upper_bound(table, end, c, [](char32_t x, const Range& range) { return x < range.first; });
  return r != table && c <= (r - 1)->last;
}

}  // namespace tables

namespace {

// utf8proc's normal form of text without the characters unicode-normalization does not decompose.
void append_normalized(std::string& out, std::string_view text, int options) {
  if (text.empty()) return;
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) throw Error(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
  out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

}  // namespace

std::string normalize(std::string_view text, NormalForm form) {
  // Text below U+0300 has no combining marks to compose, and ASCII nothing to decompose either.
  const char32_t stable_below = form == NormalForm::kNfc ? 0x300 : 0x80;
  bool stable = true;
  bool opaque = false;  // holds a character unicode-normalization does not decompose
  for (size_t i = 0; i < text.size();) {
    const char32_t c = next_char(text, i);
    if (c < stable_below) continue;
    stable = false;
    if (tables::contains(tables::kNotDecomposed, tables::kNotDecomposedSize, c)) {
      opaque = true;
      break;
    }
  }
  if (stable) return std::string(text);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  if (!opaque) {
    append_normalized(out, text, options);
    return out;
  }
  // Such a character stays as it is and starts a new segment (to unicode-normalization it is a
  // character of class 0 without a decomposition): the text between them is normalized alone.
  size_t segment = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    const char32_t c = next_char(text, i);
    if (c < 0x80 || !tables::contains(tables::kNotDecomposed, tables::kNotDecomposedSize, c)) continue;
    append_normalized(out, text.substr(segment, at - segment), options);
    out.append(text.substr(at, i - at));
    segment = i;
  }
  append_normalized(out, text.substr(segment), options);
  return out;
}

}  // namespace roformer::data::hf
