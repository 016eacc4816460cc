// Autocast (mixed precision) as a scope: bf16/fp16 autocast on one device type, entered on
// construction and left on destruction, restoring the state found. Used by the training step,
// evaluation and the recomputation of checkpointed layers (which must replay the forward's state).
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "core/config.h"

namespace roformer::model {

// The autocast state of one device type.
struct AutocastState {
  bool enabled = false;
  c10::ScalarType dtype = c10::kFloat;  // the lower-precision dtype when enabled
};

// The current state for a device type.
AutocastState autocast_state(c10::DeviceType device);

class AutocastScope {
 public:
  // fp32: a no-op; bf16 or fp16: autocast to that dtype.
  AutocastScope(c10::DeviceType device, config::Precision precision);
  // Enters exactly `state` (enabled or not) for the scope.
  AutocastScope(c10::DeviceType device, const AutocastState& state);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  AutocastState previous_;
  bool nested_ = false;  // entered an enabled region (left again in the destructor)
};

}  // namespace roformer::model
