// `roformer train`.
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/error.h"
#include "train/launch.h"

namespace roformer::app {

void register_train_commands(CLI::App& app) {
  auto req = std::make_shared<train::TrainRequest>();
  auto* cmd = app.add_subcommand("train", "Train (or resume) a RoFormer MLM run from a YAML config");
  cmd->add_option("-c,--config", req->config_path, "YAML config (optional with --resume: the checkpoint's is used)");
  cmd->add_option("--set", req->overrides, "Override a config key: section.key=value (repeatable)");
  cmd->add_option("--run-dir", req->run_dir, "Run directory (overrides train.run_dir)");
  cmd->add_option("--resume", req->resume,
                  "auto: continue from the newest complete checkpoint in the run directory; or a checkpoint path");
  cmd->add_option("--init-from", req->init_from,
                  "Start a new run from the weights and tokenizer of an `export --format hf` directory, a checkpoint "
                  "or a run directory (fresh optimizer and schedule)");
  cmd->add_flag("--extend-positions", req->extend_positions,
                "With --init-from and a larger model.max_position_embeddings than the weights' learned (absolute) "
                "position table: its new rows start as copies of the trained ones (rotary models extend with no flag)");
  cmd->add_flag("--overwrite", req->overwrite,
                "Start over in a run directory that holds checkpoints (deletes them and its metrics)");
  cmd->callback([req, cmd] {
    if (cmd->count("--run-dir") > 0 && req->run_dir.empty())
      throw Error("--run-dir is empty: name a directory (or leave the option out to use train.run_dir)");
    train::run_training(*req);
  });
}

}  // namespace roformer::app
