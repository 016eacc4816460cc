// A run's config checked whole: the table's checks, then each component's rules; see run_config.h.
#include "train/run_config.h"

#include "data/loader.h"
#include "model/options.h"
#include "train/length_phases.h"
#include "train/placement.h"
#include "train/schedule.h"

namespace roformer::train {

void validate_run_config(const config::Config& c) {
  config::check_table(c);
  model::validate_model_config(c.model);
  data::validate_masking(c.masking);
  validate_length_phases(c);
  validate_schedule(c);
  validate_placement(c);
}

config::Config load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  config::Config c = config::load_config(path, overrides);
  validate_run_config(c);
  return c;
}

config::Config parse_run_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                const std::string& origin) {
  config::Config c = config::parse_config(yaml_text, overrides, origin);
  validate_run_config(c);
  return c;
}

}  // namespace roformer::train
