// Learned absolute positions; see absolute.h.
#include "model/absolute.h"

#include <torch/torch.h>

#include "model/options.h"

namespace roformer::model {

void AbsoluteTable::register_in(torch::nn::Module& embeddings) {
  embedding_ = embeddings.register_module("position_embeddings", torch::nn::Embedding(rows_, embedding_size_));
}

torch::Tensor AbsoluteTable::rows(int64_t offset, int64_t seq_len) const {
  TORCH_CHECK(offset >= 0 && offset + seq_len <= rows_, "positions ", offset, "..", offset + seq_len - 1,
              " outside the ", rows_, "-row position table");
  return embedding_->weight.narrow(0, offset, seq_len);  // (T, E): HF's lookup at position_ids
}

TableSize AbsoluteTable::table() const {
  return {"model.max_position_embeddings", static_cast<double>(rows_) * static_cast<double>(embedding_size_), 0.0};
}

namespace {

class AbsolutePositions final : public PositionScheme {
 public:
  explicit AbsolutePositions(const RoFormerOptions& o)
      : table_(o.model().max_position_embeddings, o.embedding_size()) {}

  void register_embeddings(torch::nn::Module& embeddings) override { table_.register_in(embeddings); }
  torch::Tensor add_input_positions(const torch::Tensor& x, EmbeddingStage stage, int64_t offset) const override {
    if (stage != EmbeddingStage::kAfterTokenTypes) return x;
    return x + table_.rows(offset, x.size(1));  // (T, E) over (B, T, E)
  }
  torch::Tensor input_position_table() const override { return table_.weight(); }
  std::optional<int64_t> max_length() const override { return table_.size(); }
  std::vector<TableSize> tables() const override { return {table_.table()}; }
  std::string description() const override { return "absolute positions (" + std::to_string(table_.size()) + " learned rows)"; }

 private:
  AbsoluteTable table_;
};

}  // namespace

std::shared_ptr<PositionScheme> make_absolute_positions(const RoFormerOptions& options) {
  return std::make_shared<AbsolutePositions>(options);
}

}  // namespace roformer::model
