// AutocastScope; see autocast.h.
#include "model/autocast.h"

#include <ATen/autocast_mode.h>

namespace roformer::model {

AutocastState autocast_state(c10::DeviceType device) {
  return {at::autocast::is_autocast_enabled(device), at::autocast::get_autocast_dtype(device)};
}

AutocastScope::AutocastScope(c10::DeviceType device, config::Precision precision)
    : AutocastScope(device, precision == config::Precision::kFp32
                                ? autocast_state(device)
                                : AutocastState{true, precision == config::Precision::kFp16 ? c10::kHalf : c10::kBFloat16}) {}

AutocastScope::AutocastScope(c10::DeviceType device, const AutocastState& state)
    : device_(device), previous_(autocast_state(device)) {
  at::autocast::set_autocast_dtype(device, state.dtype);
  at::autocast::set_autocast_enabled(device, state.enabled);
  if (state.enabled) {
    at::autocast::increment_nesting();
    nested_ = true;
  }
}

AutocastScope::~AutocastScope() {
  // Leaving the outermost autocast region drops the cast-weight cache (fresh weights next step).
  if (nested_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, previous_.enabled);
  at::autocast::set_autocast_dtype(device_, previous_.dtype);
}

}  // namespace roformer::model
