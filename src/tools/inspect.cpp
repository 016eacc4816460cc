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
#include "train/metrics.h"
#include "checkpoint/files.h"
#include "checkpoint/run_layout.h"

namespace roformer::tools {
namespace files = checkpoint::files;
namespace fs = std::filesystem;
using nlohmann::json;

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
  const checkpoint::CheckpointMetaParts meta = checkpoint::read_checkpoint_meta_parts(dir);
  const json last_train = train::last_metrics_record((fs::path(dir) / files::kMetrics).string(), "train");
  if (const auto& state = meta.state) {
    report["step"] = state->step;
    report["tokens_seen"] = state->tokens_seen;
    report["num_parameters"] = state->num_parameters;
    report["tokenizer_fingerprint"] = state->tokenizer_fingerprint;
    if (const auto& e = state->last_eval)
      report["last_eval"] = {{"loss", e->loss}, {"accuracy", e->accuracy}, {"top5_accuracy", e->top5_accuracy},
                             {"perplexity", e->perplexity}};
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
      if (const auto& e = state->last_eval)
        std::cout << fmt::format("last eval     MLM accuracy {:.4f}, loss {:.4f}, perplexity {:.2f}\n", e->accuracy,
                                 e->loss, e->perplexity);
    }
    if (!last_train.is_null()) {
      const core::JsonReader r(last_train, (fs::path(dir) / files::kMetrics).string() + " (its last \"train\" record)",
                               "fix or remove that line (it was edited by hand?)");
      std::cout << fmt::format("last train    step {}: loss {:.4f}, accuracy {:.4f}, lr {:.3e}\n", r.integer("step", 0),
                               r.number("loss", 0.0), r.number("accuracy", 0.0), r.number("lr", 0.0));
    }
    if (meta.config) std::cout << "config:\n" << config::to_yaml(*meta.config);
  }
  return check.ok ? 0 : 1;
}

}  // namespace roformer::tools
