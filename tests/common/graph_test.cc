#include "common/graph.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

using ::ios::testing::ConvOp;
using ::ios::testing::IdentityOp;

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
  ExpectError(empty,
              "node 'a': kernel: kernel 40 with stride 1 and padding 0 gives an empty height");

  Graph outside = TwoConvs();
  outside.blocks = {{0, {}, 1, {}}, {1, {}, 2, {}}};
  outside.nodes[2].inputs = {{{0, 0, 16}}};
  ExpectError(outside, "reads 'in' from outside the block");
}

// Padding and dilation near 2^30 used to overflow `int` in the window
// arithmetic: a wrapped span gave a huge output, wrapped padding an empty one
// blamed on the kernel.
TEST(ShapeInferenceTest, HugePaddingOrDilationDoesNotOverflowAndBlamesItsField) {
  OpParams dilated = ConvOp(8, 3, 1, 0);
  dilated.conv.dilation = {1 << 30, 1};
  try {
    InferOpOutput(dilated, {{16, 32, 32}}, "node 'x'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'x': dilation: kernel 3 dilated by 1073741824"),
              std::string::npos)
        << e.what();
  }
  const OpParams padded = ConvOp(8, 3, 1, 1 << 30);
  try {
    InferOpOutput(padded, {{16, 32, 32}}, "node 'x'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'x': padding: 1073741824"), std::string::npos)
        << e.what();
  }
  Graph g = TwoConvs();
  g.nodes[1].op.conv.padding = {(1 << 30) - 1, 1};
  ExpectError(g, "node 'a': padding: height 1073741823 exceeds the limit of 65536");
  g = TwoConvs();
  g.nodes[1].op.conv.dilation = {1, 1 << 29};
  ExpectError(g, "node 'a': dilation: width 536870912 exceeds the limit of 65536");
  g = TwoConvs();
  g.nodes[1].op.conv.dilation = {40000, 1};  // within the limit, but the span is not
  ExpectError(g, "node 'a': dilation: dilated kernel height 80001 exceeds the limit of 65536");
}

TEST(ShapeInferenceTest, RefusesWhatNoWorkerCanMeasureNamingNodeFieldAndLimit) {
  Graph wide = TwoConvs();
  wide.nodes[1].op.conv.out_channels = 65537;
  ExpectError(wide, "node 'a': out_channels: 65537 exceeds the limit of 65536");

  Graph high = TwoConvs();
  high.nodes[0].output.h = 70000;
  ExpectError(high, "input 'in': output_shape: height 70000 exceeds the limit of 65536");

  Graph concat = TwoConvs();
  concat.nodes[2].op = IdentityOp();
  concat.nodes[2].inputs.assign(1025, {{0, 0, 1}});
  ExpectError(concat,
              "node 'dw': inputs: number of concatenated terms 1025 exceeds the limit of 1024");

  Graph summed = TwoConvs();
  summed.nodes[2].op = IdentityOp();
  summed.nodes[2].inputs = {Term(1025, Slice{0, 0, 16})};
  ExpectError(summed,
              "node 'dw': inputs[0]: number of summed slices 1025 exceeds the limit of 1024");

  // 5 x 16000 channels: every term fits, the concatenation does not.
  Graph channels = TwoConvs();
  channels.nodes[1].op.conv.out_channels = 16000;
  channels.nodes[2].op = IdentityOp();
  channels.nodes[2].inputs.assign(5, {{1, 0, 16000}});
  ExpectError(channels, "node 'dw': inputs: channel count 80000 exceeds the limit of 65536");

  Graph steps = TwoConvs();
  steps.nodes[2].op.kind = OpKind::kSequential;
  OpParams relu;
  relu.kind = OpKind::kActivation;
  steps.nodes[2].op.chain.assign(65, relu);
  ExpectError(steps, "node 'dw': nodes: number of sequential steps 65 exceeds the limit of 64");
}

// A block of in -> a, in -> b, exit reading only a: b is computed for nothing.
Graph BlockWithDeadOperator() {
  Graph g = TwoConvs();
  g.nodes[1].op.conv.stride = {1, 1};  // a: 8x32x32, so out may concatenate it with dw
  g.nodes[2].inputs = {{{0, 0, 16}}};
  g.nodes.push_back({"out", "", IdentityOp(), {{{1, 0, 8}}}, {}});
  g.blocks = {{0, {1, 2}, 3, {}}};
  InferShapes(g);  // structurally fine: only the sink check refuses it
  return g;
}

void ExpectSinkError(const Graph& g, const std::string& fragment) {
  try {
    CheckSingleSinkBlocks(g);
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(BlockCheckTest, SecondSinkIsRefusedNamingTheNode) {
  ExpectSinkError(BlockWithDeadOperator(), "block 0: node 'dw': a second sink");
  Graph fine = BlockWithDeadOperator();
  fine.nodes[3].inputs.push_back({{2, 0, 16}});
  InferShapes(fine);
  EXPECT_NO_THROW(CheckSingleSinkBlocks(fine));
}

TEST(BlockCheckTest, ExitReadingNoneOfTheBlocksOperatorsIsRefused) {
  Graph g = BlockWithDeadOperator();
  g.nodes[3].inputs = {{{0, 0, 16}}};
  InferShapes(g);
  ExpectSinkError(g, "block 0: exit_node 'out': reads none of the block's operators");
  // A block of the exit alone reads only its entry, and that is fine.
  Graph single = TwoConvs();
  single.blocks = {{0, {}, 1, {}}, {1, {}, 2, {}}};
  single.nodes[2].inputs = {{{1, 0, 8}}};
  single.nodes[2].op = ConvOp(8, 3, 1, 1);
  InferShapes(single);
  EXPECT_NO_THROW(CheckSingleSinkBlocks(single));
}

TEST(ShapeInferenceTest, EmptyNodeNameIsReportedByIndex) {
  Graph g = TwoConvs();
  g.nodes[1].name = "";
  ExpectError(g, "node at index 1: name: empty");
}

TEST(ShapeInferenceTest, NamesInMessagesAreEscaped) {
  Graph g = TwoConvs();
  g.nodes[1].name = "a\n\x1b[31m";
  g.nodes[1].op.conv.out_channels = 0;
  ExpectError(g, "node 'a\\n\\x1b[31m': out_channels");
}

}  // namespace
}  // namespace ios
