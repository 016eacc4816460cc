// Fault injection for the tests: failures a test cannot otherwise provoke on demand (an infinite
// gradient, an out-of-memory error, a kill in the middle of a save, a slow save), and waits a test
// shortens. The environment (ROFORMER_FAULT_*) is read once, where a command starts, into this plain
// value; the components that inject a fault take it from there, and tests in the same process set
// its fields directly.
#pragma once

#include <cstdint>

namespace roformer::core {

struct Faults {
  int64_t nonfinite_grad_at_step = -1;  // ROFORMER_FAULT_NONFINITE_GRAD_AT_STEP: one gradient set to +inf at this step
  int64_t oom_at_step = -1;             // ROFORMER_FAULT_OOM_AT_STEP: the allocator's out-of-memory error at this step
  int64_t kill_in_save_at_step = -1;    // ROFORMER_FAULT_KILL_IN_SAVE_AT_STEP: SIGKILL midway through this step's save
  int64_t save_delay_ms = 0;            // ROFORMER_FAULT_SAVE_DELAY_MS: each save sleeps this long midway
  int64_t publish_delay_ms = 0;         // ROFORMER_FAULT_PUBLISH_DELAY_MS: each publish (core/publish.h) sleeps
                                        // this long between removing the old files and renaming the new ones
  int64_t read_lock_wait_ms = 60000;    // ROFORMER_FAULT_READ_LOCK_WAIT_MS: how long a checkpoint's reader waits
                                        // for another process's exclusive lock on it before giving up

  static Faults from_environment();
};

}  // namespace roformer::core
