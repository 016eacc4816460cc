// libFuzzer target: a checkpoint's trainer_state.json (checkpoint::parse_trainer_state). What it
// accepts is usable as is: counts non-negative, at least one process, a positive loss scale.
#include <cmath>

#include "fuzz_util.h"
#include "checkpoint/trainer_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace roformer;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::accepts([&] {
    const auto s = checkpoint::parse_trainer_state(text, "trainer_state.json");
    fuzz::require(s.step >= 0 && s.tokens_seen >= 0 && s.loader_epoch >= 0 && s.loader_position >= 0,
                  "a negative count");
    fuzz::require(s.world_size >= 1, "no process");
    fuzz::require(std::isfinite(s.loss_scale) && s.loss_scale > 0, "a bad loss scale");
  });
  return 0;
}
