// UTF-8 validation with escaping; see utf8.h.
#include "core/utf8.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace roformer::core {

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF), or 0 when the byte there does not start one.
size_t valid_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

std::string utf8_or_escaped(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = valid_sequence(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned>(static_cast<uint8_t>(bytes[i])));
      out += hex;
      ++i;
    }
  }
  return out;
}

std::string listed_names(std::vector<std::string> names, size_t most) {
  std::sort(names.begin(), names.end());
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + utf8_or_escaped(names[i]);
  if (names.size() > most) out += " and " + std::to_string(names.size() - most) + " more";
  return out;
}

}  // namespace roformer::core
