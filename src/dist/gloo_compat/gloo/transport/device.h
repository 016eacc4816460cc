// Declarations only; see src/dist/gloo_compat/README.md.
#pragma once

namespace gloo::transport {
class Device;
class UnboundBuffer;
}  // namespace gloo::transport
