// The training loop's collectives with a world of one as the identity; see collectives.h.
#include "dist/collectives.h"

namespace roformer::dist {

std::vector<double> sum_over_ranks(ProcessGroup& group, const std::vector<double>& values, const std::string& what) {
  if (group.world_size() == 1) return values;
  auto t = torch::tensor(values, torch::kFloat64).to(group.device());
  group.all_reduce_sum(t, what);
  t = t.cpu().contiguous();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

void sum_over_ranks(ProcessGroup& group, std::vector<torch::Tensor>& scalars, const std::string& what) {
  if (group.world_size() == 1 || scalars.empty()) return;
  auto stacked = torch::stack(scalars);
  group.all_reduce_sum(stacked, what);
  for (size_t i = 0; i < scalars.size(); ++i) scalars[i] = stacked[static_cast<int64_t>(i)];
}

}  // namespace roformer::dist
