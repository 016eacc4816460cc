// Dropout draws of the fused kernels from PyTorch's CUDA generator; see dropout_rng.h.
#include "kernels/dropout_rng.h"

#include "kernels/triton_runtime.h"

#ifdef ROFORMER_WITH_TRITON_KERNELS
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <mutex>

namespace roformer::kernels {

#ifdef ROFORMER_WITH_TRITON_KERNELS

DropoutRng reserve_dropout_rng(const torch::Device& device, int64_t n) {
  TORCH_CHECK(device.is_cuda() && n >= 0, "reserve_dropout_rng: a CUDA device and n >= 0, got ", device, ", ", n);
  auto gen = at::cuda::detail::getDefaultCUDAGenerator(device.index());
  at::PhiloxCudaState state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get<at::CUDAGeneratorImpl>()->philox_cuda_state(static_cast<uint64_t>((n + 3) / 4 * 4));
  }
  DropoutRng rng;
  if (state.captured_) {
    rng.seed = state.seed_.ptr;
    rng.offset = state.offset_.ptr;
    rng.offset_add = static_cast<int64_t>(state.offset_intragraph_);
    return rng;
  }
  // Outside a capture the values are known here; non_blocking: a 16-byte staged copy, no host sync.
  auto host = torch::tensor({static_cast<int64_t>(state.seed_.val), static_cast<int64_t>(state.offset_.val)}, torch::kLong);
  rng.storage = host.to(device, /*non_blocking=*/true);
  rng.seed = rng.storage.data_ptr<int64_t>();
  rng.offset = rng.seed + 1;
  return rng;
}

torch::Tensor dropout_keep_mask(const torch::Device& device, int64_t n, double p) {
  auto rng = reserve_dropout_rng(device, n);
  auto keep = torch::empty({n}, torch::TensorOptions().dtype(torch::kByte).device(device));
  KernelArgs args = triton::dropout_keep_mask::args(rng.seed, rng.offset, rng.offset_add, keep, n, p);
  const auto programs = static_cast<uint32_t>((n + 1023) / 1024);  // BLOCK = 1024 (layer_norm.py, aot_variants)
  launch_triton(triton::dropout_keep_mask::kKernel, "u8", device, {programs, 1, 1}, args);
  return keep;
}

#else

DropoutRng reserve_dropout_rng(const torch::Device& device, int64_t) {
  TORCH_CHECK(false, "reserve_dropout_rng(", device, ") needs a build with the fused kernels");
}

torch::Tensor dropout_keep_mask(const torch::Device& device, int64_t, double) {
  TORCH_CHECK(false, "dropout_keep_mask(", device, ") needs a build with the fused kernels");
}

#endif

}  // namespace roformer::kernels
