// Whole-file reads, atomic writes and folder removal; see file.h.
#include "core/file.h"

#include <algorithm>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace roformer::core {

namespace {

int remove_entry(int parent, const char* name);

// Removes everything in the folder open as `folder`: its names are read first, then removed, so the
// removal does not disturb the listing. Returns 0 or the errno of the first failure.
int remove_folder_contents(int folder) {
  const int listing_fd = ::dup(folder);  // closedir closes it; `folder` stays open for the *at calls
  if (listing_fd < 0) return errno;
  DIR* listing = ::fdopendir(listing_fd);
  if (listing == nullptr) {
    const int err = errno;
    ::close(listing_fd);
    return err;
  }
  std::vector<std::string> names;
  int err = 0;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(listing);
    if (entry == nullptr) {
      err = errno;  // 0 at the end of the listing
      break;
    }
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) names.emplace_back(entry->d_name);
  }
  ::closedir(listing);
  for (size_t i = 0; i < names.size() && err == 0; ++i) err = remove_entry(folder, names[i].c_str());
  return err;
}

// Removes `name` (relative to the folder `parent`, or a path with AT_FDCWD): a folder with its
// contents; anything else, a symbolic link to a folder included, by unlinking it. Something already
// gone is not a failure. Returns 0 or the errno of the first failure.
int remove_entry(int parent, const char* name) {
  struct stat st;
  if (::fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 0 : errno;
  const bool folder = S_ISDIR(st.st_mode);
  if (folder) {
    const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    const int err = remove_folder_contents(fd);
    ::close(fd);
    if (err != 0) return err;
  }
  if (::unlinkat(parent, name, folder ? AT_REMOVEDIR : 0) != 0 && errno != ENOENT) return errno;
  return 0;
}

}  // namespace

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read {} '{}'", what, path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_checked(const std::string& path, const std::string& bytes) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out)
    throw Error(fmt::format("cannot write '{}': {}", path, errno ? std::strerror(errno) : "a write failed (is the disk full?)"));
}

void sync_to_disk(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  const std::string tmp = path + ".tmp";
  try {
    write_file_checked(tmp, bytes);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  sync_to_disk(tmp, false);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(fmt::format("cannot replace '{}': {}", path, ec.message()));
  }
  const fs::path parent = fs::path(path).parent_path();
  sync_to_disk(parent.empty() ? "." : parent.string(), true);
}

AppendFile AppendFile::create_new(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot create {} '{}': {}", what, path, std::strerror(errno)));
  return AppendFile(fd, path, what);
}

AppendFile AppendFile::open_existing(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open {} '{}' for writing: {}", what, path, std::strerror(errno)));
  return AppendFile(fd, path, what);
}

AppendFile::AppendFile(AppendFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), what_(std::move(other.what_)) {}

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
  }
  return *this;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(std::string_view bytes) {
  if (fd_ < 0) throw Error(fmt::format("{} '{}' is closed; nothing more can be written to it", what_, path_));
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)  // 0: nothing written and no reason given; treat it as the device refusing
      throw Error(fmt::format("cannot write {} '{}': {} (is the disk full?)", what_, path_,
                              n < 0 ? std::strerror(errno) : "no bytes written"));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void AppendFile::close() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw Error(fmt::format("cannot close {} '{}': {}", what_, path_, std::strerror(errno)));
}

bool remove_tree(const std::string& path, std::error_code& ec) noexcept {
  ec.clear();
  const int err = remove_entry(AT_FDCWD, path.c_str());
  if (err != 0) ec = std::error_code(err, std::generic_category());
  return err == 0;
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  if (!remove_tree(path, ec)) throw Error(fmt::format("cannot remove '{}': {}", path, ec.message()));
}

std::vector<std::string> list_files_starting_with(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && entry.is_regular_file(ec)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace roformer::core
