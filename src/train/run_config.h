// A run's config, checked whole: the table's checks (core/config.h: types, ranges, choices), then
// the rules of each component, each in the component's own file (issue 52):
//   the model and its position scheme   model::validate_model_config (model/options.h), which asks
//                                       each scheme's file for its keys' rules (model/position.h)
//   masking                             data::validate_masking (data/loader.h)
//   the length phases, eval length      validate_length_phases (train/length_phases.h)
//   the learning-rate schedule          validate_schedule (train/schedule.h)
//   device, precision, backend          validate_placement (train/placement.h)
// `roformer train`, `roformer bench` and `roformer config print` load their configs here; a reader of
// a checkpoint's config.yaml (checkpoint/meta.h) gets the table's checks, the model it builds the
// model's rules, and a run that resumes from it all of these again (train/launch.cpp).
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
