// Random MLM batches with the loader's shape, for `roformer bench --synthetic` and the step tests:
// [CLS] x [SEP] without padding, exactly round(mask_prob * (T - 2)) predicted positions per
// sequence, replaced 80/10/10 ([MASK] / random / kept, per masking.*). Token ids are drawn from the
// non-special range [5, V). Own RNG: the global LibTorch generator (dropout) is not touched.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "data/loader.h"

namespace roformer::train {

class SyntheticBatches {
 public:
  SyntheticBatches(int64_t vocab_size, const data::LoaderOptions& options);
  data::Batch next();

 private:
  int64_t vocab_size_;
  data::LoaderOptions options_;
  core::SplitMix64 rng_;
};

}  // namespace roformer::train
