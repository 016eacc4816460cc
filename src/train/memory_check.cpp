// The lower-bound memory estimate of a training run and its refusal; see memory_check.h.
#include "train/memory_check.h"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "core/error.h"

namespace roformer::train {

MemoryEstimate estimate_training_memory(const config::Config& c, int64_t vocab_size) {
  const auto& m = c.model;
  // double throughout: the products of absurd values overflow 64-bit integers.
  const double V = static_cast<double>(vocab_size), H = static_cast<double>(m.hidden_size);
  const double E = static_cast<double>(config::effective_embedding_size(m));
  const double I = static_cast<double>(m.intermediate_size), L = static_cast<double>(m.num_layers);
  const double N = static_cast<double>(m.num_heads), T = static_cast<double>(c.data.max_seq_len);
  const double B = static_cast<double>(c.train.batch_size);
  const double embeddings = V * E + static_cast<double>(m.type_vocab_size) * E + 2 * E + (E < H ? E * H + H : 0);
  const double attention = 4 * (H * H + H), feed_forward = 2 * H * I + I + H;
  const double layers = L * (attention + feed_forward + 4 * H);
  const double head = H * E + 3 * E + V;
  MemoryEstimate e;
  e.parameters = embeddings + layers + head;
  // fp32 weights, gradients and two AdamW moments; bf16 parameters add their bf16 copy and its gradients.
  e.parameter_bytes = (c.train.param_dtype == config::ParamDtype::kBf16 ? 20 : 16) * e.parameters;
  const double value_bytes = c.train.precision == config::Precision::kFp32 ? 4 : 2;
  const double per_layer = N * T + 4 * H + I;  // per token
  const double kept = m.gradient_checkpointing ? per_layer + L * H : L * per_layer;
  e.activation_bytes = B * T * kept * value_bytes;
  if (e.activation_bytes > e.parameter_bytes) {
    e.largest_key = "train.batch_size";
  } else {
    const double terms[] = {V * E, L * attention, L * 2 * H * I, static_cast<double>(m.type_vocab_size) * E};
    const char* keys[] = {m.vocab_size > 0 ? "model.vocab_size" : "tokenizer.vocab_size", "model.hidden_size",
                          "model.intermediate_size", "model.type_vocab_size"};
    e.largest_key = keys[std::max_element(std::begin(terms), std::end(terms)) - std::begin(terms)];
  }
  return e;
}

void check_training_memory(const config::Config& c, int64_t vocab_size, double available,
                           const std::string& device_name) {
  if (available <= 0) return;
  const MemoryEstimate e = estimate_training_memory(c, vocab_size);
  if (e.total() <= available) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  throw Error(fmt::format(
      "the run needs at least {:.3g} GiB but {} has {:.3g} GiB: parameters, gradients and AdamW state take {:.3g} "
      "GiB ({:.3g} parameters), the activations of one micro-batch of {} x {} tokens at least {:.3g} GiB. Lower {} "
      "(the largest share){}",
      e.total() / kGiB, device_name, available / kGiB, e.parameter_bytes / kGiB, e.parameters, c.train.batch_size,
      c.data.max_seq_len, e.activation_bytes / kGiB, e.largest_key,
      e.largest_key == "train.batch_size" ? "; train.grad_accum keeps the batch per step with smaller micro-batches"
                                          : ""));
}

}  // namespace roformer::train
