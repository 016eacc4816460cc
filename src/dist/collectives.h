// The training loop's collectives, written so that a world of one needs no branch at the call site:
// sums of host counters and of device tensors over the ranks, and a rank's share of a list. For a
// world of one each returns its input as it is, without device traffic or a host sync.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "dist/process_group.h"

namespace roformer::dist {

// Host values summed over the ranks (one all-reduce in float64 on the group's device).
std::vector<double> sum_over_ranks(ProcessGroup& group, const std::vector<double>& values, const std::string& what);

// Device scalars summed over the ranks in place (one all-reduce of their stack).
void sum_over_ranks(ProcessGroup& group, std::vector<torch::Tensor>& scalars, const std::string& what);

// Every world_size-th item starting at this rank's index (a world of one: all of them).
template <class T>
std::vector<T> rank_share(const ProcessGroup& group, const std::vector<T>& items) {
  std::vector<T> out;
  for (size_t i = static_cast<size_t>(group.rank()); i < items.size(); i += static_cast<size_t>(group.world_size()))
    out.push_back(items[i]);
  return out;
}

}  // namespace roformer::dist
