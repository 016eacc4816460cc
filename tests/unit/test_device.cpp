// Device names (src/core/device.h): every spelling resolves to a concrete device (CUDA with its
// index), and a device that is absent or misspelled is refused naming the key. The CUDA-side
// behaviour (binding cuda:N, device names) is tested in tests/gpu.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "core/device.h"
#include "core/error.h"
#include "test_util.h"

namespace {

using roformer::core::resolve_device;
using roformer::test::error_of;

TEST(Device, CpuAndAutoResolve) {
  EXPECT_EQ(resolve_device("cpu", "train.device"), c10::Device(c10::kCPU));
  const auto automatic = resolve_device("auto", "train.device");
  if (torch::cuda::is_available()) {
    EXPECT_TRUE(automatic.is_cuda());
    EXPECT_TRUE(automatic.has_index()) << "CUDA devices always carry their index (-1 breaks allocator stats)";
  } else {
    EXPECT_TRUE(automatic.is_cpu());
  }
  EXPECT_EQ(roformer::core::device_name(c10::Device(c10::kCPU)), "cpu");
}

TEST(Device, MisspelledNamesAreRefusedNamingTheKey) {
  for (const std::string bad : {"gpu", "cuda:x", "", "mps", "cpu:0x"}) {
    const std::string msg = error_of([&] { resolve_device(bad, "--device"); });
    EXPECT_NE(msg.find("--device is '" + bad + "': use auto, cpu, cuda or cuda:N"), std::string::npos) << msg;
  }
}

TEST(Device, CudaWithoutCudaOrOutOfRangeIsRefused) {
  if (!torch::cuda::is_available()) {
    for (const std::string name : {"cuda", "cuda:0", "cuda:1"}) {
      const std::string msg = error_of([&] { resolve_device(name, "train.device"); });
      EXPECT_NE(msg.find("train.device is '" + name + "' but no CUDA device is available"), std::string::npos) << msg;
    }
    return;
  }
  const auto count = torch::cuda::device_count();
  EXPECT_EQ(resolve_device("cuda", "train.device").index(), 0);
  const std::string name = "cuda:" + std::to_string(count);
  const std::string msg = error_of([&] { resolve_device(name, "train.device"); });
  EXPECT_NE(msg.find("visible CUDA device(s)"), std::string::npos) << msg;
}

}  // namespace
