// model.position (src/model/options.h): rotary, absolute (BERT's learned position embeddings), none
// and disentangled (DeBERTa's relative attention; its own parts in test_disentangled). Each builds,
// runs forward and backward; absolute has HF BertEmbeddings' table and refuses sequences beyond it;
// rotary and disentangled attention scores depend only on relative position, absolute ones do not;
// without positions the model is permutation-equivariant. The rotary default stays HF RoFormer and
// disentangled HF DebertaV2 (test_model_golden); training and exact resume per option are in
// tests/integration/test_train.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "model/roformer.h"
#include "model/rotary.h"
#include "model_util.h"
#include "test_util.h"

namespace {

using namespace roformer::model;
using roformer::test::error_of;
using roformer::test::model_checked_config;
using roformer::test::parameters_by_name;

constexpr int64_t kPositions = 32;  // P: rows of the position tables
constexpr const char* kAbsoluteName = "roformer.embeddings.position_embeddings.weight";
constexpr const char* kRotaryName = "roformer.encoder.embed_positions.weight";

// The tiny model with P rows of position tables, `position`, and further config overrides.
// Disentangled attention gets 8 buckets (exact below 4, log-spaced up to P = max_relative_positions):
// DeBERTa-v3's 256 need more than 129 relative positions.
RoFormerOptions tiny(const std::string& position, const std::vector<std::string>& more = {}) {
  std::vector<std::string> overrides = {"model.max_position_embeddings=" + std::to_string(kPositions),
                                        "model.position=" + position};
  if (position == "disentangled") overrides.push_back("model.position_buckets=8");
  overrides.insert(overrides.end(), more.begin(), more.end());
  return roformer::test::tiny_model_options(overrides);
}

// Pre-softmax attention scores q k^T / sqrt(D) of layer 0 for token ids (1, T) whose positions start
// at `offset`: absolute shifts the rows of the learned table, rotary the rows of the sin/cos table.
torch::Tensor layer0_scores(RoFormerForMaskedLM& model, const torch::Tensor& ids, int64_t offset) {
  const int64_t T = ids.size(1), N = model->options().model().num_heads, D = model->options().model().hidden_size / N;
  const auto named = roformer::test::parameters_by_name(*model);
  auto x = model->embeddings->forward(ids, {}, named.count(kAbsoluteName) ? offset : 0);  // (1, T, H)
  auto attention = std::dynamic_pointer_cast<RoFormerLayerImpl>(model->encoder->layers->ptr(0))->self_attention;
  auto heads = [&](const torch::Tensor& t) { return t.view({1, T, N, D}).transpose(1, 2); };  // (1, N, T, D)
  auto q = heads(attention->query->forward(x)), k = heads(attention->key->forward(x));
  if (named.count(kRotaryName)) {
    auto table = named.at(kRotaryName);  // (P, D)
    auto [sin_pos, cos_pos] = rotary_sin_cos(table.narrow(0, offset, table.size(0) - offset), T);  // rows offset..
    q = apply_rotary(q, sin_pos, cos_pos);
    k = apply_rotary(k, sin_pos, cos_pos);
  }
  if (named.count("roformer.encoder.rel_embeddings.weight")) {
    // Relative positions have no table to offset: the tokens are placed at positions offset.. of a
    // longer sequence (fixed tokens before them), and its scores among them are taken.
    auto prefix = (torch::arange(offset, torch::kLong) * 7).remainder(49) + 1;     // (offset)
    auto long_ids = torch::cat({prefix.unsqueeze(0), ids}, 1);                     // (1, offset + T)
    auto long_x = model->embeddings->forward(long_ids);
    auto long_heads = [&](const torch::Tensor& t) { return t.view({1, offset + T, N, D}).transpose(1, 2); };
    auto lq = long_heads(attention->query->forward(long_x)), lk = long_heads(attention->key->forward(long_x));
    auto scores = torch::matmul(lq, lk.transpose(-1, -2)) * attention->score_scale() +
                  attention->positions().score_bias(lq, lk, model->encoder->layer_inputs(long_x, {}).positions,
                                                    attention->is_training());  // (1, N, T', T')
    return scores.narrow(2, offset, T).narrow(3, offset, T);                                       // (1, N, T, T)
  }
  return torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(D));  // (1, N, T, T)
}

