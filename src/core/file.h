// Whole-file reads with a user-facing error: the one place a file is slurped into a string.
#pragma once

#include <string>

namespace roformer::core {

// The bytes of `path`; throws roformer::Error "cannot read <what> '<path>'" when it cannot be opened.
std::string read_file(const std::string& path, const std::string& what = "file");

}  // namespace roformer::core
