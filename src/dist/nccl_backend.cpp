// ProcessGroupNCCL construction, compiled only when CMake finds torch_cuda and nccl.h
// (ROFORMER_WITH_NCCL, which also defines USE_C10D_NCCL for this file). Without them the entry point
// says how to get a build that has it.
#include "dist/process_group.h"

#include "core/error.h"

#ifdef ROFORMER_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace roformer::dist {

#ifdef ROFORMER_WITH_NCCL

bool nccl_available() { return true; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout, int device_index) {
  if (device_index < 0)
    throw Error("the nccl backend needs an explicit CUDA device index (cuda:LOCAL_RANK)");
  // Each rank drives the GPU of its LOCAL_RANK; NCCL communicators are created for the current device.
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;  // enforced by the NCCL watchdog, which aborts the communicator
  auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  backend->setBoundDeviceId(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index)));
  return backend;
}

#else

bool nccl_available() { return false; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& /*store*/, int /*rank*/,
                                                    int /*size*/, std::chrono::milliseconds /*timeout*/,
                                                    int /*device_index*/) {
  throw Error(
      "this build has no NCCL support (CMake found no CUDA LibTorch or no nccl.h) ---> HINT: configure against a CUDA "
      "LibTorch with nccl.h visible (pip's nvidia-nccl package is found automatically), or train on CPU with gloo");
}

#endif

}  // namespace roformer::dist
