// Whole-file reads and atomic writes; see file.h.
#include "core/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace roformer::core {

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

}  // namespace roformer::core
