// `roformer bench kernels`: each fused op of src/kernels against its ATen path at RoFormer-base
// shapes: the bytes the fused kernels move and that floor at a bandwidth, and on a GPU with the
// compiled kernels each path's microseconds per call, GB/s and GPU operations per call. A program
// that prints figures (docs/kernels.md), never a test with a time limit.
#pragma once

#include <cstdint>
#include <string>

namespace roformer::bench {

struct KernelsBenchOptions {
  bool dry_run = false;       // bytes and floors only (also without a GPU or without the kernels)
  int64_t iters = 20;         // timed calls per path; the median is reported
  int64_t warmup = 5;         // calls before timing
  double bandwidth = 3.0e12;  // bytes per second of the floors (what an H100 copies)
  std::string json;           // also one JSON record per op to this file (scripts/gpu_check.sh kernels)
};

// Prints the table to stdout; throws roformer::Error for bad options or an unwritable --json file.
void run_kernels_benchmark(const KernelsBenchOptions& options);

}  // namespace roformer::bench
