// Max pools rounding their output size up (ceil_mode, GoogLeNet): the shape
// PyTorch gives, a key of their own that parses back, and no other key
// changed. Average pools leaving their padding out of the divisor
// (count_include_pad=0) likewise: a key, IOS JSON and wire field of their own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/graph.h"
#include "common/ios_json.h"
#include "common/stage.h"
#include "common/stage_key.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

OpParams Max(int kernel, int stride, int pad, bool ceil) {
  OpParams op = ::ios::testing::PoolOp(PoolType::kMax, kernel, stride, pad);
  op.pool.ceil = ceil;
  return op;
}

TEST(PoolCeilTest, OutputSizesAreTorchs) {
  // GoogLeNet: 112 -> 56 (55 rounding down), 14 -> 7 with 2x2/2.
  EXPECT_EQ(InferOpOutput(Max(3, 2, 0, true), {{64, 112, 112}}, "p"), (Shape{64, 56, 56}));
  EXPECT_EQ(InferOpOutput(Max(3, 2, 0, false), {{64, 112, 112}}, "p"), (Shape{64, 55, 55}));
  EXPECT_EQ(InferOpOutput(Max(2, 2, 0, true), {{8, 13, 13}}, "p"), (Shape{8, 7, 7}));
  // A last window may not start in the right padding: 5 padded by 1 with
  // 2x2/2 rounds up to 4 windows, the 4th starting at 6 - 1 = 5, past the
  // input: 3 remain (as rounding down gives here).
  EXPECT_EQ(InferOpOutput(Max(2, 2, 1, true), {{1, 5, 5}}, "p"), (Shape{1, 3, 3}));
  OpParams avg = ::ios::testing::PoolOp(PoolType::kAvg, 3, 2, 0);
  avg.pool.ceil = true;
  EXPECT_THROW(InferOpOutput(avg, {{1, 8, 8}}, "p"), Error);
}

TEST(PoolCeilTest, KeysParseBackAndOnlyCeilPoolsKeyDifferently) {
  const auto key = [](bool ceil) {
    Graph g;
    Node input{"in", "", {}, {}, {4, 8, 8}};
    input.op.kind = OpKind::kInput;
    g.nodes.push_back(input);
    g.nodes.push_back({"pool", "", Max(3, 2, 0, ceil), {{{0, 0, 4}}}, {}});
    InferShapes(g);
    Stage stage;
    stage.groups = {{1}};
    return MakeStageSpec(g, stage).Key();
  };
  EXPECT_THAT(key(true), ::testing::HasSubstr("pool(max,k3x3,s2x2,p0x0,ceil)"));
  EXPECT_THAT(key(false), ::testing::HasSubstr("pool(max,k3x3,s2x2,p0x0)"));
  EXPECT_EQ(ParseStageKey(key(true)).Key(), key(true));
  EXPECT_TRUE(ParseStageKey(key(true)).groups[0][0].op.pool.ceil);
}

OpParams AvgExcludingPadding(bool exclude) {
  OpParams op = ::ios::testing::PoolOp(PoolType::kAvg, 3, 2, 1);
  op.pool.exclude_padding = exclude;
  return op;
}

Graph OnePool(const OpParams& pool) {
  Graph g = ::ios::testing::GraphWithInput({4, 8, 8});
  g.nodes.push_back({"pool", "", pool, {{{0, 0, 4}}}, {}});
  g.blocks.push_back({0, {}, 1, {}});
  InferShapes(g);
  return g;
}

TEST(PoolExcludePaddingTest, KeysJsonAndDescriptionsSayItAndOnlyThen) {
  const auto key = [](bool exclude) {
    Stage stage;
    stage.groups = {{1}};
    return MakeStageSpec(OnePool(AvgExcludingPadding(exclude)), stage).Key();
  };
  EXPECT_THAT(key(true), ::testing::HasSubstr("pool(avg,k3x3,s2x2,p1x1,exclpad)"));
  EXPECT_THAT(key(false), ::testing::HasSubstr("pool(avg,k3x3,s2x2,p1x1)<"));
  EXPECT_EQ(ParseStageKey(key(true)).Key(), key(true));
  EXPECT_TRUE(ParseStageKey(key(true)).groups[0][0].op.pool.exclude_padding);
  EXPECT_EQ(Describe(AvgExcludingPadding(true)), "avgpool3x3/2x2 p1x1 excluding padding");

  const Graph g = OnePool(AvgExcludingPadding(true));
  const std::string json = ToIosJson(g);
  EXPECT_THAT(json, ::testing::HasSubstr("\"count_include_pad\": false"));
  EXPECT_TRUE(ParseIosJson(json, "g.json").graph.node(1).op.pool.exclude_padding);
  EXPECT_THAT(ToIosJson(OnePool(AvgExcludingPadding(false))),
              ::testing::Not(::testing::HasSubstr("count_include_pad")));

  OpParams max = ::ios::testing::PoolOp(PoolType::kMax, 3, 2, 1);
  max.pool.exclude_padding = true;
  EXPECT_THROW(InferOpOutput(max, {{1, 8, 8}}, "p"), Error);
}

}  // namespace
}  // namespace ios
