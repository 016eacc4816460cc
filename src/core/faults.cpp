// The test-only fault injection settings, read from the environment; see core/faults.h.
#include "core/faults.h"

#include <cstdlib>

namespace roformer::core {

namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoll(value) : fallback;
}

}  // namespace

Faults Faults::from_environment() {
  Faults f;
  f.nonfinite_grad_at_step = env_int("ROFORMER_FAULT_NONFINITE_GRAD_AT_STEP", -1);
  f.oom_at_step = env_int("ROFORMER_FAULT_OOM_AT_STEP", -1);
  f.kill_in_save_at_step = env_int("ROFORMER_FAULT_KILL_IN_SAVE_AT_STEP", -1);
  f.save_delay_ms = env_int("ROFORMER_FAULT_SAVE_DELAY_MS", 0);
  f.publish_delay_ms = env_int("ROFORMER_FAULT_PUBLISH_DELAY_MS", 0);
  f.read_lock_wait_ms = env_int("ROFORMER_FAULT_READ_LOCK_WAIT_MS", f.read_lock_wait_ms);
  return f;
}

}  // namespace roformer::core