// The config table maps the names; the model sees the enum. An unknown name is the config's error,
// and rotary_value without rotary positions is refused by the one validator, in code too.
TEST(Position, ConfigKeyDefaultsToRotaryAndNamesTheAcceptedValues) {
  namespace config = roformer::config;
  EXPECT_EQ(config::parse_config("").model.position, config::Position::kRotary);
  const auto c = config::parse_config("model:\n  position: absolute\n");
  EXPECT_EQ(c.model.position, config::Position::kAbsolute);
  EXPECT_EQ(RoFormerOptions(c.model, 100).model().position, config::Position::kAbsolute);
  EXPECT_EQ(config::parse_config("", {"model.position=none"}).model.position, config::Position::kNone);
  EXPECT_EQ(config::parse_config("", {"model.position=disentangled"}).model.position, config::Position::kDisentangled);
  auto msg = error_of([] { config::parse_config("model:\n  position: learned\n"); });
  EXPECT_NE(msg.find("model.position = 'learned' is not allowed: choose one of rotary, absolute, none, disentangled"),
            std::string::npos) << msg;
  EXPECT_NO_THROW(config::parse_config("model:\n  position: none\n  rotary_value: true\n"));  // the table takes it
  msg = error_of([] { model_checked_config("model:\n  position: none\n  rotary_value: true\n"); });
  EXPECT_NE(msg.find("model.rotary_value needs model.position: rotary (got none)"), std::string::npos) << msg;
  auto o = tiny("absolute");
  o.model().rotary_value = true;
  msg = error_of([&] { RoFormerForMaskedLM m(o); });
  EXPECT_NE(msg.find("model.rotary_value needs model.position: rotary (got absolute)"), std::string::npos) << msg;
}

// absolute: one learned (P, E) table under BERT's name (HF BertForMaskedLM calls it
// bert.embeddings.position_embeddings.weight), initialized N(0, initializer_range), no rotary table.
// none: neither table. rotary: the sin/cos buffer only (not a trainable parameter).
TEST(Position, ParametersOfEachOption) {
  torch::manual_seed(0);
  RoFormerForMaskedLM rotary(tiny("rotary")), absolute(tiny("absolute")), none(tiny("none"));
  auto r = parameters_by_name(*rotary), a = parameters_by_name(*absolute), n = parameters_by_name(*none);
  EXPECT_TRUE(r.count(kRotaryName) && !r.count(kAbsoluteName));
  EXPECT_TRUE(!a.count(kRotaryName) && a.count(kAbsoluteName));
  EXPECT_TRUE(!n.count(kRotaryName) && !n.count(kAbsoluteName));
  EXPECT_EQ(a.size(), r.size());
  EXPECT_EQ(n.size(), r.size() - 1);
  const auto& table = a.at(kAbsoluteName);
  EXPECT_EQ(table.sizes(), (std::vector<int64_t>{kPositions, 32}));
  EXPECT_TRUE(table.requires_grad());
  EXPECT_NEAR(table.std().item<double>(), 0.1, 0.01);  // initializer_range
  EXPECT_NEAR(table.mean().item<double>(), 0.0, 0.02);
  EXPECT_EQ(absolute->num_parameters(), rotary->num_parameters() + kPositions * 32);
  EXPECT_EQ(none->num_parameters(), rotary->num_parameters());
  // The table decays with the other embeddings, and only then.
  auto holds = [&](const std::vector<torch::Tensor>& group) {
    for (const auto& t : group)
      if (t.is_same(table)) return true;
    return false;
  };
  EXPECT_TRUE(holds(absolute->decay_parameters(true)) && !holds(absolute->decay_parameters(false)));
  // A state dict round-trips, and one without the table is refused by name.
  RoFormerForMaskedLM other(tiny("absolute"));
  std::map<std::string, torch::Tensor> state;
  for (const auto& [name, t] : a) state[name] = t.detach().clone();
  other->load_hf_state_dict(state);
  EXPECT_TRUE(torch::equal(parameters_by_name(*other).at(kAbsoluteName), table));
  state.erase(kAbsoluteName);
  EXPECT_NE(error_of([&] { other->load_hf_state_dict(state); }).find(std::string("missing key ") + kAbsoluteName),
            std::string::npos);
}

