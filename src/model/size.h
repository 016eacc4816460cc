// The size of a model's tensors, from its options alone (nothing is allocated), split by the config
// key that sets each part: the lower bound that every command building a model (train, bench,
// eval, fill-mask, export, --init-from) checks against the device's memory before it allocates
// anything, so that a huge value is refused naming the key instead of aborting inside LibTorch.
// The parts (P parameters, H hidden, E embedding, I inner, V vocab, L layers):
//   vocabulary      V E + V                       word embeddings, the head's bias
//   type_vocab_size type_vocab_size x E           token-type embeddings
//   hidden_size     L (4 (H^2 + H) + 5 H)         attention, LayerNorms, the FFN's output bias
//                   + 2 E [+ E H + H] + H E + 3 E embedding LayerNorm [projection], head transform
//                   [+ 2 H]                       pre-LN's final LayerNorm
//   intermediate    L (2 H I + I)                 the FFN's weights and inner bias
//   position        the scheme's own tables (PositionScheme::tables: its parameters and buffers)
#pragma once

#include <string>
#include <vector>

#include "model/position.h"

namespace roformer::model {

struct ModelSize {
  std::vector<TableSize> parts;  // by the key that sets their size
  double parameters() const;     // trainable elements, tied once: num_parameters() of the model
  double buffer_bytes() const;   // buffers, at their peak while computed
  // The key of the part taking the most bytes, a parameter counted at `bytes_per_parameter`.
  std::string largest_key(double bytes_per_parameter) const;
};

// vocab_key: the key the vocabulary came from ("model.vocab_size", or "tokenizer.vocab_size" when
// the config leaves it to the tokenizer).
ModelSize model_size(const RoFormerOptions& options, const std::string& vocab_key = "model.vocab_size");

}  // namespace roformer::model
