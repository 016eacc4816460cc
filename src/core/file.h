// Whole-file reads and atomic whole-file writes with user-facing errors: the one place a file is
// slurped into a string.
#pragma once

#include <string>

namespace roformer::core {

// The bytes of `path`; throws roformer::Error "cannot read <what> '<path>'" when it cannot be opened.
std::string read_file(const std::string& path, const std::string& what = "file");

// Writes `bytes` to `path` (created or truncated). Throws roformer::Error naming the file and the
// system's reason when any byte cannot be written (a full disk, a file-size limit, no permission).
void write_file_checked(const std::string& path, const std::string& bytes);

// Best effort: a file's data (directory false) or a directory's entries (true, e.g. a rename in it)
// reach the disk.
void sync_to_disk(const std::string& path, bool directory);

// Replaces `path` with `bytes` atomically: written to a temporary file beside it, flushed to disk,
// then renamed over it, so a reader sees the old or the new content, never a part. Throws
// roformer::Error naming the file when it cannot be written (no permission, disk full).
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace roformer::core
