// The transformer kinds of common/op_kinds_transformer.h: attention's and
// embed_tokens' reference arithmetic on values worked out by hand, their
// shapes and their refusals.
#include "common/op_kinds_transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "common/op_kinds.h"

namespace ios {
namespace {

OpParams AttentionOp(int heads) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kAttention);
  op.registered.attributes = {heads};
  return op;
}

OpParams EmbedTokensOp(bool class_token) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kEmbedTokens);
  op.registered.attributes = {class_token ? 1 : 0};
  return op;
}

std::vector<float> Attend(int heads, const Shape& input, const std::vector<float>& in) {
  const Shape out = InferOpOutput(AttentionOp(heads), {input}, "test");
  std::vector<float> values(static_cast<size_t>(out.c) * out.h * out.w);
  SpecOf(RegisteredKind::kAttention)
      .reference(AttentionOp(heads).registered, input, in.data(), values.data(), {});
  return values;
}

// One head of one feature, two tokens: p(0, .) = softmax(0, ln 3) = (1/4,
// 3/4) and p(1, .) = softmax(0, 2 ln 3) = (1/10, 9/10), so values 4 and 8
// give 7 and 7.6.
TEST(AttentionTest, IsTheSoftmaxOfQueryKeyProductsTimesTheValues) {
  const float ln3 = std::log(3.0f);
  //                              q0 q1 k0  k1   v0 v1
  const std::vector<float> out = Attend(1, {3, 2, 1}, {1, 2, 0, ln3, 4, 8});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NEAR(out[0], 7.0f, 1e-6);
  EXPECT_NEAR(out[1], 7.6f, 1e-6);
}

// The scores are divided by the square root of a head's features: two
// features whose products sum to sqrt(2) ln 3 weigh the tokens as ln 3 did.
TEST(AttentionTest, ScalesTheScoresByOneOverTheRootOfTheHeadSize) {
  const float a = std::log(3.0f) / std::sqrt(2.0f);
  // Channels q0 q1 k0 k1 v0 v1, each over tokens (t0, t1).
  const std::vector<float> in = {1, 0, 1, 0, 0, a, 0, a, 4, 8, 0, 4};
  const std::vector<float> out = Attend(1, {6, 2, 1}, in);
  EXPECT_NEAR(out[0], 7.0f, 1e-6);  // token 0, feature 0: (4 + 3 * 8) / 4
  EXPECT_NEAR(out[2], 3.0f, 1e-6);  // token 0, feature 1: (0 + 3 * 4) / 4
  // Token 1's query is zero: equal weights, the mean of the values.
  EXPECT_NEAR(out[1], 6.0f, 1e-6);
  EXPECT_NEAR(out[3], 2.0f, 1e-6);
}

// Two heads of one feature each: head 1 sees only channel 1 of the
// queries, keys and values; the tokens may be a 2-D map (pixels in
// row-major order).
TEST(AttentionTest, HeadsAreIndependentAndEveryPixelIsAToken) {
  const float ln3 = std::log(3.0f);
  // Channels q(h0) q(h1) k(h0) k(h1) v(h0) v(h1), each over a 1 x 2 map.
  const std::vector<float> in = {1, 2, 0, 0, 0, ln3, 5, 5, 4, 8, 1, 3};
  const std::vector<float> out = Attend(2, {6, 1, 2}, in);
  EXPECT_NEAR(out[0], 7.0f, 1e-6);
  EXPECT_NEAR(out[1], 7.6f, 1e-6);
  // Head 1's keys are equal: every query weighs both tokens alike.
  EXPECT_NEAR(out[2], 2.0f, 1e-6);
  EXPECT_NEAR(out[3], 2.0f, 1e-6);
}

TEST(AttentionTest, LargeScoresDoNotOverflow) {
  // exp(1000) is inf in double: the softmax must shift by the largest score.
  const std::vector<float> out = Attend(1, {3, 2, 1}, {1000, 1000, 1, 0, 2, 6});
  EXPECT_NEAR(out[0], 2.0f, 1e-6);
  EXPECT_NEAR(out[1], 2.0f, 1e-6);
}

