// Whole-file reads, atomic writes and folder removal; see file.h.
#include "core/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
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
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw Error(fmt::format("cannot write '{}': {} (is the disk full?)", path, std::strerror(errno)));
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

}  // namespace roformer::core
