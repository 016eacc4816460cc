#include "train/memory_check.h"

#include <dlfcn.h>
#include <unistd.h>

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
  e.parameter_bytes = 16 * e.parameters;
  const double value_bytes = c.train.precision == "fp32" ? 4 : 2;
  const double per_layer = N * T + 4 * H + I;  // per token
  const double kept = m.gradient_checkpointing ? per_layer + L * H : L * per_layer;
  e.activation_bytes = B * T * kept * value_bytes;
  if (e.activation_bytes > e.parameter_bytes) {
    e.largest_key = "train.batch_size";
  } else {
    const double terms[] = {V * E, L * attention, L * 2 * H * I};
    const char* keys[] = {m.vocab_size > 0 ? "model.vocab_size" : "tokenizer.vocab_size", "model.hidden_size",
                          "model.intermediate_size"};
    e.largest_key = keys[std::max_element(std::begin(terms), std::end(terms)) - std::begin(terms)];
  }
  return e;
}

double device_memory_bytes(bool cuda, int index) {
  if (!cuda) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
  }
  // The CUDA runtime is loaded with LibTorch's CUDA library; asked through dlsym so this file needs
  // no CUDA headers. Unknown (0) when it is not there.
  using GetDevice = int (*)(int*);
  using SetDevice = int (*)(int);
  using MemGetInfo = int (*)(size_t*, size_t*);
  auto get = reinterpret_cast<GetDevice>(::dlsym(RTLD_DEFAULT, "cudaGetDevice"));
  auto set = reinterpret_cast<SetDevice>(::dlsym(RTLD_DEFAULT, "cudaSetDevice"));
  auto info = reinterpret_cast<MemGetInfo>(::dlsym(RTLD_DEFAULT, "cudaMemGetInfo"));
  if (!get || !set || !info) return 0.0;
  int previous = 0;
  if (get(&previous) != 0 || set(index) != 0) return 0.0;
  size_t free_bytes = 0, total_bytes = 0;
  const bool ok = info(&free_bytes, &total_bytes) == 0;
  set(previous);
  return ok ? static_cast<double>(total_bytes) : 0.0;
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
