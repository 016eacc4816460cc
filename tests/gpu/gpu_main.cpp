// main() of every tests/gpu binary: runs the tests when LibTorch sees a CUDA device, otherwise
// prints why and exits 77, which CTest reports as skipped (SKIP_RETURN_CODE), never as passed.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <iostream>

#include "core/device.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!roformer::core::built_with_cuda()) {
    std::cout << "SKIPPED: built against a CPU-only LibTorch; the GPU tests need a CUDA build\n";
    return 77;
  }
  if (!torch::cuda::is_available()) {
    std::cout << "SKIPPED: no CUDA device visible (torch::cuda::is_available() is false); run on a GPU machine "
                 "(scripts/gpu_check.sh)\n";
    return 77;
  }
  return RUN_ALL_TESTS();
}
