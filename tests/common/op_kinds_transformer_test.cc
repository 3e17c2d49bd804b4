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

OpParams WindowAttentionOp(int heads, int window, int shift, bool grid = false) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kWindowAttention);
  op.registered.attributes = {heads, window, shift, grid ? 1 : 0, FloatBits(0.0f)};
  return op;
}

std::vector<float> WindowAttend(const OpParams& op, const Shape& input,
                                const std::vector<float>& in, const std::vector<float>& bias) {
  const Shape out = InferOpOutput(op, {input}, "test");
  std::vector<float> values(static_cast<size_t>(out.c) * out.h * out.w);
  SpecOf(RegisteredKind::kWindowAttention)
      .reference(op.registered, input, in.data(), values.data(), {bias, {}});
  return values;
}

// A 1 x 4 map of one feature in two 1 x 2 windows (window 2 needs a 2-row
// map: a 2 x 4 map, every query 0 so that only bias and mask weigh).
TEST(WindowAttentionTest, TokensAttendOnlyInsideTheirWindowWithTheBias) {
  const Shape input{3, 2, 4};
  std::vector<float> in(3 * 8, 0.0f);
  for (int p = 0; p < 8; ++p) in[16 + p] = static_cast<float>(p);  // values: the pixel index
  // Bias: token 0 of a window strongly prefers token 3 (its diagonal pixel).
  std::vector<float> bias(16, 0.0f);
  bias[0 * 4 + 3] = 50;
  const std::vector<float> out = WindowAttend(WindowAttentionOp(1, 2, 0), input, in, bias);
  // Window 0 holds pixels 0, 1, 4, 5; window 1 pixels 2, 3, 6, 7.
  EXPECT_NEAR(out[0], 5.0f, 1e-6);                   // token 0 of window 0 takes pixel 5
  EXPECT_NEAR(out[2], 7.0f, 1e-6);                   // token 0 of window 1 takes pixel 7
  EXPECT_NEAR(out[1], (0 + 1 + 4 + 5) / 4.0, 1e-6);  // no bias: the window's mean
  EXPECT_NEAR(out[6], (2 + 3 + 6 + 7) / 4.0, 1e-6);
  const KindWeightShape w =
      SpecOf(RegisteredKind::kWindowAttention).weights(WindowAttentionOp(3, 7, 3).registered, {});
  EXPECT_EQ(w.out_channels, 3);
  EXPECT_EQ(w.kernel_values(), 3 * 49 * 49);
}

// Shifted by 1 on a 4 x 4 map of windows of 2: the rolled map's window
// (1, 1) holds pixels from all four corners, which the mask keeps apart.
TEST(WindowAttentionTest, AShiftRollsTheMapAndTheMaskSeparatesWhatTheRollJoined) {
  const Shape input{3, 4, 4};
  std::vector<float> in(3 * 16, 0.0f);
  for (int p = 0; p < 16; ++p) in[32 + p] = static_cast<float>(p);
  const std::vector<float> out =
      WindowAttend(WindowAttentionOp(1, 2, 1), input, in, std::vector<float>(16, 0.0f));
  // Rolled pixel (y, x) is pixel ((y + 1) % 4, (x + 1) % 4). Rolled window
  // (0, 0) = pixels 5, 6, 9, 10: one region, so each gets their mean.
  EXPECT_NEAR(out[5], (5 + 6 + 9 + 10) / 4.0, 1e-6);
  // Rolled window (1, 1) = rolled rows and columns 2, 3 = pixels 15, 12, 3, 0:
  // four regions (cut at 4 - 2 and 4 - 1), each token alone in its own.
  for (const int p : {15, 12, 3, 0}) EXPECT_NEAR(out[p], p, 1e-6) << p;
  // Rolled window (0, 1) = rows 0, 1 and columns 2, 3 = pixels 7, 4, 11, 8:
  // regions by column: 7 and 11 (column 2), 4 and 8 (column 3).
  EXPECT_NEAR(out[7], 9.0, 1e-6);
  EXPECT_NEAR(out[4], 6.0, 1e-6);
  EXPECT_EQ(op_kinds_detail::WindowRegion(3, 4, 2, 1), 2);
  EXPECT_EQ(op_kinds_detail::WindowRegion(2, 4, 2, 1), 1);
  EXPECT_EQ(op_kinds_detail::WindowRegion(1, 4, 2, 1), 0);
  EXPECT_EQ(op_kinds_detail::WindowRegion(3, 4, 2, 0), 0);
}

