// Whole-file reads; see file.h.
#include "core/file.h"

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

}  // namespace roformer::core
