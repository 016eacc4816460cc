// model.position: disentangled (src/model/disentangled.h, DeBERTa's relative attention) and the
// enhanced mask decoder: which table row each distance reads (exact, log-bucketed, clamped), the
// c2p/p2c scores against the formula by hand, the parameters each setting adds, the config's
// refusals, padding, the sparse head, lengths beyond the training one, and that the decoder changes
// only what the MLM head reads. Hugging Face parity is test_model_golden (DebertaV2ForMaskedLM).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "model/disentangled.h"
#include "model/flops.h"
#include "model/position.h"
#include "model/roformer.h"
#include "model_util.h"
#include "test_util.h"

namespace {

using namespace roformer::model;
using roformer::test::error_of;
using roformer::test::model_checked_config;
using roformer::test::parameters_by_name;
constexpr const char* kAbsoluteName = "roformer.embeddings.position_embeddings.weight";
namespace config = roformer::config;

// The tiny model (32 positions) with disentangled attention, 8 buckets unless overridden.
RoFormerOptions tiny(const std::vector<std::string>& more = {}) {
  std::vector<std::string> overrides = {"model.position=disentangled", "model.position_buckets=8"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return roformer::test::tiny_model_options(overrides);
}

// The table row (index + first_row) of query i, key j.
int64_t row(const RelativeIndex& r, int64_t i, int64_t j) { return r.index[i][j].item<int64_t>() + r.first_row; }

// Without buckets the row is S + (i - j), clamped to [0, 2S): DeBERTa's delta (paper section 3.1).
TEST(RelativeIndex, ExactDistancesAreClampedAtMaxRelativePositions) {
  auto m = tiny({"model.position_buckets=0", "model.max_relative_positions=4"}).model();
  EXPECT_EQ(relative_span(m), 4);
  const auto r = relative_index(8, m, torch::kCPU);
  EXPECT_EQ(r.index.sizes(), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(row(r, 5, 5), 4);  // distance 0
  EXPECT_EQ(row(r, 6, 3), 7);  // 3
  EXPECT_EQ(row(r, 7, 3), 7);  // 4: clamped to 2S - 1
  EXPECT_EQ(row(r, 1, 4), 1);  // -3
  EXPECT_EQ(row(r, 0, 4), 0);  // -4
  EXPECT_EQ(row(r, 0, 7), 0);  // -7: clamped to 0
  EXPECT_EQ(r.first_row, 0);
  EXPECT_EQ(r.rows, 8);
}

// With 8 buckets (mid 4) and max_relative_positions 16: |d| <= 4 exact, then
// ceil(log(|d| / 4) / log(15 / 4) * 3) + 4, which is 7 at |d| = 15 and 8 (clamped) from 16 on. The
// index is a function of i - j only (Toeplitz), and a length-T sequence reads at most 2T - 1 rows.
TEST(RelativeIndex, LogBucketsByHandAndToeplitz) {
  auto m = tiny({"model.max_relative_positions=16"}).model();
  const int64_t S = relative_span(m);
  EXPECT_EQ(S, 8);
  auto d = torch::tensor({0, 3, 4, 5, 6, 8, 15, 16, 40, -5, -15, -16, -40}, torch::kLong);
  auto b = log_bucket_positions(d, 8, 16);
  // 5: ceil(0.506) + 4; 6: ceil(0.920) + 4; 8: ceil(1.573) + 4; 40: ceil(5.23) + 4.
  const std::vector<int64_t> expected = {0, 3, 4, 5, 5, 6, 7, 8, 10, -5, -7, -8, -10};
  for (size_t k = 0; k < expected.size(); ++k) EXPECT_EQ(b[k].item<int64_t>(), expected[k]) << d[k].item<int64_t>();
  const int64_t T = 40;
  const auto r = relative_index(T, m, torch::kCPU);
  EXPECT_EQ(row(r, 39, 0), 2 * S - 1);  // 39 -> bucket 10, clamped
  EXPECT_EQ(row(r, 15, 0), 2 * S - 1);  // 15 -> bucket 7: the outermost row is reached at max_relative_positions - 1
  EXPECT_EQ(row(r, 0, 16), 0);          // -16 -> bucket -8
  EXPECT_EQ(row(r, 0, 15), 1);          // -15 -> bucket -7
  EXPECT_EQ(row(r, 20, 15), S + 5);
  EXPECT_TRUE(torch::equal(r.index.narrow(0, 1, T - 1).narrow(1, 1, T - 1), r.index.narrow(0, 0, T - 1).narrow(1, 0, T - 1)));
  EXPECT_EQ(r.rows, 2 * S);
  const auto short_r = relative_index(3, m, torch::kCPU);  // distances -2..2: rows S-2 .. S+2
  EXPECT_EQ(short_r.first_row, S - 2);
  EXPECT_EQ(short_r.rows, 5);
}

// A CUDA graph captured at one length replays that length's index after other lengths ran (length
// phases, a graph per batch shape; issue 51): the scheme builds each length's index once, at its
// first forward, and keeps it, never replaced or freed; each equals delta(i, j) - first_row written
// out element by element from the buckets of i - j.
TEST(RelativeIndex, EachLengthsIndexIsBuiltOnceAndKeptAcrossLengths) {
  const auto o = tiny({"model.max_relative_positions=16"});
  auto scheme = make_position_scheme(o);
  torch::nn::Module encoder;
  scheme->register_encoder_back(encoder);
  auto index_at = [&](int64_t T) { return scheme->prepare(torch::zeros({2, T, o.model().hidden_size})).fixed.at(0); };
  const auto a = index_at(24);
  const void* storage = a.data_ptr();
  const auto b = index_at(12);
  const auto again = index_at(24);
  EXPECT_EQ(again.data_ptr(), storage) << "length 24's index was rebuilt after length 12 ran";
  EXPECT_NE(b.data_ptr(), storage);
  const int64_t S = relative_span(o.model());
  for (const auto& [T, index] : std::vector<std::pair<int64_t, torch::Tensor>>{{24, a}, {12, b}}) {
    ASSERT_EQ(index.sizes(), (std::vector<int64_t>{T, T}));
    const auto r = relative_rows(T, o.model());
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) {
        const int64_t bucket = log_bucket_positions(torch::tensor({i - j}, torch::kLong), 8, 16)[0].item<int64_t>();
        EXPECT_EQ(index[i][j].item<int64_t>(), std::clamp<int64_t>(S + bucket, 0, 2 * S - 1) - r.first_row)
            << "T " << T << ", i " << i << ", j " << j;
      }
  }
}

// disentangled_scores against DeBERTa's eq. 4 written out element by element:
//   c2p_ij = q_i . Kr[delta(i,j)],  p2c_ij = k_j . Qr[delta(i,j)],  both / sqrt(3D).
TEST(Disentangled, ScoresEqualTheFormulaByHand) {
  const int64_t B = 2, N = 3, T = 7, D = 4, R = 16;
  torch::manual_seed(2);
  auto q = torch::randn({B, N, T, D}, torch::kDouble), k = torch::randn({B, N, T, D}, torch::kDouble);
  auto kr = torch::randn({N, R, D}, torch::kDouble), qr = torch::randn({N, R, D}, torch::kDouble);
  auto m = tiny({"model.max_relative_positions=6"}).model();
  const auto r = relative_index(T, m, torch::kCPU);
  ASSERT_LE(r.rows, R);
  const double scale = 1.0 / std::sqrt(3.0 * D);
  auto both = disentangled_scores(q, k, kr, qr, r.index, scale);
  auto c2p = disentangled_scores(q, k, kr, {}, r.index, scale), p2c = disentangled_scores(q, k, {}, qr, r.index, scale);
  EXPECT_TRUE(torch::allclose(both, c2p + p2c, 1e-12, 1e-12));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          const int64_t delta = r.index[i][j].item<int64_t>();
          const double hand_c2p = (q[b][n][i] * kr[n][delta]).sum().item<double>() * scale;
          const double hand_p2c = (k[b][n][j] * qr[n][delta]).sum().item<double>() * scale;
          ASSERT_NEAR(c2p[b][n][i][j].item<double>(), hand_c2p, 1e-12) << b << n << i << j;
          ASSERT_NEAR(p2c[b][n][i][j].item<double>(), hand_p2c, 1e-12) << b << n << i << j;
        }
}

// share_att_key projects the relative table with query/key; otherwise pos_key_proj (c2p) and
// pos_query_proj (p2c) exist for the terms pos_att_type keeps. The table (2S, H) and its LayerNorm
// are the encoder's, once; no absolute table unless position_biased_input or the decoder asks.
TEST(Disentangled, ParametersFollowTheSettings) {
  const std::string layer = "roformer.encoder.layer.0.attention.self.";
  struct Case {
    std::vector<std::string> overrides;
    bool pos_key, pos_query, absolute;
  };
  for (const auto& c : std::vector<Case>{{{}, false, false, false},
                                         {{"model.share_att_key=false"}, true, true, false},
                                         {{"model.share_att_key=false", "model.pos_att_type=c2p"}, true, false, false},
                                         {{"model.share_att_key=false", "model.pos_att_type=p2c"}, false, true, false},
                                         {{"model.position_biased_input=true"}, false, false, true},
                                         {{"model.enhanced_mask_decoder=true"}, false, false, true}}) {
    SCOPED_TRACE(c.overrides.empty() ? "defaults" : c.overrides.back());
    torch::manual_seed(0);
    RoFormerForMaskedLM model(tiny(c.overrides));
    auto names = parameters_by_name(*model);
    EXPECT_EQ(names.count(layer + "pos_key_proj.weight"), c.pos_key ? 1u : 0u);
    EXPECT_EQ(names.count(layer + "pos_query_proj.weight"), c.pos_query ? 1u : 0u);
    EXPECT_EQ(names.count("roformer.embeddings.position_embeddings.weight"), c.absolute ? 1u : 0u);
    EXPECT_EQ(names.count("roformer.encoder.embed_positions.weight"), 0u);
    const auto& table = names.at("roformer.encoder.rel_embeddings.weight");
    EXPECT_EQ(table.sizes(), (std::vector<int64_t>{16, 32}));
    EXPECT_NEAR(table.std().item<double>(), 0.1, 0.02);  // initializer_range, like the other embeddings
    EXPECT_TRUE(torch::equal(names.at("roformer.encoder.LayerNorm.weight"), torch::ones({32})));
    // The table decays with the embeddings, and only then; its LayerNorm never.
    auto holds = [](const std::vector<torch::Tensor>& group, const torch::Tensor& t) {
      for (const auto& g : group)
        if (g.is_same(t)) return true;
      return false;
    };
    EXPECT_TRUE(holds(model->decay_parameters(true), table) && !holds(model->decay_parameters(false), table));
    EXPECT_TRUE(holds(model->no_decay_parameters(true), names.at("roformer.encoder.LayerNorm.weight")));
  }
  RoFormerForMaskedLM exact(tiny({"model.position_buckets=0", "model.max_relative_positions=5"}));
  EXPECT_EQ(parameters_by_name(*exact).at("roformer.encoder.rel_embeddings.weight").size(0), 10);
}

// What the config refuses, with the key to change.
TEST(Disentangled, ConfigRefusesWhatItCannotCompute) {
  auto msg = error_of([] { model_checked_config("", {"model.position=disentangled", "model.attention=linear",
                                                     "model.position_buckets=8", "model.max_position_embeddings=64",
                                                     "data.max_seq_len=64"}); });
  EXPECT_NE(msg.find("model.attention: linear has no disentangled form"), std::string::npos) << msg;
  msg = error_of([] { model_checked_config("", {"model.position_buckets=64"}); });
  EXPECT_NE(msg.find("model.position_buckets = 64 applies to model.position: disentangled only (got rotary)"),
            std::string::npos) << msg;
  msg = error_of([] { model_checked_config("", {"model.position=absolute", "model.enhanced_mask_decoder=true"}); });
  EXPECT_NE(msg.find("model.enhanced_mask_decoder = true applies to model.position: disentangled only (got absolute)"),
            std::string::npos) << msg;
  // DeBERTa-v3's 256 buckets need max_relative_positions above 129; 128 positions are too few.
  msg = error_of([] { model_checked_config("", {"model.position=disentangled", "model.max_position_embeddings=128",
                                                "data.max_seq_len=128"}); });
  EXPECT_NE(msg.find("model.position_buckets (256) needs model.max_relative_positions above 129 (got 128, from "
                     "model.max_position_embeddings)"), std::string::npos) << msg;
  msg = error_of([] { model_checked_config("", {"model.position=disentangled", "model.position_buckets=1"}); });
  EXPECT_NE(msg.find("model.position_buckets must be 0 (exact distances) or at least 2 (got 1)"), std::string::npos)
      << msg;
  msg = error_of([] { model_checked_config("", {"model.position=disentangled", "model.enhanced_mask_decoder=true",
                                                "model.position_biased_input=true"}); });
  EXPECT_NE(msg.find("model.position_biased_input: true already adds them there (DeBERTa's decoder is skipped then); "
                     "set one of the two to false"), std::string::npos) << msg;
  msg = error_of([] { model_checked_config("", {"model.position=disentangled", "model.pos_att_type=p2p"}); });
  EXPECT_NE(msg.find("model.pos_att_type = 'p2p' is not allowed: choose one of c2p+p2c, c2p, p2c"), std::string::npos)
      << msg;
  // Only the scheme's rules refuse these: the config table alone takes them (issue 52).
  EXPECT_NO_THROW(config::parse_config("", {"model.position_buckets=64"}));
  // The defaults (DeBERTa-v3's) load, and the model refuses the same in code.
  EXPECT_NO_THROW(model_checked_config("", {"model.position=disentangled"}));
  auto o = tiny();
  o.model().position_buckets = 64;
  msg = error_of([&] { RoFormerForMaskedLM m(o); });
  EXPECT_NE(msg.find("model.position_buckets (64) needs model.max_relative_positions above 33 (got 32"),
            std::string::npos) << msg;
}

// Padded keys get -inf in the bias: the real tokens' outputs do not depend on what is under the
// padding, an all-ones mask equals none, and a row with no token stays finite.
TEST(Disentangled, PaddingIsInvisibleToTheTokens) {
  RoFormerForMaskedLM model(tiny());
  model->eval();
  torch::manual_seed(4);
  auto ids = torch::randint(1, 50, {2, 10}, torch::kLong);
  auto mask = torch::ones({2, 10}, torch::kLong);
  mask.index_put_({1, torch::indexing::Slice(6, torch::indexing::None)}, 0);
  auto other = ids.clone();
  other.index_put_({1, torch::indexing::Slice(6, torch::indexing::None)}, 7);
  auto a = model->encode(ids, mask), b = model->encode(other, mask);
  EXPECT_TRUE(torch::allclose(a[1].narrow(0, 0, 6), b[1].narrow(0, 0, 6), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(a[1].narrow(0, 0, 6), model->encode(other)[1].narrow(0, 0, 6), 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(model->encode(ids, torch::ones_like(mask)), model->encode(ids)));
  mask[0].zero_();
  EXPECT_TRUE(torch::isfinite(model->encode(ids, mask)).all().item<bool>());
}

// Beyond the training length the buckets still cover every distance: a sequence 4x the position
// table runs, and its first tokens (the rest padding) get the logits of the short sequence.
TEST(Disentangled, RunsAtAnyLengthAndTheFirstTokensAreUnchanged) {
  RoFormerForMaskedLM model(tiny());
  model->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  auto ids = torch::randint(5, 50, {1, 128}, torch::kLong);
  auto mask = torch::zeros({1, 128}, torch::kLong);
  mask.narrow(1, 0, 10).fill_(1);
  auto long_logits = model->forward(ids, mask).narrow(1, 0, 10);
  auto short_logits = model->forward(ids.narrow(1, 0, 10));
  EXPECT_TRUE(torch::allclose(long_logits, short_logits, 1e-5, 1e-5))
      << "max diff " << (long_logits - short_logits).abs().max().item<double>();
  EXPECT_TRUE(torch::isfinite(model->forward(ids)).all().item<bool>());
}

// Two models with the same weights, the second with the enhanced mask decoder (and so the absolute
// table, copied in from a third model).
std::pair<RoFormerForMaskedLM, RoFormerForMaskedLM> without_and_with_emd(const std::vector<std::string>& more = {}) {
  torch::manual_seed(6);
  RoFormerForMaskedLM plain(tiny(more));
  auto with = more;
  with.push_back("model.enhanced_mask_decoder=true");
  RoFormerForMaskedLM emd(tiny(with));
  std::map<std::string, torch::Tensor> state;
  for (const auto& [name, t] : plain->hf_named_parameters()) state[name] = t.detach().clone();
  state[kAbsoluteName] = parameters_by_name(*emd).at(kAbsoluteName).detach().clone();
  emd->load_hf_state_dict(state);
  return {plain, emd};
}

// DeBERTa section 3.2: the decoder changes what the MLM head reads and nothing else. The encoder
// output (what fine-tuning would use) is the plain model's, bit for bit; the head reads the last
// layer run twice more on the second-to-last layer's output h, queries h + z then the first pass's
// output (written out here with the layers' own forward), and never the last layer's ordinary pass.
TEST(EnhancedMaskDecoder, ChangesOnlyWhatTheHeadReads) {
  for (const std::string norm : {"post", "pre"}) {
    SCOPED_TRACE(norm);
    auto [plain, emd] = without_and_with_emd({"model.norm=" + norm});
    plain->eval();
    emd->eval();
    torch::NoGradGuard no_grad;
    torch::manual_seed(8);
    auto ids = torch::randint(1, 50, {2, 12}, torch::kLong);
    auto mask = torch::ones({2, 12}, torch::kLong);
    mask.index_put_({1, torch::indexing::Slice(9, torch::indexing::None)}, 0);
    EXPECT_TRUE(torch::equal(emd->encode(ids, mask), plain->encode(ids, mask)));
    EXPECT_TRUE(torch::equal(plain->head_states(ids, mask), plain->encode(ids, mask)));
    auto decoded = emd->head_states(ids, mask);  // (B, T, H)

    auto x = emd->embeddings->forward(ids);
    auto inputs = emd->encoder->layer_inputs(x, mask.to(torch::kBool).view({2, 1, 1, 12}));
    auto layer = [&](int64_t i) { return std::dynamic_pointer_cast<RoFormerLayerImpl>(emd->encoder->layers->ptr(i)); };
    auto h = layer(0)->forward(x, inputs);
    auto z = parameters_by_name(*emd).at(kAbsoluteName).narrow(0, 0, 12);
    auto by_hand = layer(1)->forward(h, inputs, layer(1)->forward(h, inputs, h + z));
    if (emd->encoder->final_layer_norm) by_hand = emd->encoder->final_layer_norm->forward(by_hand);
    EXPECT_TRUE(torch::allclose(decoded, by_hand, 1e-6, 1e-6)) << (decoded - by_hand).abs().max().item<double>();
    EXPECT_GT((decoded - emd->encode(ids, mask)).abs().max().item<double>(), 1e-2);
    EXPECT_TRUE(torch::equal(emd->forward(ids, mask), emd->head->forward(decoded, emd->embeddings->word_embeddings->weight)));
  }
}

// The absolute table is trained through the decoder only, and each prediction reads its own
// position's row (z enters the first pass's query there; the second pass's keys and values are h):
// the rows of the predicted positions get gradients, the others none, and the encoder output does
// not depend on the table. The sparse head equals the dense one gathered, values and gradients.
TEST(EnhancedMaskDecoder, PositionsTrainThroughTheDecoderAndTheSparseHeadAgrees) {
  auto [plain, emd] = without_and_with_emd();
  emd->train();
  torch::manual_seed(9);
  auto ids = torch::randint(1, 50, {2, 12}, torch::kLong);
  auto pos = torch::tensor({1, 4, 9, 13, 20}, torch::kLong);  // positions 1, 4, 9 of row 0; 1, 8 of row 1
  auto labels = torch::tensor({3, 8, 1, 40, 2}, torch::kLong);
  auto dense = emd->forward(ids).view({-1, 50}).index_select(0, pos);
  torch::nn::functional::cross_entropy(dense, labels).backward();
  auto row_norms = parameters_by_name(*emd).at(kAbsoluteName).grad().abs().sum(1);  // (P)
  for (int64_t t = 0; t < 32; ++t) {
    const bool predicted = t == 1 || t == 4 || t == 8 || t == 9;
    EXPECT_EQ(row_norms[t].item<double>() > 0, predicted) << "row " << t;
  }
  std::vector<torch::Tensor> grads;
  for (auto& p : emd->parameters()) grads.push_back(p.grad().clone());
  emd->zero_grad();
  auto sparse = emd->forward_sparse(ids, {}, pos);
  EXPECT_TRUE(torch::allclose(sparse, dense, 1e-6, 1e-6));
  torch::nn::functional::cross_entropy(sparse, labels).backward();
  auto params = emd->parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::allclose(params[i].grad(), grads[i], 1e-5, 1e-7)) << i;
  emd->zero_grad();
  emd->encode(ids).sum().backward();
  auto untouched = parameters_by_name(*emd).at(kAbsoluteName).grad();
  EXPECT_TRUE(!untouched.defined() || untouched.abs().sum().item<double>() == 0.0);
}

// The FLOPs count the relative terms: R = 13 rows for T = 10 (buckets 8, max_relative_positions 32:
// distances -9..9 reach buckets -6..6), per term 2 R H^2 + 2 B T R H, per layer; the decoder adds a
// layer pass.
TEST(Disentangled, FlopsByHand) {
  auto o = tiny();
  EXPECT_EQ(relative_index(10, o.model(), torch::kCPU).rows, 13);
  const double tokens = 2 * 10, R = 13;
  const double layer = 4 * 2 * tokens * 32 * 32 + 2 * 2 * tokens * 32 * 48 + 2 * 2 * 2 * 10 * 10 * 32 +
                       2 * (2 * R * 32 * 32 + 2 * tokens * R * 32);
  const double head = 2 * 5 * 32 * 32 + 2 * 5 * 32 * 50;
  EXPECT_DOUBLE_EQ(mlm_train_flops_per_step(o, 2, 10, 5), 3 * (2 * layer + head));
  EXPECT_DOUBLE_EQ(mlm_train_flops_per_step(tiny({"model.enhanced_mask_decoder=true"}), 2, 10, 5),
                   3 * (3 * layer + head));
}

}  // namespace
