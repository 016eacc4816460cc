// The process's peak memory so far, as `roformer bench` and the training run's summary report it:
// on CUDA the caching allocator's peak of allocated bytes on that device (what the tensors held at
// most, without the cache's slack), on the CPU the process's peak resident set.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace roformer::core {

struct PeakMemory {
  int64_t bytes = 0;
  std::string kind;  // "CUDA allocator peak allocated" or "process peak RSS"
};

PeakMemory peak_memory(const c10::Device& device);

}  // namespace roformer::core
