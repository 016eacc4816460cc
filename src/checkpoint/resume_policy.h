// The resume policy: which differences between a checkpoint's config and the resuming run's are
// applied, applied with a warning (rescuing a diverged run), or refused (they change the model or
// the data). docs/training.md "Resuming" lists the keys. Also which checkpoint a run that met a
// non-finite value can resume from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace roformer::checkpoint {

struct ResumeChanges {
  std::vector<config::ConfigChange> applied;  // the run still continues exactly
  std::vector<config::ConfigChange> rescued;  // allowed; the run is no longer an exact continuation
  std::vector<config::ConfigChange> refused;  // model or data changes
};

// The differences (config::diff, field by field), sorted into the three kinds.
ResumeChanges classify_resume_changes(const config::Config& checkpoint, const config::Config& now);

// Logs the applied and rescued changes; throws roformer::Error listing every refused one and what
// to do, naming the checkpoint directory.
void check_resume_changes(const config::Config& checkpoint, const config::Config& now, const std::string& resume_dir);

// What to do after a non-finite step: resume from the newest intact checkpoint of
// checkpoints_dir saved at step <= max_step (the state the failing step started from replays the
// same failure), or start over. One or two sentences for the error message.
std::string nonfinite_resume_advice(const std::string& checkpoints_dir, const std::string& run_dir, int64_t max_step);

}  // namespace roformer::checkpoint
