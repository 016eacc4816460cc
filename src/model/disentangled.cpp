// Disentangled attention's relative positions; see disentangled.h.
#include "model/disentangled.h"

#include <torch/torch.h>

namespace roformer::model {

int64_t relative_span(const config::ModelConfig& m) {
  return m.position_buckets > 0 ? m.position_buckets : config::effective_max_relative_positions(m);
}

torch::Tensor log_bucket_positions(const torch::Tensor& distance, int64_t buckets, int64_t max_relative) {
  const int64_t mid = buckets / 2;
  auto sign = torch::sign(distance);
  // Distances inside (-mid, mid) get a placeholder (their log is never used).
  auto abs_pos = torch::where((distance < mid) & (distance > -mid), torch::full({}, mid - 1, distance.options()),
                              distance.abs());
  // abs_pos / mid is a true division to float32, and the denominator a float32 scalar: HF's dtypes.
  auto denominator = torch::log(torch::tensor(static_cast<double>(max_relative - 1) / static_cast<double>(mid),
                                              torch::kFloat));
  auto log_pos = torch::ceil(torch::log(abs_pos / mid) / denominator * (mid - 1)) + mid;
  return torch::where(abs_pos <= mid, distance.to(log_pos.scalar_type()), log_pos * sign).to(torch::kLong);
}

RelativeIndex relative_index(int64_t seq_len, const config::ModelConfig& m, const torch::Device& device) {
  const int64_t T = seq_len, S = relative_span(m);
  auto distance = torch::arange(-(T - 1), T, torch::kLong);  // (2T - 1): i - j
  auto bucket = m.position_buckets > 0
                    ? log_bucket_positions(distance, m.position_buckets, config::effective_max_relative_positions(m))
                    : distance;
  auto row = torch::clamp(bucket + S, 0, 2 * S - 1);  // delta, HF's c2p_pos
  RelativeIndex r;
  r.first_row = row.min().item<int64_t>();
  r.rows = row.max().item<int64_t>() - r.first_row + 1;
  auto i = torch::arange(T, torch::kLong).unsqueeze(1), j = torch::arange(T, torch::kLong).unsqueeze(0);
  r.index = (row - r.first_row).index({i - j + (T - 1)}).to(device);  // (T, T)
  return r;
}

torch::Tensor disentangled_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& pos_key,
                                  const torch::Tensor& pos_query, const torch::Tensor& index, double scale) {
  const int64_t B = q.size(0), N = q.size(1), T = q.size(2);
  torch::Tensor scores;  // (B, N, T, T)
  if (pos_key.defined()) {
    auto c2p = torch::matmul(q, pos_key.transpose(-1, -2));  // (B, N, T, R): q_i against every row
    scores = c2p.gather(-1, index.expand({B, N, T, T}));     // [i][j] = row index[i][j]
  }
  if (pos_query.defined()) {
    auto p2c = torch::matmul(k, pos_query.transpose(-1, -2));  // (B, N, T, R): k_j against every row
    // Gathered at [j][i] = row index[i][j] of k_j's scores, then transposed to [i][j]. HF gathers at
    // clamp(S - bucket(j - i)), which is index[i][j]: the buckets are odd in the distance.
    auto term = p2c.gather(-1, index.t().expand({B, N, T, T})).transpose(-1, -2);
    scores = scores.defined() ? scores + term : term;
  }
  return scores * scale;
}

}  // namespace roformer::model
