// The resume policy: config differences on resume, sorted and reported, and the advice after a
// non-finite step; see resume_policy.h.
#include "checkpoint/resume_policy.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "checkpoint/store.h"
#include "core/error.h"

namespace roformer::checkpoint {
namespace {

std::string describe(const config::ConfigChange& c) { return fmt::format("{}: {} -> {}", c.key, c.before, c.after); }

}  // namespace

ResumeChanges classify_resume_changes(const config::Config& checkpoint, const config::Config& now,
                                      const std::vector<std::string>& unused) {
  ResumeChanges out;
  for (auto& change : config::diff(checkpoint, now)) {
    if (std::find(unused.begin(), unused.end(), change.key) != unused.end()) {  // no step from here on reads it
      out.unused.push_back(std::move(change));
      continue;
    }
    switch (config::resume_of(change.key)) {
      case config::Resume::kExact: out.applied.push_back(std::move(change)); break;
      case config::Resume::kRescue: out.rescued.push_back(std::move(change)); break;
      case config::Resume::kRefuse: out.refused.push_back(std::move(change)); break;
    }
  }
  return out;
}

void check_resume_changes(const config::Config& checkpoint, const config::Config& now, const std::string& resume_dir,
                          const std::vector<std::string>& unused) {
  const ResumeChanges changes = classify_resume_changes(checkpoint, now, unused);
  for (const auto& r : changes.rescued)
    spdlog::warn("resume: applying {}; the run is no longer an exact continuation of the original", describe(r));
  if (!changes.refused.empty()) {
    std::string list;
    for (const auto& r : changes.refused) list += "\n  " + describe(r);
    throw Error(fmt::format("cannot resume from {}: the config changes the model or the data:{}\nRevert these keys, "
                            "or start a new run in another --run-dir", resume_dir, list));
  }
  for (const auto& a : changes.applied) spdlog::info("resume: applying config change {}", describe(a));
  for (const auto& u : changes.unused)
    spdlog::info("resume: applying config change {}; no step from here on uses it (train.phases sets its own)",
                 describe(u));
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
