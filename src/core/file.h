// Whole-file reads and atomic whole-file writes with user-facing errors: the one place a file is
// slurped into a string. AppendFile: a file that grows while others read it (event files). Also the
// one place a folder is removed with its contents (remove_tree).
#pragma once

#include <string>
#include <vector>
#include <string_view>
#include <system_error>

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

// A file written by appending, each append checked and handed to the kernel before it returns
// (unbuffered), so a reader following the file (a live TensorBoard) sees every complete append.
// Errors throw roformer::Error naming the file, `what` it is and the system's reason.
class AppendFile {
 public:
  // Creates `path`, which must not exist yet: nothing is ever overwritten.
  static AppendFile create_new(const std::string& path, const std::string& what);
  // Opens an existing file (or a device such as /dev/full) for appending.
  static AppendFile open_existing(const std::string& path, const std::string& what);

  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();  // closes without reporting: call close() where a failure matters

  // Writes every byte (a full disk or a file-size limit is an error, never a silent short write).
  void append(std::string_view bytes);
  void close();  // checked; nothing is written after it
  const std::string& path() const { return path_; }

 private:
  AppendFile(int fd, std::string path, std::string what) : fd_(fd), path_(std::move(path)), what_(std::move(what)) {}
  int fd_ = -1;
  std::string path_, what_;
};

// Removes `path` and, for a folder, everything under it, as std::filesystem::remove_all does;
// symbolic links are removed, never followed. A missing `path` is not an error. Call this, never
// std::filesystem::remove_all: the pip LibTorch carries its own copy of remove_all, which calls a
// libstdc++ symbol that no library exports (recursive_directory_iterator::__erase); wherever the
// dynamic linker binds our call to that copy (libtorch ahead of libstdc++ in the lookup order, as
// with an LD_PRELOAD or a linker that orders libraries differently), the first folder with
// contents jumps to address 0. This uses POSIX calls only (openat, unlinkat), which libtorch does
// not carry. Returns false and sets `ec` to the first failure; what was removed before it stays
// removed.
bool remove_tree(const std::string& path, std::error_code& ec) noexcept;

// The same; throws roformer::Error "cannot remove '<path>': <reason>" on failure.
void remove_tree(const std::string& path);

// The names of the regular files in `dir` that start with `prefix`, sorted; none when `dir` does not
// exist or cannot be read.
std::vector<std::string> list_files_starting_with(const std::string& dir, const std::string& prefix);

}  // namespace roformer::core
