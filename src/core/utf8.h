// Text that must be valid UTF-8 (JSON files, metrics) built from bytes that need not be: file names
// on Linux are any bytes but '/' and NUL.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace roformer::core {

// `bytes` unchanged when it is valid UTF-8; otherwise each byte that is not part of a valid
// sequence is written as the four characters \xNN (a backslash is left as it is, so the result is
// readable, not reversible). Deterministic, so two escapes of one name compare equal.
std::string utf8_or_escaped(std::string_view bytes);

// "a, b, c, d and 3 more": the names sorted, the first `most` of them escaped, for messages that
// name what a folder holds.
std::string listed_names(std::vector<std::string> names, size_t most = 4);

}  // namespace roformer::core
