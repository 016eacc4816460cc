// A checkpoint's config and trainer state, read in one place; see checkpoint/meta.h.
#include "checkpoint/meta.h"

#include <filesystem>

#include <fmt/format.h>

#include "checkpoint/files.h"
#include "checkpoint/store.h"
#include "core/error.h"
#include "core/file.h"

namespace roformer::checkpoint {
namespace fs = std::filesystem;

namespace {

config::Config read_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / files::kConfig).string();
  return config::parse_config(core::read_file(path), {}, path);
}

// The state must be of the step the checkpoint is named for (step_N, as saved): one of another step
// (hand-edited and re-checksummed, or copied from another checkpoint) would resume silently elsewhere.
TrainerState read_state(const std::string& dir) {
  const std::string path = (fs::path(dir) / files::kTrainerState).string();
  TrainerState state = parse_trainer_state(core::read_file(path), path);
  fs::path named = fs::path(dir).lexically_normal();
  if (!named.has_filename()) named = named.parent_path();  // "step_N/"
  const std::string name = named.filename().string();
  if (name.rfind("step_", 0) == 0 && name != checkpoint_name(state.step))
    throw Error(fmt::format("{}: step {}, but the checkpoint is {}: the file was edited or comes from another "
                            "checkpoint; resume from another checkpoint of the run", path, state.step, name));
  return state;
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
