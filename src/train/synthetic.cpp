// Synthetic MLM batches for `roformer bench --synthetic` and the step tests: the loader's batch
// shape and masking statistics without a tokenizer or corpus; see train/synthetic.h.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "data/tokenizer.h"
#include "train/synthetic.h"

namespace roformer::train {

namespace {

// Random batches use the ids of roformer's SentencePiece tokenizers: [CLS]=2 [SEP]=3 [MASK]=4, the
// ordinary ids from 5 on.
const data::SpecialTokens kSpecial = data::SpecialTokens::sentencepiece();
constexpr int64_t kFirstOrdinary = 5;

data::LoaderOptions synthetic_loader_options(const config::Config& cfg, bool pin_memory) {
  auto o = data::loader_options_from_config(cfg, cfg.train.batch_size);
  o.seed = cfg.train.seed;
  o.pin_memory = pin_memory;
  return o;
}

}  // namespace

SyntheticBatches::SyntheticBatches(const config::Config& cfg, bool pin_memory)
    : vocab_size_(cfg.model.vocab_size), options_(synthetic_loader_options(cfg, pin_memory)),
      rng_(static_cast<uint64_t>(options_.seed)) {
  if (vocab_size_ < kFirstOrdinary + 1)
    throw Error(fmt::format("synthetic data needs model.vocab_size of at least 6 (5 special tokens + 1), got {}; "
                            "e.g. --set model.vocab_size=8000", vocab_size_));
}

data::Batch SyntheticBatches::next() {
  const int64_t B = options_.batch_size, T = options_.max_seq_len, content = T - 2;
  const auto& m = options_.masking;
  const int64_t n_mask = std::max<int64_t>(1, std::llround(m.mask_prob * static_cast<double>(content)));
  const uint64_t n_ordinary = static_cast<uint64_t>(vocab_size_ - kFirstOrdinary);
  auto ordinary = [&] { return static_cast<int64_t>(kFirstOrdinary + rng_.next() % n_ordinary); };

  auto ids = torch::empty({B, T}, torch::kInt64);            // (B, T)
  auto labels = torch::full({B, T}, -100, torch::kInt64);    // (B, T)
  auto positions = torch::empty({B * n_mask}, torch::kInt64);  // (P,)
  auto pred_labels = torch::empty({B * n_mask}, torch::kInt64);
  auto* id = ids.data_ptr<int64_t>();
  auto* lab = labels.data_ptr<int64_t>();
  auto* pos = positions.data_ptr<int64_t>();
  auto* plab = pred_labels.data_ptr<int64_t>();
  std::vector<int64_t> order(static_cast<size_t>(content));
  int64_t p = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t* row = id + b * T;
    row[0] = kSpecial.cls;
    row[T - 1] = kSpecial.sep;
    for (int64_t t = 1; t < T - 1; ++t) row[t] = ordinary();
    // n_mask distinct content positions (partial Fisher-Yates), then ascending like the loader's.
    std::iota(order.begin(), order.end(), int64_t{1});
    for (int64_t i = 0; i < n_mask; ++i)
      std::swap(order[static_cast<size_t>(i)],
                order[static_cast<size_t>(i + static_cast<int64_t>(rng_.next() % static_cast<uint64_t>(content - i)))]);
    std::sort(order.begin(), order.begin() + n_mask);
    for (int64_t i = 0; i < n_mask; ++i) {
      const int64_t t = order[static_cast<size_t>(i)];
      lab[b * T + t] = row[t];
      pos[p] = b * T + t;
      plab[p++] = row[t];
      const double r = rng_.uniform();
      if (r < m.mask_token_rate)
        row[t] = kSpecial.mask;
      else if (r < m.mask_token_rate + m.random_token_rate)
        row[t] = ordinary();
    }
  }
  data::Batch batch;
  batch.input_ids = options_.pin_memory ? ids.pin_memory() : ids;
  batch.labels = labels;
  batch.pred_positions = options_.pin_memory ? positions.pin_memory() : positions;
  batch.pred_labels = options_.pin_memory ? pred_labels.pin_memory() : pred_labels;
  batch.num_tokens = B * T;
  return batch;
}

}  // namespace roformer::train
