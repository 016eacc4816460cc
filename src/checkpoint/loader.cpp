// Loading a checkpoint (or a run's newest intact one) for the tools: config, state, tokenizer, model; see
// checkpoint/loader.h.
#include "checkpoint/loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/device.h"
#include "core/error.h"
#include "core/file.h"
#include "core/safetensors.h"
#include "checkpoint/store.h"
#include "checkpoint/files.h"
#include "checkpoint/meta.h"
#include "checkpoint/run_layout.h"
#include "model/size.h"

namespace roformer::checkpoint {
namespace fs = std::filesystem;

namespace {

LoadedCheckpoint load_checkpoint_dir(const std::string& dir, const torch::Device& device);

// A config.yaml edited by hand (its checksum too) can describe tables no machine holds: refused
// naming the key before the model is built, not an abort inside LibTorch. The model is built in host
// memory, then moved to `device`.
void check_model_fits(const model::RoFormerOptions& options, const torch::Device& device, const std::string& dir) {
  const auto size = model::model_size(options);
  const double needed = 4 * size.parameters() + size.buffer_bytes();  // float32 weights
  for (const torch::Device& d : {torch::Device(torch::kCPU), device}) {
    const double available = core::device_memory_bytes(d);
    if (available <= 0 || needed <= available) continue;
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    throw Error(fmt::format("checkpoint {} describes a model that needs at least {:.3g} GiB to load ({:.3g} "
                            "parameters in float32 and its tables) but {} has {:.3g} GiB; most of it is set by {} in "
                            "its config.yaml (edited by hand?): load it where it fits, or use an intact checkpoint",
                            dir, needed / kGiB, size.parameters(), d.str(), available / kGiB, size.largest_key(4)));
  }
}

bool is_checkpoint_dir(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::path(path) / files::kManifest, ec) || fs::exists(fs::path(path) / files::kTrainerState, ec);
}

}  // namespace

// A run directory: a run training into it may prune the chosen checkpoint while it is read (it
// keeps checkpoint.keep_last). Such a checkpoint is gone when the read fails: choose again.
LoadedCheckpoint load_checkpoint(const std::string& path, const torch::Device& device) {
  if (is_checkpoint_dir(path)) return load_checkpoint_dir(path, device);
  constexpr int kAttempts = 5;
  const std::string checkpoints = RunLayout(path).checkpoints();
  for (int attempt = 1;; ++attempt) {
    std::string dir;
    const auto listed = list_checkpoints(checkpoints);
    try {
      dir = resolve_checkpoint_dir(path);
      return load_checkpoint_dir(dir, device);
    } catch (const std::exception& e) {
      std::error_code ec;
      const bool pruned = dir.empty() ? list_checkpoints(checkpoints) != listed : !fs::exists(dir, ec);
      if (!pruned || attempt == kAttempts) throw;
      spdlog::info("checkpoint {} was pruned by the run training into {} while it was read; choosing its newest "
                   "checkpoint again", dir, path);
    }
  }
}

namespace {

LoadedCheckpoint load_checkpoint_dir(const std::string& checkpoint, const torch::Device& device) {
  LoadedCheckpoint ck;
  ck.dir = checkpoint;
  const CheckpointReadLock reading(ck.dir);  // a run training into its directory prunes it later
  auto check = verify_checkpoint(ck.dir);
  if (!check.ok)
    throw Error(fmt::format("checkpoint {} is not usable: {}. `roformer inspect {}` shows its state; an earlier "
                            "checkpoint of the run may be intact", ck.dir, check.problem, ck.dir));
  const fs::path dir(ck.dir);
  CheckpointMeta meta = read_checkpoint_meta(ck.dir);
  ck.config = std::move(meta.config);
  ck.state = std::move(meta.state);
  ck.tokenizer = std::make_unique<data::Tokenizer>(data::Tokenizer::load(ck.dir));
  const auto options =
      model::RoFormerOptions(ck.config.model, ck.tokenizer->vocab_size()).pad_token_id(ck.tokenizer->special_tokens().pad);
  check_model_fits(options, device, ck.dir);
  ck.model = model::RoFormerForMaskedLM(options);
  ck.model->load_hf_state_dict(core::load_safetensors((dir / files::kModel).string()));
  ck.model->to(device);
  ck.model->eval();
  return ck;
}

}  // namespace

}  // namespace roformer::checkpoint
