// The size of a model's tensors from its options; see size.h.
#include "model/size.h"

#include <algorithm>

#include "model/options.h"

namespace roformer::model {

double ModelSize::parameters() const {
  double n = 0;
  for (const auto& p : parts) n += p.parameters;
  return n;
}

double ModelSize::buffer_bytes() const {
  double n = 0;
  for (const auto& p : parts) n += p.buffer_bytes;
  return n;
}

std::string ModelSize::largest_key(double bytes_per_parameter) const {
  auto bytes = [&](const TableSize& p) { return p.parameters * bytes_per_parameter + p.buffer_bytes; };
  const auto it = std::max_element(parts.begin(), parts.end(),
                                   [&](const TableSize& a, const TableSize& b) { return bytes(a) < bytes(b); });
  return it == parts.end() ? std::string() : it->key;
}

ModelSize model_size(const RoFormerOptions& options, const std::string& vocab_key) {
  const auto& m = options.model();
  // double throughout: the products of absurd values overflow 64-bit integers.
  const double V = static_cast<double>(m.vocab_size), H = static_cast<double>(m.hidden_size);
  const double E = static_cast<double>(options.embedding_size()), I = static_cast<double>(m.intermediate_size);
  const double L = static_cast<double>(m.num_layers);
  const double b = m.bias ? 1 : 0;  // model.bias false: no biases in linear layers and LayerNorms
  const double attention = 4 * (H * H + b * H), layer_norms = 2 * (1 + b) * H;
  const double embeddings = (1 + b) * E + (E < H ? E * H + b * H : 0), head = H * E + (1 + 2 * b) * E;
  const double final_norm = m.norm == config::Norm::kPre ? (1 + b) * H : 0;
  // Pre-LN without model.first_attention_norm: layer 0 has no attention LayerNorm.
  const double first_norm = m.norm == config::Norm::kPre && !m.first_attention_norm ? -(1 + b) * H : 0;
  // glu: W_1 maps to 2I (W_in and W_gate).
  const double inner = m.feed_forward == config::FeedForward::kGlu ? 2 * I : I;
  ModelSize size;
  size.parts = {{vocab_key, V * E + V, 0.0},
                {"model.type_vocab_size", static_cast<double>(m.type_vocab_size) * E, 0.0},
                {"model.hidden_size", L * (attention + layer_norms + b * H) + embeddings + head + final_norm + first_norm,
                 0.0},
                {"model.intermediate_size", L * (H * inner + I * H + b * inner), 0.0}};
  for (auto& table : make_position_scheme(options)->tables()) size.parts.push_back(std::move(table));
  return size;
}

}  // namespace roformer::model
