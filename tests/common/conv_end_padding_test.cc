// Convolutions padded more at the bottom and right than at the top and left
// (TensorFlow's SAME padding at stride 2, ConvParams::padding_end_extra): the
// output size, refusals naming the field, and a key, IOS JSON field and
// description of their own that appear only then.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "common/graph.h"
#include "common/ios_json.h"
#include "common/stage.h"
#include "common/stage_key.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

OpParams PaddedConv(int kernel, int stride, int pad, Window extra) {
  OpParams op = ::ios::testing::ConvOp(8, kernel, stride, pad, Activation::kNone);
  op.conv.padding_end_extra = extra;
  return op;
}

std::string InferMessage(const OpParams& op, const Shape& input) {
  try {
    InferOpOutput(op, {input}, "node 'c'");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Graph OneConv(const OpParams& conv) {
  Graph g = ::ios::testing::GraphWithInput({4, 8, 8});
  g.nodes.push_back({"c", "", conv, {{{0, 0, 4}}}, {}});
  g.blocks.push_back({0, {}, 1, {}});
  InferShapes(g);
  return g;
}

std::string KeyOf(const OpParams& conv) {
  Stage stage;
  stage.groups = {{1}};
  return MakeStageSpec(OneConv(conv), stage).Key();
}

TEST(ConvEndPaddingTest, OutputSizeCountsTheExtraRowsAndColumnsOnce) {
  // BlazeFace: 3x3/2 with pads [0,0,1,1] and 5x5/2 with [1,1,2,2] halve 128.
  EXPECT_EQ(InferOpOutput(PaddedConv(3, 2, 0, {1, 1}), {{4, 128, 128}}, "c"), (Shape{8, 64, 64}));
  EXPECT_EQ(InferOpOutput(PaddedConv(5, 2, 1, {1, 1}), {{4, 128, 128}}, "c"), (Shape{8, 64, 64}));
  // Without the extra, 63; extra rows only: (7 + 2*1 + 2 - 3) / 1 + 1 = 9 rows.
  EXPECT_EQ(InferOpOutput(PaddedConv(3, 2, 0, {0, 0}), {{4, 128, 128}}, "c"), (Shape{8, 63, 63}));
  EXPECT_EQ(InferOpOutput(PaddedConv(3, 1, 1, {2, 0}), {{4, 7, 7}}, "c"), (Shape{8, 9, 7}));
}

TEST(ConvEndPaddingTest, NegativeOrHugeExtraIsRefusedNamingTheField) {
  EXPECT_EQ(InferMessage(PaddedConv(3, 2, 1, {0, -1}), {4, 8, 8}),
            "node 'c': padding_end_extra: -1 (width) must be >= 0");
  Graph g = ::ios::testing::GraphWithInput({4, 8, 8});
  g.nodes.push_back({"c", "", PaddedConv(3, 2, 1, {70000, 0}), {{{0, 0, 4}}}, {}});
  g.blocks.push_back({0, {}, 1, {}});
  try {
    InferShapes(g);
    ADD_FAILURE() << "a 70000-row extra padding was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("padding_end_extra: height 70000 exceeds the limit"));
  }
}

TEST(ConvEndPaddingTest, KeysParseBackAndOnlyConvsWithExtraKeyDifferently) {
  const std::string padded = KeyOf(PaddedConv(3, 2, 0, {1, 1}));
  EXPECT_THAT(padded, HasSubstr("conv(o8,k3x3,s2x2,p0x0,pe1x1,d1x1,g1,b1,none)"));
  EXPECT_EQ(ParseStageKey(padded).Key(), padded);
  EXPECT_EQ(ParseStageKey(padded).groups[0][0].op.conv.padding_end_extra, (Window{1, 1}));
  const std::string plain = KeyOf(PaddedConv(3, 2, 0, {0, 0}));
  EXPECT_THAT(plain, HasSubstr("conv(o8,k3x3,s2x2,p0x0,d1x1,g1,b1,none)"));
  EXPECT_NE(KeyOf(PaddedConv(3, 2, 0, {1, 0})), KeyOf(PaddedConv(3, 2, 0, {0, 1})));
  EXPECT_EQ(Describe(PaddedConv(5, 2, 1, {1, 1})), "conv5x5/2x2 p1x1+1x1 8");
  EXPECT_EQ(Describe(PaddedConv(5, 2, 1, {0, 0})), "conv5x5/2x2 p1x1 8");
}

TEST(ConvEndPaddingTest, IosJsonWritesTheExtraOnlyWhenThereIsOneAndReadsItBack) {
  const Graph g = OneConv(PaddedConv(5, 2, 1, {1, 0}));
  const std::string json = ToIosJson(g);
  EXPECT_THAT(json, HasSubstr("\"padding_end_extra\""));
  const Graph back = ParseIosJson(json, "g.json").graph;
  EXPECT_EQ(back.node(1).op, g.node(1).op);
  EXPECT_EQ(back.node(1).output, (Shape{8, 4, 3}));
  EXPECT_THAT(ToIosJson(OneConv(PaddedConv(5, 2, 1, {0, 0}))), Not(HasSubstr("padding_end_extra")));
}

}  // namespace
}  // namespace ios
