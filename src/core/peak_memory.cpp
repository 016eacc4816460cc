// Peak memory of the process; see peak_memory.h.
#include "core/peak_memory.h"

#include <ATen/DeviceAccelerator.h>
#include <sys/resource.h>

namespace roformer::core {

PeakMemory peak_memory(const c10::Device& device) {
  if (device.is_cuda()) {
    const int64_t bytes = at::accelerator::getDeviceStats(device.index())
                              .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
                              .peak;
    return {bytes, "CUDA allocator peak allocated"};
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return {static_cast<int64_t>(usage.ru_maxrss) * 1024, "process peak RSS"};  // KiB on Linux
}

}  // namespace roformer::core
