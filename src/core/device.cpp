// Device names, binding and CUDA queries; see device.h. The CUDA-only calls (device properties,
// sync-debug mode) are compiled when CMake finds a CUDA LibTorch (ROFORMER_WITH_CUDA); the rest uses
// the device-generic accelerator API, so a CPU-only LibTorch builds this file too.
#include "core/device.h"

#include <ATen/DeviceAccelerator.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <optional>

#include <fmt/format.h>

#include "core/error.h"

#ifdef ROFORMER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace roformer::core {

c10::Device resolve_device(const std::string& name, const std::string& key) {
  const bool cuda = torch::cuda::is_available();
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name == "auto" && !cuda) return c10::Device(c10::kCPU);
  std::optional<c10::Device> parsed;
  if (name == "auto") {
    parsed = c10::Device(c10::kCUDA);
  } else {
    try {
      parsed = c10::Device(name);
    } catch (const c10::Error&) {
    }
  }
  if (!parsed || !parsed->is_cuda())
    throw Error(fmt::format("{} is '{}': use auto, cpu, cuda or cuda:N", key, name));
  if (!cuda)
    throw Error(fmt::format("{} is '{}' but no CUDA device is available (LibTorch sees none); use auto or cpu",
                            key, name));
  const auto count = static_cast<int64_t>(torch::cuda::device_count());
  if (!parsed->has_index()) return c10::Device(c10::kCUDA, at::accelerator::getDeviceIndex());
  if (parsed->index() >= count)
    throw Error(fmt::format("{} is '{}' but this machine has {} visible CUDA device(s) (cuda:0{}); pick one of "
                            "them or check CUDA_VISIBLE_DEVICES", key, name, count,
                            count > 1 ? fmt::format(" to cuda:{}", count - 1) : std::string()));
  return *parsed;
}

void use_device(const c10::Device& device) {
  if (device.is_cuda()) at::accelerator::setDeviceIndex(device.index());
}

c10::Device select_device(const std::string& name, const std::string& key) {
  const auto device = resolve_device(name, key);
  use_device(device);
  return device;
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

bool built_with_cuda() {
#ifdef ROFORMER_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::string device_name(const c10::Device& device) {
  if (!device.is_cuda()) return "cpu";
#ifdef ROFORMER_WITH_CUDA
  return at::cuda::getDeviceProperties(device.index())->name;
#else
  return fmt::format("CUDA device {}", device.index());
#endif
}

// Dense (no sparsity) peaks from NVIDIA's data sheets, by the name the driver reports: the H100's
// three form factors differ (SXM5 "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL"),
// the H200 SXM matches the H100 SXM (its gain is memory) and the H200 NVL the H100 NVL. fp32 is
// the non-tensor-core FP32 rate (LibTorch keeps TF32 off for matmuls by default).
double known_peak_tflops(const std::string& name, config::Precision precision) {
  const bool half = precision != config::Precision::kFp32;
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("H100") || has("H200") || has("GH200")) {
    if (has("PCIe")) return half ? 756.0 : 51.0;
    if (has("NVL")) return half ? 835.0 : 60.0;
    return half ? 989.0 : 67.0;  // SXM (H100 SXM5, H200 SXM, GH200)
  }
  if (has("A100")) return half ? 312.0 : 19.5;
  return 0.0;
}

double device_memory_bytes(const c10::Device& device) {
  if (!device.is_cuda()) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
  }
#ifdef ROFORMER_WITH_CUDA
  return static_cast<double>(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
#else
  return 0.0;
#endif
}

void set_cuda_sync_debug_mode(int mode) {
#ifdef ROFORMER_WITH_CUDA
  c10::cuda::warning_state().set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(mode));
#else
  (void)mode;
  throw Error("this build has no CUDA support (CMake found a CPU-only LibTorch), so there is no sync-debug mode");
#endif
}

}  // namespace roformer::core
