// Rotary position embedding (src/model/rotary.h): the element-wise form against explicit rotation
// matrices, relative-position property, norm preservation, HF's table layout and hand-computed values.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/autocast.h"
#include "model/rotary.h"

namespace {

using namespace roformer::model;

// The naive reference the model never runs (it left src/ with the model benchmark, issue 52): the
// block-diagonal rotation matrices R_m (T, D, D), and x'_m = R_m x_m. O(T D^2) memory and time.
torch::Tensor rotation_matrices(const torch::Tensor& sin_pos, const torch::Tensor& cos_pos) {
  using torch::indexing::Slice;
  const int64_t T = sin_pos.size(0), D = sin_pos.size(1);
  auto R = torch::zeros({T, D, D}, sin_pos.options());  // (T, D, D)
  auto c = cos_pos.index({Slice(), Slice(0, torch::indexing::None, 2)});  // (T, D/2)
  auto s = sin_pos.index({Slice(), Slice(0, torch::indexing::None, 2)});
  auto even = torch::arange(0, D, 2, torch::TensorOptions().dtype(torch::kLong).device(sin_pos.device()));
  auto odd = even + 1;
  // Block i: [[cos, -sin], [sin, cos]] at rows/cols (2i, 2i+1).
  R.index_put_({Slice(), even, even}, c);
  R.index_put_({Slice(), even, odd}, -s);
  R.index_put_({Slice(), odd, even}, s);
  R.index_put_({Slice(), odd, odd}, c);
  return R;
}

torch::Tensor apply_rotary_matrix(const torch::Tensor& x, const torch::Tensor& sin_pos, const torch::Tensor& cos_pos) {
  auto R = rotation_matrices(sin_pos, cos_pos);  // (T, D, D)
  // x'_{..., t, e} = sum_d R_{t, e, d} x_{..., t, d}
  return torch::matmul(R, x.unsqueeze(-1)).squeeze(-1);
}

TEST(Rotary, TableLayoutIsSinThenCosOfPositionTimesTheta) {
  const int64_t P = 9, D = 6;
  const double base = 10000.0;
  auto table = rotary_table(P, D, base);
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{P, D}));
  ASSERT_EQ(table.scalar_type(), torch::kFloat32);
  for (int64_t m = 0; m < P; ++m)
    for (int64_t i = 0; i < D / 2; ++i) {
      const double angle = static_cast<double>(m) * std::pow(base, -2.0 * i / D);  // m theta_i
      EXPECT_FLOAT_EQ(table[m][i].item<float>(), static_cast<float>(std::sin(angle)));
      EXPECT_FLOAT_EQ(table[m][D / 2 + i].item<float>(), static_cast<float>(std::cos(angle)));
    }
  auto [sin_pos, cos_pos] = rotary_sin_cos(table, 5);  // (5, D), each value repeated twice
  ASSERT_EQ(sin_pos.sizes(), (std::vector<int64_t>{5, D}));
  for (int64_t i = 0; i < D; ++i) {
    EXPECT_EQ(sin_pos[4][i].item<float>(), table[4][i / 2].item<float>());
    EXPECT_EQ(cos_pos[4][i].item<float>(), table[4][D / 2 + i / 2].item<float>());
  }
}

TEST(Rotary, RotateHalfPairsAdjacentDimensions) {
  auto x = torch::tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
  EXPECT_TRUE(torch::equal(rotate_half(x), torch::tensor({-2.f, 1.f, -4.f, 3.f, -6.f, 5.f})));
}

