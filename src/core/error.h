// User-facing errors. A user mistake (bad config, missing file, wrong checkpoint) is thrown as
// roformer::Error with a message that says what is wrong and what to do; `main` prints it without a
// stack trace and exits non-zero. Tensor invariants use TORCH_CHECK instead.
#pragma once

#include <stdexcept>
#include <string>

namespace roformer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace roformer
