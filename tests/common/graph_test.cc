#include "common/graph.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

using ::ios::testing::ConvOp;

Graph TwoConvs() {
  Graph g;
  g.name = "t";
  Node in{"in", "", {}, {}, {16, 32, 32}};
  in.op.kind = OpKind::kInput;
  g.nodes.push_back(in);
  g.nodes.push_back({"a", "", ConvOp(8, 3, 2, 1), {{{0, 0, 16}}}, {}});
  g.nodes.push_back({"dw", "", ConvOp(16, 3, 1, 1, Activation::kRelu, 16), {{{0, 0, 16}}}, {}});
  g.blocks.push_back({0, {1}, 2, {}});
  return g;
}

TEST(ShapeInferenceTest, ComputesConvAndDepthwiseShapes) {
  Graph g = TwoConvs();
  InferShapes(g);
  EXPECT_EQ(g.node(1).output, (Shape{8, 16, 16}));
  EXPECT_EQ(g.node(2).output, (Shape{16, 32, 32}));
}

TEST(ShapeInferenceTest, ConcatenatesTermsAndPoolsGlobally) {
  Graph g = TwoConvs();
  g.nodes[2].op = ConvOp(8, 3, 2, 1);
  OpParams pool;
  pool.kind = OpKind::kPool;
  pool.pool.type = PoolType::kGlobalAvg;
  g.nodes.push_back({"p", "", pool, {{{1, 0, 8}}, {{2, 0, 8}}}, {}});
  g.blocks[0] = {0, {1, 2}, 3, {}};
  InferShapes(g);
  EXPECT_EQ(g.node(3).output, (Shape{16, 1, 1}));
}

TEST(ShapeInferenceTest, DilationWidensTheWindow) {
  Graph g = TwoConvs();
  g.nodes[1].op.conv.dilation = {2, 2};
  g.nodes[1].op.conv.padding = {0, 0};
  g.nodes[1].op.conv.stride = {1, 1};
  InferShapes(g);
  EXPECT_EQ(g.node(1).output, (Shape{8, 28, 28}));
}

TEST(ShapeInferenceTest, EltwiseNeedsEqualTerms) {
  Graph g = TwoConvs();
  OpParams mul;
  mul.kind = OpKind::kEltwise;
  mul.eltwise = EltwiseType::kMul;
  g.nodes[2] = {"m", "", mul, {{{1, 0, 8}}, {{0, 0, 8}}}, {}};
  EXPECT_THROW(InferShapes(g), Error);  // 16x16 vs 32x32
}

void ExpectError(Graph g, const std::string& fragment) {
  try {
    InferShapes(g);
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ShapeInferenceTest, RejectsBadGraphsNamingNodeAndField) {
  Graph cycle = TwoConvs();
  cycle.nodes[1].inputs = {{{2, 0, 16}}};
  ExpectError(cycle, "node 'a': inputs: producer 'dw' does not come before it");

  Graph unknown = TwoConvs();
  unknown.nodes[1].inputs = {{{7, 0, 16}}};
  ExpectError(unknown, "node 'a': inputs: unknown producer");

  Graph range = TwoConvs();
  range.nodes[1].inputs = {{{0, 8, 24}}};
  ExpectError(range, "node 'a': inputs: slice [8, 24) out of range");

  Graph channels = TwoConvs();
  channels.nodes[2].op.conv.groups = 5;
  ExpectError(channels, "node 'dw': groups");

  Graph spatial = TwoConvs();
  spatial.nodes[2].inputs = {{{0, 0, 16}}, {{1, 0, 8}}};
  ExpectError(spatial, "node 'dw': inputs: spatial mismatch");

  Graph empty = TwoConvs();
  empty.nodes[1].op = ConvOp(8, 40, 1, 0);
  ExpectError(empty, "node 'a': kernel 40 with stride 1 and padding 0 gives an empty height");

  Graph outside = TwoConvs();
  outside.blocks = {{0, {}, 1, {}}, {1, {}, 2, {}}};
  outside.nodes[2].inputs = {{{0, 0, 16}}};
  ExpectError(outside, "reads 'in' from outside the block");
}

}  // namespace
}  // namespace ios