TEST(WindowAttentionTest, RefusesWindowsThatDoNotTileTheMapAndShiftsPastTheWindow) {
  EXPECT_EQ(InferOpOutput(WindowAttentionOp(3, 7, 3), {{288, 56, 56}}, "t"), (Shape{96, 56, 56}));
  EXPECT_THROW(InferOpOutput(WindowAttentionOp(1, 7, 0), {{3, 8, 7}}, "t"), Error);
  EXPECT_THROW(InferOpOutput(WindowAttentionOp(1, 2, 2), {{3, 4, 4}}, "t"), Error);
  EXPECT_EQ(RegisteredKeyText(WindowAttentionOp(3, 7, 3).registered),
            "window_attention(heads=3,window=7,shift=3,grid=0,scale=0)");
  EXPECT_THROW(InferOpOutput(WindowAttentionOp(1, 2, 1, true), {{3, 4, 4}}, "t"), Error);
}

// MaxViT's grid: on a 4 x 4 map a grid of 2 puts pixels (0,0), (0,2),
// (2,0), (2,2) in window 0; values equal to the pixel index and no bias
// give each token its window's mean.
TEST(WindowAttentionTest, AGridWindowHoldsPixelsSpreadOverTheMap) {
  const Shape input{3, 4, 4};
  std::vector<float> in(3 * 16, 0.0f);
  for (int p = 0; p < 16; ++p) in[32 + p] = static_cast<float>(p);
  const std::vector<float> out =
      WindowAttend(WindowAttentionOp(1, 2, 0, true), input, in, std::vector<float>(16, 0.0f));
  EXPECT_NEAR(out[0], (0 + 2 + 8 + 10) / 4.0, 1e-6);
  EXPECT_NEAR(out[10], (0 + 2 + 8 + 10) / 4.0, 1e-6);
  EXPECT_NEAR(out[5], (5 + 7 + 13 + 15) / 4.0, 1e-6);
  EXPECT_EQ(Describe(WindowAttentionOp(2, 7, 0, true)), "grid attention (2 heads, 7x7 grid)");
}

// A scale replaces 1/sqrt(d). One 2 x 2 window, one head of 4: token 0's
// query meets token 1's key at ln 3, and only token 1's value is not 0
// (4 in every feature). Under scale 1 the weights are 1 : 3 : 1 : 1, under
// the default 1/sqrt(4) they are 1 : sqrt(3) : 1 : 1.
TEST(WindowAttentionTest, AScaleReplacesTheRootOfTheHeadSize) {
  const Shape input{12, 2, 2};
  std::vector<float> in(12 * 4, 0.0f);
  in[0] = 1;                                       // q, feature 0, token 0
  in[4 * 4 + 1] = std::log(3.0f);                  // k, feature 0, token 1
  for (int c = 8; c < 12; ++c) in[c * 4 + 1] = 4;  // v, token 1
  OpParams scaled = WindowAttentionOp(1, 2, 0);
  SetFloatAttribute(scaled.registered, "scale", 1.0f, "test");
  const std::vector<float> bias(16, 0.0f);
  EXPECT_NEAR(WindowAttend(scaled, input, in, bias)[0], 2.0, 1e-6);
  const double root3 = std::sqrt(3.0);
  EXPECT_NEAR(WindowAttend(WindowAttentionOp(1, 2, 0), input, in, bias)[0], 4 * root3 / (3 + root3),
              1e-6);
  EXPECT_EQ(RegisteredKeyText(scaled.registered),
            "window_attention(heads=1,window=2,shift=0,grid=0,scale=1)");
}

TEST(SpaceToDepthTest, StacksEachSquareInTorchvisionsOrder) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kSpaceToDepth);
  const Shape input{1, 2, 4};
  EXPECT_EQ(InferOpOutput(op, {input}, "t"), (Shape{4, 1, 2}));
  const std::vector<float> in = {0, 1, 2, 3, 10, 11, 12, 13};
  std::vector<float> out(8);
  SpecOf(RegisteredKind::kSpaceToDepth).reference(op.registered, input, in.data(), out.data(), {});
  // x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2].
  EXPECT_EQ(out, (std::vector<float>{0, 2, 10, 12, 1, 3, 11, 13}));
  EXPECT_THROW(InferOpOutput(op, {{1, 3, 4}}, "t"), Error);
}

}  // namespace
}  // namespace ios
