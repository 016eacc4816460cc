// The tiny RoFormer the model unit tests share (test_model, test_position): V 50, H 32, 2 layers,
// 4 heads (D 8), 32 positions, no dropout, a wide initializer so that differences show.
#pragma once

#include "model/options.h"

namespace roformer::test {

inline model::RoFormerOptions tiny_model_options() {
  return model::RoFormerOptions()
      .vocab_size(50)
      .hidden_size(32)
      .num_layers(2)
      .num_heads(4)
      .intermediate_size(48)
      .embedding_size(32)
      .max_position_embeddings(32)
      .hidden_dropout(0.0)
      .attention_dropout(0.0)
      .initializer_range(0.1);
}

}  // namespace roformer::test
