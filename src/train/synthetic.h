// Random MLM batches with the loader's shape, for `roformer bench --synthetic` and the step tests:
// [CLS] x [SEP] without padding, exactly round(mask_prob * (T - 2)) predicted positions per
// sequence, replaced 80/10/10 ([MASK] / random / kept, per masking.*). Token ids are drawn from the
// non-special range [5, V). Own RNG: the global LibTorch generator (dropout) is not touched.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "core/random.h"
#include "data/loader.h"
#include "train/batch_source.h"

namespace roformer::train {

class SyntheticBatches : public BatchSource {
 public:
  // Batches of the config's shape and masking (data.*, masking.*, train.batch_size, train.seed) over
  // model.vocab_size ids; pin_memory for a CUDA step. Throws roformer::Error when model.vocab_size
  // leaves no ordinary id (it is 0: taken from a tokenizer there is none of).
  SyntheticBatches(const config::Config& cfg, bool pin_memory);
  data::Batch next() override;
  int64_t vocab_size() const override { return vocab_size_; }

 private:
  int64_t vocab_size_;
  data::LoaderOptions options_;
  core::SplitMix64 rng_;
};

}  // namespace roformer::train