TEST(AttentionTest, ShapeIsAThirdOfTheChannelsAndRefusalsSayWhy) {
  EXPECT_EQ(InferOpOutput(AttentionOp(4), {{192, 17, 1}}, "test"), (Shape{64, 17, 1}));
  EXPECT_EQ(InferOpOutput(AttentionOp(2), {{96, 10}, {96, 10}, {96, 10}}, "t").c, 96);
  try {
    InferOpOutput(AttentionOp(1), {{64, 4, 4}}, "node 'a'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'a': attention reads queries, keys and values"),
              std::string::npos)
        << e.what();
  }
  try {
    InferOpOutput(AttentionOp(5), {{192, 4, 4}}, "node 'a'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("heads: 5 does not divide the 64 channels"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(RegisteredKeyText(AttentionOp(12).registered), "attention(heads=12)");
  EXPECT_EQ(Describe(AttentionOp(12)), "attention (12 heads)");
  EXPECT_FALSE(HasWeights(RegisteredKind::kAttention));
}

TEST(AttentionTest, CostsQuadraticallyInTheTokens) {
  const OpKindSpec& spec = SpecOf(RegisteredKind::kAttention);
  ASSERT_NE(spec.sim_flops, nullptr);
  const double flops = spec.sim_flops(AttentionOp(1).registered, {3 * 64, 10, 1});
  EXPECT_DOUBLE_EQ(spec.sim_flops(AttentionOp(1).registered, {3 * 64, 20, 1}), 4 * flops);
  EXPECT_DOUBLE_EQ(flops, 4.0 * 64 * 10 * 10);
}

// Channel c, token t of the position embedding is kernel[c * L + t]; the
// class token's channel c is bias[c].
TEST(EmbedTokensTest, PutsTheClassTokenFirstAndAddsThePositionEmbedding) {
  const OpParams op = EmbedTokensOp(true);
  const Shape input{2, 1, 2};  // two features, a 1 x 2 map: tokens 1 and 2
  const Shape out = InferOpOutput(op, {input}, "test");
  EXPECT_EQ(out, (Shape{2, 3, 1}));
  const KindWeightShape weights =
      SpecOf(RegisteredKind::kEmbedTokens).weights(op.registered, input);
  EXPECT_EQ(weights.out_channels, 2);
  EXPECT_EQ(weights.kernel_values(), 6);
  EXPECT_TRUE(weights.bias);
  const std::vector<float> in = {1, 2, 3, 4};
  const std::vector<float> position = {0.5f, 0.25f, 0.125f, 10, 20, 30};
  const std::vector<float> class_token = {100, 200};
  std::vector<float> values(6);
  SpecOf(RegisteredKind::kEmbedTokens)
      .reference(op.registered, input, in.data(), values.data(), {position, class_token});
  EXPECT_EQ(values, (std::vector<float>{100.5f, 1.25f, 2.125f, 210, 23, 34}));
}

TEST(EmbedTokensTest, WithoutAClassTokenOnlyAddsThePositionEmbedding) {
  const OpParams op = EmbedTokensOp(false);
  const Shape input{1, 2, 2};
  EXPECT_EQ(InferOpOutput(op, {input}, "test"), (Shape{1, 4, 1}));
  const KindWeightShape weights =
      SpecOf(RegisteredKind::kEmbedTokens).weights(op.registered, input);
  EXPECT_EQ(weights.kernel_values(), 4);
  EXPECT_FALSE(weights.bias);
  const std::vector<float> in = {1, 2, 3, 4}, position = {10, 20, 30, 40};
  std::vector<float> values(4);
  SpecOf(RegisteredKind::kEmbedTokens)
      .reference(op.registered, input, in.data(), values.data(), {position, {}});
  EXPECT_EQ(values, (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(RegisteredKeyText(op.registered), "embed_tokens(class_token=0)");
  EXPECT_TRUE(HasWeights(RegisteredKind::kEmbedTokens));
}

}  // namespace
}  // namespace ios
