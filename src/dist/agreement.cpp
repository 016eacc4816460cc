// Parameter checksums across ranks (see agreement.h).
#include "dist/agreement.h"

#include <torch/torch.h>

#include "core/hash.h"

namespace roformer::dist {

uint64_t parameters_checksum(const std::vector<torch::Tensor>& parameters) {
  core::Hasher hasher;
  for (const auto& p : parameters) {
    const auto t = p.detach().to(torch::kCPU).contiguous();
    const int64_t header[2] = {static_cast<int64_t>(t.scalar_type()), t.dim()};
    hasher.update(header, sizeof(header));
    hasher.update(t.sizes().data(), sizeof(int64_t) * static_cast<size_t>(t.dim()));
    hasher.update(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  }
  return hasher.digest();
}

std::vector<int> ranks_differing_from_rank0(ProcessGroup& group, uint64_t value, const std::string& what,
                                            std::vector<uint64_t>* values) {
  // Two 32-bit halves: each is exact in the double that all_gather carries.
  const auto high = group.all_gather(static_cast<double>(value >> 32), what);
  const auto low = group.all_gather(static_cast<double>(value & 0xffffffffULL), what);
  std::vector<int> differing;
  for (size_t r = 0; r < high.size(); ++r) {
    const uint64_t v = (static_cast<uint64_t>(high[r]) << 32) | static_cast<uint64_t>(low[r]);
    if (values) values->push_back(v);
    if (v != ((static_cast<uint64_t>(high[0]) << 32) | static_cast<uint64_t>(low[0])))
      differing.push_back(static_cast<int>(r));
  }
  return differing;
}

ParameterAgreement check_parameters_agree(ProcessGroup& group, const std::vector<torch::Tensor>& parameters) {
  ParameterAgreement out;
  if (group.world_size() == 1) {  // one process agrees with itself (no pass over the parameters)
    out.agree = true;
    return out;
  }
  out.checksum = parameters_checksum(parameters);
  out.disagreeing_ranks =
      ranks_differing_from_rank0(group, out.checksum, "parameter checksum all_gather", &out.checksums);
  out.agree = out.disagreeing_ranks.empty();
  return out;
}

std::string ParameterAgreement::message() const {
  if (agree) return "parameters agree on all " + std::to_string(checksums.size()) + " ranks";
  return "parameters of rank(s) " + format_ranks(disagreeing_ranks) +
         " differ from rank 0's (checksums differ): the ranks have diverged";
}

void broadcast_parameters(ProcessGroup& group, const std::vector<torch::Tensor>& parameters) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> data;
  for (const auto& p : parameters) data.push_back(p.detach());
  group.broadcast(data, 0, "parameter broadcast from rank 0");
}

}  // namespace roformer::dist
