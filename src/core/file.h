// Whole-file reads and atomic whole-file writes with user-facing errors: the one place a file is
// slurped into a string.
#pragma once

#include <string>

namespace roformer::core {

// The bytes of `path`; throws roformer::Error "cannot read <what> '<path>'" when it cannot be opened.
std::string read_file(const std::string& path, const std::string& what = "file");

// Replaces `path` with `bytes` atomically: written to a temporary file beside it, flushed to disk,
// then renamed over it, so a reader sees the old or the new content, never a part. Throws
// roformer::Error naming the file when it cannot be written (no permission, disk full).
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace roformer::core
