// Declarations only; see src/dist/gloo_compat/README.md.
#pragma once
#include <chrono>

namespace gloo {
class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);  // named by ProcessGroupGloo::setTimeout (never called here)
};
}  // namespace gloo
