// `roformer inspect`: a checkpoint's step, metrics and integrity; see inspect.h.
#include "tools/inspect.h"

#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/json_read.h"
#include "checkpoint/meta.h"
#include "checkpoint/store.h"
#include "metrics/jsonl.h"
#include "metrics/records.h"
#include "checkpoint/files.h"
#include "checkpoint/run_layout.h"
#include "data/tokenizer.h"

namespace roformer::tools {
namespace files = checkpoint::files;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The last logging step: the window's means (a record from before issue 41 has the loss's only),
// then the batch's own figures.
void print_last_train(const json& record, const std::string& metrics_path) {
  const metrics::TrainRecord t = metrics::train_record_from(core::JsonReader(
      record, metrics_path + " (its last \"train\" record)", "fix or remove that line (it was edited by hand?)"));
  std::cout << fmt::format("last train    step {}: loss {:.4f}{} (mean of the logging window); last batch loss {:.4f} "
                           "acc {:.4f}; lr {:.3e}\n", t.step, t.loss_avg,
                           t.accuracy_avg ? fmt::format(" acc {:.4f}", *t.accuracy_avg) : std::string(), t.loss,
                           t.accuracy, t.lr);
}

// The config as the model has it: model.vocab_size 0 (the tokenizer's number of ids) and
// model.embedding_size 0 (the hidden size) resolved, so inspect never shows a size of 0. The vocabulary
// stays 0 when the checkpoint's tokenizer cannot be read (a damaged checkpoint is still reported).
config::Config resolved_sizes(config::Config c, const std::string& dir) {
  if (c.model.vocab_size == 0) {
    try {
      c.model.vocab_size = data::Tokenizer::load(dir).vocab_size();  // its tokenizer.json or tokenizer.model
    } catch (const Error&) {
    }
  }
  c.model.embedding_size = config::effective_embedding_size(c.model);
  return c;
}

}  // namespace

int run_inspect(const std::string& path, bool as_json) {
  // A damaged checkpoint must still be reported, so resolve without requiring it to verify.
  std::string dir = path;
  if (!fs::exists(fs::path(path) / files::kManifest) && !fs::exists(fs::path(path) / files::kTrainerState)) {
    auto all = checkpoint::list_checkpoints(checkpoint::RunLayout(path).checkpoints());
    if (all.empty()) all = checkpoint::list_checkpoints(path);
    if (all.empty()) {
      if (!fs::exists(path)) throw Error(fmt::format("'{}' does not exist", path));
      throw Error(fmt::format("'{}' is neither a checkpoint nor a run directory with checkpoints", path));
    }
    dir = all.back();
  }
  auto check = checkpoint::verify_checkpoint(dir);
  json report = {{"checkpoint", dir}, {"intact", check.ok}};
  if (!check.ok) report["problem"] = check.problem;
  checkpoint::CheckpointMetaParts meta = checkpoint::read_checkpoint_meta_parts(dir);
  if (meta.config) {
    meta.config = resolved_sizes(*meta.config, dir);
    report["vocab_size"] = meta.config->model.vocab_size;
    report["embedding_size"] = meta.config->model.embedding_size;
  }
  const std::string metrics_path = (fs::path(dir) / files::kMetrics).string();
  const json last_train = metrics::last_metrics_record(metrics_path, metrics::TrainRecord::kType);
  if (const auto& state = meta.state) {
    report["step"] = state->step;
    report["tokens_seen"] = state->tokens_seen;
    report["num_parameters"] = state->num_parameters;
    report["tokenizer_fingerprint"] = state->tokenizer_fingerprint;
    if (const auto& e = state->last_eval) report["last_eval"] = metrics::to_json(*e);
  }
  if (!last_train.is_null()) report["last_train"] = last_train;
  if (as_json) {
    std::cout << report.dump() << std::endl;
  } else {
    std::cout << fmt::format("checkpoint    {}\n", dir);
    std::cout << fmt::format("integrity     {}\n", check.ok ? "ok (every file matches manifest.json)"
                                                            : "DAMAGED: " + check.problem);
    if (const auto& state = meta.state) {
      std::cout << fmt::format("step          {}\n", state->step);
      std::cout << fmt::format("tokens seen   {}\n", state->tokens_seen);
      std::cout << fmt::format("parameters    {}\n", state->num_parameters);
      if (meta.config)
        std::cout << fmt::format("sizes         vocab_size {}, embedding_size {} (resolved)\n",
                                 meta.config->model.vocab_size, meta.config->model.embedding_size);
      if (const auto& e = state->last_eval)
        std::cout << fmt::format("last eval     MLM accuracy {:.4f}, loss {:.4f}, perplexity {:.2f}\n", e->accuracy,
                                 e->loss, e->perplexity);
    }
    if (!last_train.is_null()) print_last_train(last_train, metrics_path);
    if (meta.config) std::cout << "config (sizes resolved):\n" << config::to_yaml(*meta.config);
  }
  return check.ok ? 0 : 1;
}

}  // namespace roformer::tools
