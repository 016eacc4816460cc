// The resume policy: which differences between a checkpoint's config and the resuming run's are
// applied, applied with a warning (rescuing a diverged run), or refused (they change the model or
// the data), as the config table's resume column says of each key (config::resume_of, core/config.h).
// docs/training.md "Resuming" lists the keys. Also which checkpoint a run that met a non-finite value
// can resume from.
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
  std::vector<config::ConfigChange> unused;   // keys no step from the resume on reads: still exact
};

// The differences (config::diff, field by field), sorted by the resume column of each key; those of
// `unused` (keys the caller knows no remaining step reads: train/length_phases.h keys_unused_from)
// apart, whatever their column.
ResumeChanges classify_resume_changes(const config::Config& checkpoint, const config::Config& now,
                                      const std::vector<std::string>& unused = {});

// Logs the applied and rescued changes; throws roformer::Error listing every refused one and what
// to do, naming the checkpoint directory.
void check_resume_changes(const config::Config& checkpoint, const config::Config& now, const std::string& resume_dir,
                          const std::vector<std::string>& unused = {});

// What to do after a non-finite step: resume from the newest intact checkpoint of
// checkpoints_dir saved at step <= max_step (the state the failing step started from replays the
// same failure), or start over. One or two sentences for the error message.
std::string nonfinite_resume_advice(const std::string& checkpoints_dir, const std::string& run_dir, int64_t max_step);

}  // namespace roformer::checkpoint
