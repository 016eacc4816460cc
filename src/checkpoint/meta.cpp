// A checkpoint's config and trainer state, read in one place; see checkpoint/meta.h.
#include "checkpoint/meta.h"

#include <filesystem>

#include "checkpoint/files.h"
#include "core/error.h"
#include "core/file.h"

namespace roformer::checkpoint {
namespace fs = std::filesystem;

namespace {

config::Config read_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / files::kConfig).string();
  return config::parse_config(core::read_file(path), {}, path);
}

TrainerState read_state(const std::string& dir) {
  const std::string path = (fs::path(dir) / files::kTrainerState).string();
  return parse_trainer_state(core::read_file(path), path);
}

}  // namespace

CheckpointMeta read_checkpoint_meta(const std::string& dir) { return {dir, read_config(dir), read_state(dir)}; }

CheckpointMetaParts read_checkpoint_meta_parts(const std::string& dir) {
  CheckpointMetaParts parts;
  try {
    parts.config = read_config(dir);
  } catch (const Error& e) {
    parts.problem = e.what();
  }
  try {
    parts.state = read_state(dir);
  } catch (const Error& e) {
    if (parts.problem.empty()) parts.problem = e.what();
  }
  return parts;
}

}  // namespace roformer::checkpoint
