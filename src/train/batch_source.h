// What a training step draws its micro-batches from: the run's loader over the prepared corpus
// (train/training_data.h) or random batches of the loader's shape (train/synthetic.h), so
// `roformer bench` and the tests run the very step of `roformer train` without a tokenizer or a
// corpus.
#pragma once

#include <cstdint>
#include <optional>

#include "data/loader.h"

namespace roformer::train {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual data::Batch next() = 0;
  // The ids it draws are below this (the model's vocabulary).
  virtual int64_t vocab_size() const = 0;
  // Where the source is, so a step given up at a stop signal can draw its batches again; none where
  // there is nothing to repeat (random batches): such a step is then not given up.
  virtual std::optional<data::LoaderState> position() const { return std::nullopt; }
  virtual void rewind(const data::LoaderState& /*position*/) {}
};

}  // namespace roformer::train
