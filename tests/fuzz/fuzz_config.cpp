// libFuzzer target: the YAML config loader and the run's rules (train/run_config.h). The first line is also applied as a `--set` override.
// A config that loads must print (to_yaml) as YAML that loads again to the same config.
#include "core/config.h"
#include "train/run_config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace roformer;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::accepts([&] {
    const config::Config c = train::parse_run_config(text, {}, "fuzz.yaml");
    const std::string printed = config::to_yaml(c);
    fuzz::require(config::to_yaml(train::parse_run_config(printed, {}, "printed.yaml")) == printed,
                  "to_yaml does not round-trip");
  });
  const std::string first_line = text.substr(0, text.find('\n'));
  fuzz::accepts([&] {
    config::Config c;
    config::apply_override(c, first_line);
  });
  return 0;
}
