// Learned absolute positions (model.position: absolute, BERT's): a (P, E) table whose row t is
// added to the input embedding of token t, after the token types as HF BertEmbeddings adds it.
// P = model.max_position_embeddings is also the longest sequence the model takes: the table has no
// rows beyond. Disentangled attention keeps such a table too (model/disentangled.h: DeBERTa-v1's
// position_biased_input, the enhanced mask decoder's positions).
#pragma once

#include <torch/nn/modules/embedding.h>

#include <memory>

#include "model/position.h"

namespace roformer::model {

// The table, registered as embeddings.position_embeddings (HF's name, second in BertEmbeddings).
class AbsoluteTable {
 public:
  AbsoluteTable(int64_t rows, int64_t embedding_size) : rows_(rows), embedding_size_(embedding_size) {}
  void register_in(torch::nn::Module& embeddings);
  // Rows offset .. offset + seq_len - 1: (T, E), to be broadcast over the batch.
  torch::Tensor rows(int64_t offset, int64_t seq_len) const;
  int64_t size() const { return rows_; }
  // The whole (P, E) table.
  const torch::Tensor& weight() const { return embedding_->weight; }
  // Its P x E trainable elements, set by model.max_position_embeddings.
  TableSize table() const;

 private:
  int64_t rows_, embedding_size_;
  torch::nn::Embedding embedding_{nullptr};  // (P, E)
};

std::shared_ptr<PositionScheme> make_absolute_positions(const RoFormerOptions& options);

}  // namespace roformer::model