// Every option with each attention, norm and gradient checkpointing: a finite loss, and every
// trainable parameter gets a gradient. With absolute, exactly the rows of positions 0..T-1 do.
TEST(Position, EachOptionRunsForwardAndBackward) {
  const int64_t B = 3, T = 10;
  for (const std::string position : {"rotary", "absolute", "none", "disentangled"})
    for (const std::string attention : {"softmax", "linear"})
      for (const std::string norm : {"post", "pre"})
        for (bool checkpointing : {false, true}) {
          if (position == "disentangled" && attention == "linear") continue;  // refused: test_disentangled
          SCOPED_TRACE(position + " " + attention + " " + norm + (checkpointing ? " checkpointed" : ""));
          torch::manual_seed(3);
          RoFormerForMaskedLM model(
              tiny(position, {"model.attention=" + attention, "model.norm=" + norm,
                              std::string("model.gradient_checkpointing=") + (checkpointing ? "true" : "false")}));
          model->train();
          auto ids = torch::randint(1, 50, {B, T}, torch::kLong);
          auto mask = torch::ones({B, T}, torch::kLong);
          mask.index_put_({1, torch::indexing::Slice(T - 3, torch::indexing::None)}, 0);
          auto logits = model->forward(ids, mask);  // (B, T, V)
          ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{B, T, 50}));
          auto loss = torch::nn::functional::cross_entropy(logits.view({-1, 50}), ids.view({-1}));
          ASSERT_TRUE(std::isfinite(loss.item<double>()));
          loss.backward();
          for (const auto& p : model->named_parameters())
            EXPECT_TRUE(p.value().grad().defined()) << p.key();
          if (position == "absolute") {
            auto grad = roformer::test::parameters_by_name(*model).at(kAbsoluteName).grad();  // (P, E)
            auto row_norms = grad.abs().sum(1);
            EXPECT_TRUE((row_norms.narrow(0, 0, T) > 0).all().item<bool>());
            EXPECT_EQ(row_norms.narrow(0, T, kPositions - T).sum().item<double>(), 0.0);
          }
        }
}

// RoPE (paper eq. 16): q_m^T R_{n-m} k_n depends on n - m only, so shifting every position by a
// constant leaves the scores unchanged up to float rounding. So do disentangled attention's
// (DeBERTa eq. 4: c2p and p2c read the row of i - j), with the relative term nonzero. Learned
// absolute positions give other scores for other rows of the table.
TEST(Position, RotaryScoresDependOnRelativePositionOnlyAbsoluteOnesDoNot) {
  const int64_t T = 12;
  torch::manual_seed(5);
  auto ids = torch::randint(1, 50, {1, T}, torch::kLong);
  RoFormerForMaskedLM rotary(tiny("rotary")), absolute(tiny("absolute")), relative(tiny("disentangled"));
  RoFormerForMaskedLM biased(tiny("disentangled", {"model.position_biased_input=true"}));
  torch::NoGradGuard no_grad;
  for (int64_t shift : {int64_t{1}, int64_t{7}, kPositions - T}) {
    SCOPED_TRACE("shift " + std::to_string(shift));
    auto r0 = layer0_scores(rotary, ids, 0), rs = layer0_scores(rotary, ids, shift);
    EXPECT_TRUE(torch::allclose(r0, rs, 1e-4, 1e-5)) << "max diff " << (r0 - rs).abs().max().item<double>();
    auto d0 = layer0_scores(relative, ids, 0), ds = layer0_scores(relative, ids, shift);
    EXPECT_TRUE(torch::allclose(d0, ds, 1e-4, 1e-5)) << "max diff " << (d0 - ds).abs().max().item<double>();
    auto a0 = layer0_scores(absolute, ids, 0), as = layer0_scores(absolute, ids, shift);
    EXPECT_GT((a0 - as).abs().max().item<double>(), 1e-2);
    // DeBERTa-v1's absolute input table (position_biased_input) makes them absolute again.
    auto b0 = layer0_scores(biased, ids, 0), bs = layer0_scores(biased, ids, shift);
    EXPECT_GT((b0 - bs).abs().max().item<double>(), 1e-2);
  }
  // The relative term is there: without it (content scores only) the scores differ.
  auto layer = std::dynamic_pointer_cast<RoFormerLayerImpl>(relative->encoder->layers->ptr(0));
  auto x = relative->embeddings->forward(ids);
  auto bias = layer->self_attention->positions().score_bias(
      layer->self_attention->query->forward(x).view({1, T, 4, 8}).transpose(1, 2),
      layer->self_attention->key->forward(x).view({1, T, 4, 8}).transpose(1, 2),
      relative->encoder->layer_inputs(x, {}).positions, layer->self_attention->is_training());
  EXPECT_GT(bias.abs().max().item<double>(), 1e-2);
  // The unshifted scores are those of the model's own forward path (offset 0).
  auto embedded = absolute->embeddings->forward(ids);
  EXPECT_TRUE(torch::equal(embedded, absolute->embeddings->forward(ids, {}, 0)));
  EXPECT_FALSE(torch::allclose(embedded, absolute->embeddings->forward(ids, {}, 1)));
}

