// GPT-2's byte alphabet and split pattern (byte_level.h).
#include "data/hf_tokenizer/byte_level.h"

#include <array>

#include "data/hf_tokenizer/regex.h"
#include "data/hf_tokenizer/unicode.h"

namespace roformer::data::hf {

namespace {

// The character of each byte, as UTF-8.
const std::array<std::string, 256>& byte_chars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      append_utf8(t[b], printable ? static_cast<char32_t>(b) : next++);
    }
    return t;
  }();
  return table;
}

}  // namespace

std::string bytes_to_chars(std::string_view bytes) {
  const auto& table = byte_chars();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) out += table[static_cast<uint8_t>(b)];
  return out;
}

bool chars_to_bytes(std::string_view text, std::string& out) {
  static const std::array<int, 324> inverse = [] {
    std::array<int, 324> t;
    t.fill(-1);
    const auto& chars = byte_chars();
    for (int b = 0; b < 256; ++b) t[first_char(chars[b])] = b;
    return t;
  }();
  std::string bytes;
  for (size_t i = 0; i < text.size();) {
    const char32_t c = next_char(text, i);
    if (c >= inverse.size() || inverse[c] < 0) return false;
    bytes += static_cast<char>(inverse[c]);
  }
  out += bytes;
  return true;
}

const Regex& gpt2_pattern() {
  static const Regex pattern("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+");
  return pattern;
}

}  // namespace roformer::data::hf
