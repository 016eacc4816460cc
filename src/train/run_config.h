// A run's config, checked whole: the table's checks (core/config.h: types, ranges, choices), then
// the rules of each component, each in the component's own file (issue 52):
//   the learning-rate schedule          validate_schedule (train/schedule.h)
//   the rest, not yet moved             config::validate (core/config.cpp)
// `roformer train`, `roformer bench` and `roformer config print` load their configs here; a reader of
// a checkpoint's config.yaml (checkpoint/meta.h) gets the table's checks, and the run that resumes
// from it these rules again (train/launch.cpp).
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace roformer::train {

// Throws roformer::Error "invalid config: ..." naming the key to change.
void validate_run_config(const config::Config& c);

// config::load_config / parse_config, then validate_run_config.
config::Config load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});
config::Config parse_run_config(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                                const std::string& origin = "<string>");

}  // namespace roformer::train
