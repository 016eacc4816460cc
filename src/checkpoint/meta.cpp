// A checkpoint's config and trainer state, read in one place; see checkpoint/meta.h.
#include "checkpoint/meta.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

void check_resumable(const CheckpointMeta& meta, const std::function<size_t(int64_t step)>& phase_of) {
  constexpr const char* kAnother = "resume from another checkpoint of the run (`roformer inspect RUN_DIR` lists them)";
  const TrainerState& s = meta.state;
  const size_t last = phase_of(std::max<int64_t>(0, s.step - 1));
  const size_t next = phase_of(s.step);
  if (s.loader_phase != static_cast<int64_t>(last) && s.loader_phase != static_cast<int64_t>(next))
    throw Error(fmt::format("{}: loader.phase {} (the data position's length phase, counted from 0), but step {} "
                            "trains in phase {} of the checkpoint's train.phases: the file was edited; {}",
                            (fs::path(meta.dir) / files::kTrainerState).string(), s.loader_phase, s.step, last, kAnother));
  const std::string path = (fs::path(meta.dir) / files::kMetrics).string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  const std::string text = core::read_file(path, "metrics");
  int64_t number = 0;
  for (size_t start = 0; start < text.size();) {
    ++number;
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (end == std::string::npos || (!line.empty() && !record.is_object()))
      throw Error(fmt::format("{}: line {} is not a whole JSON record ({}): the run would append its next record to "
                              "it; the checkpoint is damaged or was edited: {}", path, number,
                              end == std::string::npos ? "cut short: no end of line" : "not a JSON object", kAnother));
    start = end + 1;
  }
}

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
