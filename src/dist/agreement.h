// Do all ranks hold the same parameters? Data parallelism keeps them bit-identical (same initial
// values broadcast from rank 0, same summed gradients, same optimizer arithmetic), so a checkpoint
// save verifies it: every rank hashes the bytes of its parameters (64-bit core::Hasher over the
// tensors in order, with their shapes), the hashes are all-gathered and compared with rank 0's.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace roformer::dist {

struct ParameterAgreement {
  bool agree = true;
  uint64_t checksum = 0;                // this rank's
  std::vector<uint64_t> checksums;      // every rank's, indexed by rank
  std::vector<int> disagreeing_ranks;   // ranks whose checksum differs from rank 0's
  std::string message() const;          // "parameters agree on all N ranks" / names the ranks
};

// 64-bit hash of the tensors' shapes, dtypes and bytes (copied to CPU), in order.
uint64_t parameters_checksum(const std::vector<torch::Tensor>& parameters);

// Collective: every rank's 64-bit `value` (exact: all-gathered as two 32-bit halves) into *values
// (when given), and the ranks whose value differs from rank 0's.
std::vector<int> ranks_differing_from_rank0(ProcessGroup& group, uint64_t value, const std::string& what,
                                            std::vector<uint64_t>* values = nullptr);

// Collective: every rank must call it with its parameters in the same order.
ParameterAgreement check_parameters_agree(ProcessGroup& group, const std::vector<torch::Tensor>& parameters);

// Collective: copies rank 0's parameter values to every rank (call once after building the model,
// so that ranks start identical whatever their initialization RNG did).
void broadcast_parameters(ProcessGroup& group, const std::vector<torch::Tensor>& parameters);

}  // namespace roformer::dist
