// Loading a checkpoint (or a run's newest intact one) for the tools: config, state, tokenizer, model; see
// checkpoint_loader.h.
#include "tools/checkpoint_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/file.h"
#include "core/safetensors.h"
#include "train/checkpoint_store.h"
#include "train/checkpoint_files.h"

namespace roformer::tools {
namespace files = train::checkpoint_files;
namespace fs = std::filesystem;

LoadedCheckpoint load_checkpoint(const std::string& path, const torch::Device& device) {
  LoadedCheckpoint ck;
  ck.dir = train::resolve_checkpoint_dir(path);
  auto check = train::verify_checkpoint(ck.dir);
  if (!check.ok)
    throw Error(fmt::format("checkpoint {} is not usable: {}. `roformer inspect {}` shows its state; an earlier "
                            "checkpoint of the run may be intact", ck.dir, check.problem, ck.dir));
  const fs::path dir(ck.dir);
  const std::string config_path = (dir / files::kConfig).string();
  ck.config = config::parse_config(core::read_file(config_path), {}, config_path);
  const std::string state_path = (dir / files::kTrainerState).string();
  ck.state = train::parse_trainer_state(core::read_file(state_path), state_path);
  ck.tokenizer = std::make_unique<data::Tokenizer>(data::Tokenizer::load((dir / files::kTokenizer).string()));
  ck.model = model::RoFormerForMaskedLM(model::options_from_config(ck.config.model, ck.tokenizer->vocab_size()));
  ck.model->load_hf_state_dict(core::load_safetensors((dir / files::kModel).string()));
  ck.model->to(device);
  ck.model->eval();
  return ck;
}

}  // namespace roformer::tools
