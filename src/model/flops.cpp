// Training FLOPs per step; see flops.h for the formula.
#include "model/flops.h"

#include <torch/torch.h>

#include "model/position.h"

namespace roformer::model {

double mlm_train_flops_per_step(const RoFormerOptions& o, int64_t batch, int64_t seq_len, int64_t n_pred) {
  const double B = static_cast<double>(batch), T = static_cast<double>(seq_len), P = static_cast<double>(n_pred);
  const auto& m = o.model();
  const double H = static_cast<double>(m.hidden_size), E = static_cast<double>(o.embedding_size());
  const double I = static_cast<double>(m.intermediate_size), V = static_cast<double>(m.vocab_size);
  const double D = H / static_cast<double>(m.num_heads);
  const double tokens = B * T;
  double forward = 0.0;
  if (o.embedding_size() != m.hidden_size) forward += 2.0 * tokens * E * H;
  // Q, K, V, O; the feed-forward's W_1 (glu: to 2I) and W_2.
  const double inner = m.feed_forward == config::FeedForward::kGlu ? 2.0 * I : I;
  double layer = 4.0 * 2.0 * tokens * H * H + 2.0 * tokens * H * (inner + I);
  layer += m.attention == config::Attention::kLinear ? 2.0 * 2.0 * tokens * H * D : 2.0 * 2.0 * B * T * T * H;
  const auto positions = make_position_scheme(o);
  layer += positions->flops_per_layer(batch, seq_len);
  const int64_t passes = m.num_layers + positions->extra_layer_passes();
  forward += static_cast<double>(passes) * layer;
  forward += 2.0 * P * H * E + 2.0 * P * E * V;
  return 3.0 * forward;
}

double model_flops_utilization(double flops_per_step, double seconds_per_step, double peak_tflops, int devices) {
  return flops_per_step / seconds_per_step / (peak_tflops * 1e12 * static_cast<double>(devices));
}

}  // namespace roformer::model
