// GPT-2's byte-level alphabet (tokenizers' pre_tokenizers/byte_level.rs, bytes_char): every byte
// as a printable character, so that byte-level BPE sees no whitespace or control characters. The
// printable ASCII and Latin-1 bytes stand for themselves; the other 68 take U+0100 onwards ("Ġ" for
// the space).
#pragma once

#include <string>
#include <string_view>

namespace roformer::data::hf {

// Each byte of `bytes` as its character, in UTF-8.
std::string bytes_to_chars(std::string_view bytes);

// The inverse for text made only of those characters; false (out untouched) when `text` holds
// another one.
bool chars_to_bytes(std::string_view text, std::string& out);

// The regular expression that ByteLevel's use_regex cuts text with (GPT-2's).
class Regex;
const Regex& gpt2_pattern();

}  // namespace roformer::data::hf
