#include "tools/checkpoint_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "train/checkpoint_store.h"

namespace roformer::tools {
namespace fs = std::filesystem;

namespace {
std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read '{}'", p.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::string resolve_checkpoint_dir(const std::string& path) {
  if (!fs::exists(path))
    throw Error(fmt::format("checkpoint '{}' does not exist; pass a checkpoint directory "
                            "(RUN_DIR/checkpoints/step_N) or a run directory", path));
  if (fs::exists(fs::path(path) / "manifest.json") || fs::exists(fs::path(path) / "trainer_state.json")) return path;
  for (const auto& dir : {fs::path(path) / "checkpoints", fs::path(path)}) {
    if (!train::list_checkpoints(dir.string()).empty()) {
      std::vector<std::string> warnings;
      auto found = train::find_latest_valid_checkpoint(dir.string(), &warnings);
      if (found.empty())
        throw Error(fmt::format("no complete, intact checkpoint under '{}': {}", path,
                                warnings.empty() ? "" : warnings.front()));
      // Never fall back silently: the figures would belong to another step than the user expects.
      for (const auto& w : warnings) spdlog::warn("{}", w);
      if (!warnings.empty())
        spdlog::warn("using the older checkpoint {}: the newest one is damaged (`roformer inspect {}` shows why)",
                     found, path);
      return found;
    }
  }
  throw Error(fmt::format("'{}' is neither a checkpoint (no manifest.json) nor a run directory with checkpoints", path));
}

LoadedCheckpoint load_checkpoint(const std::string& path, const torch::Device& device) {
  LoadedCheckpoint ck;
  ck.dir = resolve_checkpoint_dir(path);
  auto check = train::verify_checkpoint(ck.dir);
  if (!check.ok)
    throw Error(fmt::format("checkpoint {} is not usable: {}. `roformer inspect {}` shows its state; an earlier "
                            "checkpoint of the run may be intact", ck.dir, check.problem, ck.dir));
  const fs::path dir(ck.dir);
  ck.config = config::parse_config(read_text(dir / "config.yaml"), {}, (dir / "config.yaml").string());
  ck.state = nlohmann::json::parse(read_text(dir / "trainer_state.json"));
  ck.tokenizer = std::make_unique<data::Tokenizer>(data::Tokenizer::load((dir / "tokenizer.model").string()));
  ck.model = model::RoFormerForMaskedLM(model::options_from_config(ck.config.model, ck.tokenizer->vocab_size()));
  ck.model->load_hf_state_dict(core::load_safetensors((dir / "model.safetensors").string()));
  ck.model->to(device);
  ck.model->eval();
  return ck;
}

}  // namespace roformer::tools