TEST(Rotary, ExpectedValuesOnKnownAngles) {
  // D = 4, base 10000: theta_0 = 1, theta_1 = 10000^(-1/2) = 0.01. x = [1, 2, 3, 4] at position 2:
  //   x'_0 = 1 cos 2 - 2 sin 2,  x'_1 = 2 cos 2 + 1 sin 2,
  //   x'_2 = 3 cos .02 - 4 sin .02,  x'_3 = 4 cos .02 + 3 sin .02.
  auto table = rotary_table(4, 4);
  auto [sin_pos, cos_pos] = rotary_sin_cos(table, 3);
  auto x = torch::tensor({1.f, 2.f, 3.f, 4.f}).expand({3, 4}).contiguous();  // (T=3, D=4)
  auto y = apply_rotary(x, sin_pos, cos_pos);
  // Literals from Python math.cos / math.sin, independent of this code.
  const float expected[4] = {-2.2347417f, 0.0770038f, 2.9194054f, 4.0591960f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[2][i].item<float>(), expected[i], 1e-6) << i;
  // Position 0 is the identity.
  EXPECT_TRUE(torch::allclose(y[0], x[0]));
  // And position 1 from the formula with std::cos / std::sin.
  EXPECT_NEAR(y[1][0].item<float>(), 1 * std::cos(1.0) - 2 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(y[1][3].item<float>(), 4 * std::cos(0.01) + 3 * std::sin(0.01), 1e-6);
}

TEST(Rotary, ElementwiseEqualsExplicitBlockDiagonalRotationMatrices) {
  torch::manual_seed(0);
  const int64_t T = 17, D = 16;
  auto table = rotary_table(32, D, 500.0);
  auto [sin_pos, cos_pos] = rotary_sin_cos(table, T);
  auto R = rotation_matrices(sin_pos, cos_pos);  // (T, D, D)
  // Each R_m is block-diagonal with [[cos, -sin], [sin, cos]] blocks and orthogonal.
  const int64_t m = 5, i = 3;
  const double angle = m * std::pow(500.0, -2.0 * i / D);
  EXPECT_NEAR(R[m][2 * i][2 * i].item<float>(), std::cos(angle), 1e-6);
  EXPECT_NEAR(R[m][2 * i][2 * i + 1].item<float>(), -std::sin(angle), 1e-6);
  EXPECT_NEAR(R[m][2 * i + 1][2 * i].item<float>(), std::sin(angle), 1e-6);
  EXPECT_EQ(R[m][0][5].item<float>(), 0.0f);
  auto eye = torch::eye(D).expand({T, D, D});
  EXPECT_TRUE(torch::allclose(torch::matmul(R, R.transpose(1, 2)), eye, 1e-5, 1e-5));

  auto x = torch::randn({2, 3, T, D});  // (B, N, T, D)
  auto a = apply_rotary(x, sin_pos, cos_pos);
  auto b = apply_rotary_matrix(x, sin_pos, cos_pos);
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-6)) << (a - b).abs().max().item<float>();
}

TEST(Rotary, PreservesNorms) {
  torch::manual_seed(1);
  auto table = rotary_table(64, 8);
  auto [sin_pos, cos_pos] = rotary_sin_cos(table, 64);
  auto x = torch::randn({4, 64, 8});
  auto y = apply_rotary(x, sin_pos, cos_pos);
  EXPECT_TRUE(torch::allclose(y.norm(2, -1), x.norm(2, -1), 1e-5, 1e-5));
  // Pairwise too: each 2-d block is rotated, so its norm is kept.
  auto pairs_x = x.view({4, 64, 4, 2}).norm(2, -1), pairs_y = y.view({4, 64, 4, 2}).norm(2, -1);
  EXPECT_TRUE(torch::allclose(pairs_x, pairs_y, 1e-5, 1e-5));
}

TEST(Rotary, ScoreDependsOnlyOnRelativePosition) {
  torch::manual_seed(2);
  const int64_t P = 64, D = 8;
  auto table = rotary_table(P, D);
  auto [sin_pos, cos_pos] = rotary_sin_cos(table, P);
  auto q = torch::randn({D}), k = torch::randn({D});
  // The same q at every position m and the same k at every position n.
  auto rq = apply_rotary(q.expand({P, D}), sin_pos, cos_pos);  // (P, D)
  auto rk = apply_rotary(k.expand({P, D}), sin_pos, cos_pos);
  auto scores = torch::matmul(rq, rk.t());  // (P, P): scores[m][n] = (R_m q) . (R_n k)
  for (int64_t delta : {-7, -1, 0, 3, 20}) {
    const float ref = scores[30][30 - delta].item<float>();
    for (int64_t m : {int64_t(25), int64_t(40), int64_t(50)})
      EXPECT_NEAR(scores[m][m - delta].item<float>(), ref, 1e-4) << "m " << m << " delta " << delta;
  }
  // ... and it does depend on the offset.
  EXPECT_GT(std::abs(scores[30][30].item<float>() - scores[30][27].item<float>()), 1e-3);
}

TEST(Rotary, RejectsOddHeadDimAndTooLongSequences) {
  EXPECT_THROW(rotary_table(8, 5), c10::Error);
  auto table = rotary_table(8, 4);
  EXPECT_THROW(rotary_sin_cos(table, 9), c10::Error);
}

}  // namespace

