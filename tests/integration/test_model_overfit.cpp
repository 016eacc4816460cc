// The pre-LN, factorized-embedding, linear-attention and disentangled-attention variants can learn:
// a few hundred Adam steps on four fixed masked sequences (with padding) drive the sparse MLM loss
// near zero.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/config.h"
#include "model/roformer.h"

namespace {

using namespace roformer::model;

constexpr int64_t kVocab = 40, kMaskId = 1, kB = 4, kT = 16;

double overfit(const RoFormerOptions& options, int steps) {
  // Tiny tensors: one intra-op thread is fastest and does not fight the other tests for cores.
  torch::set_num_threads(1);
  torch::manual_seed(0);
  RoFormerForMaskedLM model(options);
  model->train();
  auto original = torch::randint(2, kVocab, {kB, kT}, torch::kLong);  // (B, T)
  auto mask = torch::ones({kB, kT}, torch::kLong);
  mask.index_put_({3, torch::indexing::Slice(12, torch::indexing::None)}, 0);  // row 3 padded
  original = original.masked_fill(mask == 0, 0);
  // Every 4th real position is predicted and replaced by [MASK].
  auto predict = (torch::arange(kT).remainder(4) == 1).expand({kB, kT}) & (mask == 1);
  auto inputs = original.masked_fill(predict, kMaskId);
  auto positions = predict.reshape(-1).nonzero().squeeze(1);     // (P,)
  auto labels = original.reshape(-1).index_select(0, positions);  // (P,)

  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(3e-3));
  double loss_value = 0.0;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward_sparse(inputs, mask, positions), labels);
    loss.backward();
    optimizer.step();
    loss_value = loss.item<double>();
  }
  return loss_value;
}

// A two-layer model (H 32, 4 heads, I 64, no dropout) with config overrides ({"model.norm=pre"}).
RoFormerOptions tiny(const std::vector<std::string>& overrides = {}) {
  roformer::config::Config c;
  for (const auto& o : {"model.hidden_size=32", "model.num_layers=2", "model.num_heads=4", "model.intermediate_size=64",
                        "model.embedding_size=32", "model.hidden_dropout=0", "model.attention_dropout=0"})
    roformer::config::apply_override(c, o);
  c.model.max_position_embeddings = kT;
  for (const auto& o : overrides) roformer::config::apply_override(c, o);
  return RoFormerOptions(c.model, kVocab);
}

void expect_learns(const RoFormerOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const double first = overfit(options, 1);
  const double last = overfit(options, 300);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "loss " << first << " -> " << last << " in 300 steps (" << seconds << " s)\n";
  EXPECT_GT(first, 3.0);  // ~ ln(40) = 3.7 at the start
  EXPECT_LT(last, 0.05);
}

TEST(ModelOverfit, PreLayerNorm) { expect_learns(tiny({"model.norm=pre"})); }
TEST(ModelOverfit, FactorizedEmbedding) { expect_learns(tiny({"model.embedding_size=16"})); }
TEST(ModelOverfit, LinearAttention) { expect_learns(tiny({"model.attention=linear"})); }
TEST(ModelOverfit, LinearAttentionPreLayerNormWithCheckpointing) {
  expect_learns(tiny({"model.attention=linear", "model.norm=pre", "model.gradient_checkpointing=true"}));
}
// DeBERTa's relative attention (4 buckets over 16 positions) with its enhanced mask decoder, pre-LN,
// a factorized embedding (the decoder's positions through the projection) and checkpointing.
TEST(ModelOverfit, DisentangledWithTheDecoderFactorizedPreLayerNormCheckpointing) {
  expect_learns(tiny({"model.position=disentangled", "model.position_buckets=4", "model.enhanced_mask_decoder=true",
                      "model.embedding_size=16", "model.norm=pre", "model.gradient_checkpointing=true"}));
}

}  // namespace
