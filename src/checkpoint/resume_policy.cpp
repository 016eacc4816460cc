// The resume policy: config differences on resume, sorted and reported, and the advice after a
// non-finite step; see resume_policy.h.
#include "checkpoint/resume_policy.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "checkpoint/store.h"
#include "core/error.h"

namespace roformer::checkpoint {
namespace {

// Keys that may differ between a checkpoint's config and the resuming run's: they change neither
// the model nor the data order, so the run still continues exactly (train.device,
// train.num_threads, optimizer.fused and the distributed keys keep the math but may change float
// rounding; train.cuda_graph replays the very kernels the eager step launches).
const std::vector<std::string> kResumableKeyPrefixes = {
    "train.steps", "train.run_dir", "train.device", "train.num_threads", "train.cuda_graph", "logging.", "eval.",
    "checkpoint.",
    "data.num_workers", "data.prefetch", "data.prepared_dir", "distributed.", "optimizer.fused"};
// Keys a user changes to rescue a diverged run: allowed, with a warning that the resumed run is no
// longer an exact continuation of the original one.
// train.batch_size and train.grad_accum are here so a run can resume on another number of processes
// with the same global batch (batch_size x grad_accum x processes): the data position is global.
// train.param_dtype: checkpoints hold fp32 weights either way, so bf16 parameters and autocast
// resume each other's checkpoints (with other rounding).
const std::vector<std::string> kRescueKeyPrefixes = {"optimizer.lr", "optimizer.grad_clip", "schedule.",
                                                     "train.batch_size", "train.grad_accum", "train.param_dtype"};

bool matches(const std::string& key, const std::vector<std::string>& prefixes) {
  for (const auto& p : prefixes)
    if (key.rfind(p, 0) == 0) return true;
  return false;
}

std::string describe(const config::ConfigChange& c) { return fmt::format("{}: {} -> {}", c.key, c.before, c.after); }

}  // namespace

ResumeChanges classify_resume_changes(const config::Config& checkpoint, const config::Config& now) {
  ResumeChanges out;
  for (auto& change : config::diff(checkpoint, now)) {
    if (matches(change.key, kResumableKeyPrefixes)) out.applied.push_back(std::move(change));
    else if (matches(change.key, kRescueKeyPrefixes)) out.rescued.push_back(std::move(change));
    else out.refused.push_back(std::move(change));
  }
  return out;
}

void check_resume_changes(const config::Config& checkpoint, const config::Config& now, const std::string& resume_dir) {
  const ResumeChanges changes = classify_resume_changes(checkpoint, now);
  for (const auto& r : changes.rescued)
    spdlog::warn("resume: applying {}; the run is no longer an exact continuation of the original", describe(r));
  if (!changes.refused.empty()) {
    std::string list;
    for (const auto& r : changes.refused) list += "\n  " + describe(r);
    throw Error(fmt::format("cannot resume from {}: the config changes the model or the data:{}\nRevert these keys, "
                            "or start a new run in another --run-dir", resume_dir, list));
  }
  for (const auto& a : changes.applied) spdlog::info("resume: applying config change {}", describe(a));
}

std::string nonfinite_resume_advice(const std::string& checkpoints_dir, const std::string& run_dir, int64_t max_step) {
  const std::string fixes = "lowering optimizer.lr, raising schedule.warmup_steps or setting optimizer.grad_clip";
  const std::string usable = find_latest_valid_checkpoint(checkpoints_dir, nullptr, max_step);
  if (usable.empty())
    return fmt::format("No checkpoint from before the failure exists to resume from (the newest state would fail "
                       "the same way), so nothing was saved: start a new run in another --run-dir after {}", fixes);
  return fmt::format("Nothing was saved (that state would fail the same way). Resume from {}, the newest checkpoint "
                     "from before the failure, after {}: roformer train --run-dir {} --resume {}",
                     usable, fixes, run_dir, usable);
}

}  // namespace roformer::checkpoint
