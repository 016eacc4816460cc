// The rows the device script measures (scripts/gpu_check.sh reads `roformer bench --list-variants`):
// each a name and the `roformer bench` arguments of one training-step variant. Generated from the
// kernel policy's table (model/kernel_policy.cpp kernel_alternatives(): the CUDA fast paths against
// their reference, each alternative off by default, each group together) and the config's levers
// listed in variants.cpp, so a new alternative is measured without touching the script.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::bench {

// One row: {batch2}, {batch4} in the arguments stand for twice and four times the row's batch;
// `seq` is set for the rows of the script's `kernels` call, whose order is the order they run in.
struct BenchVariant {
  std::string name, args;
  int64_t seq = 0;
};

// The rows of `set`: "all" (gpu_check.sh variants: each CUDA fast path against the reference, each
// alternative of the kernel policy, the config's levers) or "kernels" (gpu_check.sh kernels: the
// fused ops and the levers at two lengths, the most telling first). Throws roformer::Error for
// another set.
std::vector<BenchVariant> bench_variants(const std::string& set);

// The rows as the script reads them, one per line: "name|arguments" ("seq|name|arguments" for kernels).
std::string variant_lines(const std::string& set);

}  // namespace roformer::bench