TEST(Rotary, TablesFollowTheDtypeOfQueriesAndKeysUnderAutocast) {
  // bf16 q with float32 tables would promote the rotation (and its backward) to float32.
  auto [sin_pos, cos_pos] = rotary_sin_cos(rotary_table(16, 8), 16);  // float32
  auto q = torch::randn({2, 3, 16, 8}).to(torch::kBFloat16);
  auto rotated = apply_rotary(q, sin_pos, cos_pos);
  EXPECT_EQ(rotated.scalar_type(), torch::kBFloat16);
  // Same values as rotating in float32 with the tables rounded to bf16.
  auto reference = apply_rotary(q.to(torch::kFloat32), sin_pos.to(torch::kBFloat16).to(torch::kFloat32),
                                cos_pos.to(torch::kBFloat16).to(torch::kFloat32));
  EXPECT_TRUE(torch::allclose(rotated.to(torch::kFloat32), reference, 1e-2, 1e-2));

  // The encoder input is float32 (embedding LayerNorm); under bf16 autocast the projections give bf16.
  auto x = torch::randn({2, 16, 32});
  EXPECT_EQ(rotary_dtype(x), torch::kFloat32);
  {
    roformer::model::AutocastScope autocast(torch::kCPU, roformer::config::Precision::kBf16);
    EXPECT_EQ(rotary_dtype(x), torch::kBFloat16);
  }
  EXPECT_EQ(rotary_dtype(x), torch::kFloat32);
}

// The fused form (one fp32 complex multiply) is the element-wise rotation: equal in fp32 up to
// rounding, for positions along any dimension, with the same gradients; in bf16 it rounds once, so
// it lands at least as close to the exact (fp64) rotation as the bf16 element-wise chain.
TEST(Rotary, FusedComplexFormEqualsElementwiseValuesAndGradients) {
  torch::manual_seed(11);
  const int64_t T = 9, D = 8;
  auto [sin_pos, cos_pos] = rotary_sin_cos(rotary_table(16, D, 10000.0), T);
  auto x = torch::randn({2, 3, T, D}, torch::requires_grad());  // (B, N, T, D)
  auto a = apply_rotary(x, sin_pos, cos_pos);
  auto xf = x.detach().clone().requires_grad_(true);
  auto b = apply_rotary_fused(xf, sin_pos, cos_pos, /*seq_dim=*/-2);
  EXPECT_EQ(b.sizes(), x.sizes());
  EXPECT_TRUE(torch::allclose(a, b, 1e-6, 1e-6)) << (a - b).abs().max().item<double>();
  auto g = torch::randn_like(a);
  a.backward(g);
  b.backward(g);
  EXPECT_TRUE(torch::allclose(x.grad(), xf.grad(), 1e-6, 1e-6));

  // Positions along dim 1 of a (B, T, 2, N, D) view with odd strides elsewhere: a slice of a
  // fused q|k|v projection, as the CUDA attention passes it.
  auto qkv = torch::randn({2, T, 3, 3, D});
  auto qk = qkv.narrow(2, 0, 2);
  auto fused = apply_rotary_fused(qk, sin_pos, cos_pos, /*seq_dim=*/1);
  auto reference = apply_rotary(qk.permute({0, 2, 3, 1, 4}), sin_pos, cos_pos).permute({0, 3, 1, 2, 4});
  EXPECT_TRUE(torch::allclose(fused, reference, 1e-6, 1e-6));

  auto xb = torch::randn({2, 3, T, D}).to(torch::kBFloat16);
  auto exact = apply_rotary(xb.to(torch::kDouble), sin_pos.to(torch::kDouble), cos_pos.to(torch::kDouble));
  auto chain = apply_rotary(xb, sin_pos, cos_pos);  // casts the tables to bf16, rounds per operation
  auto once = apply_rotary_fused(xb, sin_pos, cos_pos, -2);
  EXPECT_EQ(once.scalar_type(), torch::kBFloat16);
  const double err_once = (once.to(torch::kDouble) - exact).abs().max().item<double>();
  const double err_chain = (chain.to(torch::kDouble) - exact).abs().max().item<double>();
  EXPECT_LE(err_once, err_chain);
  EXPECT_LT(err_once, 0.02);  // bf16 rounding of values of magnitude < 4
}
