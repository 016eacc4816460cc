// The lower-bound memory estimate of a training run and its refusal; see memory_check.h.
#include "train/memory_check.h"

#include <fmt/format.h>

#include "core/error.h"
#include "model/options.h"
#include "model/size.h"
#include "train/length_phases.h"

namespace roformer::train {

MemoryEstimate estimate_training_memory(const config::Config& c, int64_t vocab_size) {
  const auto& m = c.model;
  const model::RoFormerOptions options(m, vocab_size);
  const auto size = model::model_size(options, m.vocab_size > 0 ? "model.vocab_size" : "tokenizer.vocab_size");
  // double throughout: the products of absurd values overflow 64-bit integers.
  const double H = static_cast<double>(m.hidden_size), I = static_cast<double>(m.intermediate_size);
  const double L = static_cast<double>(m.num_layers), N = static_cast<double>(m.num_heads);
  MemoryEstimate e;
  e.parameters = size.parameters();
  // fp32 weights, gradients and two AdamW moments; bf16 parameters add their bf16 copy and its gradients.
  const double bytes_per_parameter = c.train.param_dtype == config::ParamDtype::kBf16 ? 20 : 16;
  e.parameter_bytes = bytes_per_parameter * e.parameters;
  e.buffer_bytes = size.buffer_bytes();
  const double value_bytes = c.train.precision == config::Precision::kFp32 ? 4 : 2;
  const auto scheme = model::make_position_scheme(options);
  const auto phases = resolve_length_phases(c);
  std::string batch_key = "train.batch_size";
  for (size_t i = 0; i < phases.size(); ++i) {  // the length phase whose micro-batch needs most
    const double T = static_cast<double>(phases[i].max_seq_len), B = static_cast<double>(phases[i].batch_size);
    const double ffn = m.feed_forward == config::FeedForward::kGlu ? 3 * I : I;  // glu: W_1's 2I and the product
    const double per_layer = N * T + 4 * H + ffn + scheme->activations_per_token(phases[i].max_seq_len);
    const double kept = m.gradient_checkpointing ? per_layer + L * H : L * per_layer;
    const double bytes = B * T * kept * value_bytes;
    if (i > 0 && bytes <= e.activation_bytes) continue;
    e.activation_bytes = bytes;
    e.batch_size = phases[i].batch_size;
    e.seq_len = phases[i].max_seq_len;
    batch_key = phases[i].batch_key;
  }
  e.largest_key = e.activation_bytes > e.parameter_bytes + e.buffer_bytes ? batch_key
                                                                          : size.largest_key(bytes_per_parameter);
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
      "GiB ({:.3g} parameters){}, the activations of one micro-batch of {} x {} tokens at least {:.3g} GiB. Lower {} "
      "(the largest share){}",
      e.total() / kGiB, device_name, available / kGiB, e.parameter_bytes / kGiB, e.parameters,
      e.buffer_bytes > 0 ? fmt::format(", position tables {:.3g} GiB", e.buffer_bytes / kGiB) : "",
      e.batch_size, e.seq_len, e.activation_bytes / kGiB, e.largest_key,
      e.largest_key.find("batch_size") != std::string::npos
          ? "; train.grad_accum keeps the batch per step with smaller micro-batches"
          : ""));
}

}  // namespace roformer::train