// With no position information, softmax attention is permutation-equivariant: permuting the tokens
// permutes the logits. Rotary and absolute positions break that (the check can fail).
TEST(Position, NoneIsPermutationEquivariantTheOthersAreNot) {
  const int64_t T = 9;
  torch::manual_seed(9);
  auto ids = torch::randint(1, 50, {2, T}, torch::kLong);
  auto perm = torch::randperm(T, torch::kLong);
  torch::NoGradGuard no_grad;
  for (const std::string position : {"none", "rotary", "absolute", "disentangled"}) {
    SCOPED_TRACE(position);
    RoFormerForMaskedLM model(tiny(position));
    model->eval();
    auto logits = model->forward(ids);                          // (B, T, V)
    auto permuted = model->forward(ids.index_select(1, perm));  // (B, T, V)
    const bool equivariant = torch::allclose(permuted, logits.index_select(1, perm), 1e-4, 1e-5);
    EXPECT_EQ(equivariant, position == "none")
        << "max diff " << (permuted - logits.index_select(1, perm)).abs().max().item<double>();
  }
}

// A learned table has P rows: a longer sequence is refused naming the key (BERT's table, DeBERTa-v1's
// input table and the enhanced mask decoder's). Rotary extends its table by the formula (the first
// P rows of the extension are the buffer, bit for bit), and the logits of the first tokens of a
// longer sequence follow from the same weights; relative buckets cover any distance
// (test_disentangled checks the tokens); none has no table.
TEST(Position, SequencesBeyondThePositionTable) {
  RoFormerForMaskedLM absolute(tiny("absolute")), rotary(tiny("rotary")), none(tiny("none"));
  auto too_long = torch::ones({1, kPositions + 1}, torch::kLong);
  for (const auto& table : std::vector<std::vector<std::string>>{
           {"model.position=absolute"},
           {"model.position=disentangled", "model.position_buckets=8", "model.position_biased_input=true"},
           {"model.position=disentangled", "model.position_buckets=8", "model.enhanced_mask_decoder=true"}}) {
    SCOPED_TRACE(table.back());
    RoFormerForMaskedLM model(roformer::test::tiny_model_options(table));
    auto msg = error_of([&] { model->forward(too_long); });
    EXPECT_NE(msg.find("sequence length 33 exceeds model.max_position_embeddings 32 (the rows of the learned absolute "
                       "position table"),
              std::string::npos) << msg;
    EXPECT_NO_THROW(model->forward(torch::ones({1, kPositions}, torch::kLong)));
  }
  EXPECT_EQ(none->forward(torch::ones({1, 2 * kPositions}, torch::kLong)).size(1), 2 * kPositions);
  RoFormerForMaskedLM relative(tiny("disentangled"));
  EXPECT_EQ(relative->forward(torch::ones({1, 4 * kPositions}, torch::kLong)).size(1), 4 * kPositions);

  const auto table = roformer::test::parameters_by_name(*rotary).at(kRotaryName);  // (P, D), the buffer
  EXPECT_TRUE(rotary_rows(table, kPositions, 10000.0).is_same(table));  // no copy within the table
  auto extended = rotary_rows(table, 4 * kPositions, 10000.0);  // (4P, D)
  ASSERT_EQ(extended.size(0), 4 * kPositions);
  EXPECT_TRUE(torch::equal(extended.narrow(0, 0, kPositions), table));
  // Row m is position m: the extension's rows are those of a table built that long from the start.
  const int64_t D = table.size(1);
  EXPECT_TRUE(torch::equal(extended, rotary_table(4 * kPositions, D)));
  EXPECT_FALSE(torch::equal(extended.narrow(0, kPositions, kPositions), table));
  // A sequence of 4P runs; with attention limited to the first tokens (the rest padding), their
  // logits are those of the short sequence: the extension changes nothing within the table.
  rotary->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  auto ids = torch::randint(5, 50, {1, 4 * kPositions}, torch::kLong);
  auto mask = torch::zeros({1, 4 * kPositions}, torch::kLong);
  mask.narrow(1, 0, 10).fill_(1);
  auto long_logits = rotary->forward(ids, mask).narrow(1, 0, 10);
  auto short_logits = rotary->forward(ids.narrow(1, 0, 10));
  EXPECT_TRUE(torch::allclose(long_logits, short_logits, 1e-5, 1e-5))
      << "max diff " << (long_logits - short_logits).abs().max().item<double>();
  EXPECT_EQ(rotary->forward(ids).size(1), 4 * kPositions);
}

}  // namespace
