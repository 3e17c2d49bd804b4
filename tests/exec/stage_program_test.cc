// StageProgram: the program that measures one stage on its own validates
// and runs on the reference device for every op kind, sequential units,
// sliced and summed inputs, concurrent and merge stages.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/stage.h"
#include "exec/device.h"
#include "exec/program.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/ops.h"

namespace ios::exec {
namespace {

using ::ios::exec::testing::GraphBuilder;
using ::ios::exec::testing::Ramp;
using ::ios::exec::testing::RunOnReference;
using ::ios::testing::ActOp;
using ::ios::testing::ConvOp;
using ::ios::testing::EltwiseOp;
using ::ios::testing::IdentityOp;
using ::ios::testing::PoolOp;

// A graph with every op kind, slices and sums, a sequential unit and three
// mergeable convolutions of one input.
struct TestNet {
  Graph graph;
  NodeId a, b, c, grouped, max, avg, gmax, gavg, relu, add, concat, summed, seq, m1, m3, m5;
};

TestNet BuildNet() {
  GraphBuilder g({4, 6, 6});
  TestNet n;
  const NodeId in = 0;
  n.a = g.Add("a", ConvOp(4, 3, 1, 1), {{g.S(in)}});
  n.b = g.Add("b", ConvOp(4, 1, 1, 0, Activation::kTanh), {{g.S(in)}});
  n.c = g.Add("c", PoolOp(PoolType::kMax, 3, 1, 1), {{g.S(in)}});
  n.grouped = g.Add("grouped", ConvOp(4, 3, 2, 1, Activation::kSigmoid, 2), {{g.S(n.a)}});
  n.max = g.Add("max", PoolOp(PoolType::kMax, 2, 2, 0), {{g.S(n.b)}});
  n.avg = g.Add("avg", PoolOp(PoolType::kAvg, 3, 2, 1), {{g.S(n.b)}});
  n.gmax = g.Add("gmax", PoolOp(PoolType::kGlobalMax, 1, 1, 0), {{g.S(n.avg)}});
  n.gavg = g.Add("gavg", PoolOp(PoolType::kGlobalAvg, 1, 1, 0), {{g.S(n.max)}});
  n.relu = g.Add("relu", ActOp(Activation::kRelu), {{g.S(n.a)}});
  n.add = g.Add("add", EltwiseOp(EltwiseType::kAdd), {{g.S(n.a)}, {g.S(n.b)}, {g.S(n.c)}});
  n.concat = g.Add("concat", IdentityOp(), {{g.S(n.a, 0, 2)}, {g.S(n.b)}, {g.S(n.relu, 1, 3)}});
  // A conv over [a[0:2] + b[2:4], c[1:4]]: sliced, summed and concatenated.
  n.summed =
      g.Add("summed", ConvOp(3, 3, 1, 1), {{g.S(n.a, 0, 2), g.S(n.b, 2, 4)}, {g.S(n.c, 1, 4)}});
  OpParams seq;
  seq.kind = OpKind::kSequential;
  seq.chain = {ActOp(Activation::kRelu), ConvOp(5, 3, 1, 1, Activation::kNone, 5),
               ConvOp(6, 1, 1, 0, Activation::kNone)};
  seq.chain[2].conv.bias = false;
  n.seq = g.Add("seq", seq, {{g.S(n.b, 0, 2)}, {g.S(n.c, 0, 3)}});
  n.m1 = g.Add("m1", ConvOp(2, 1, 1, 0), {{g.S(n.add)}, {g.S(n.concat)}});
  n.m3 = g.Add("m3", ConvOp(3, 3, 1, 1), {{g.S(n.add)}, {g.S(n.concat)}});
  OpParams m5 = ConvOp(2, 5, 1, 2);
  m5.conv.bias = false;
  n.m5 = g.Add("m5", m5, {{g.S(n.add)}, {g.S(n.concat)}});
  n.graph = g.Done();
  return n;
}

void ExpectRuns(const Graph& graph, const Stage& stage, const std::string& what) {
  SCOPED_TRACE(what);
  const StageSpec spec = MakeStageSpec(graph, stage);
  const Program program = StageProgram(spec, 7);
  ASSERT_NO_THROW(Validate(program));
  ASSERT_EQ(program.inputs.size(), spec.externals.size());
  for (const int batch : {1, 2}) {
    std::vector<std::vector<float>> inputs;
    for (const Shape& s : spec.externals) inputs.push_back(Ramp(testing::Elements(s, batch)));
    const auto outputs = RunOnReference(program, inputs, batch);
    ASSERT_EQ(outputs.size(), spec.strategy == Strategy::kMerge
                                  ? static_cast<size_t>(spec.OperatorCount())
                                  : spec.groups.size());
    for (const auto& out : outputs) {
      for (float v : out) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

TEST(StageProgramTest, EveryOpKindValidatesAndRuns) {
  const TestNet n = BuildNet();
  for (NodeId id = 1; id < static_cast<NodeId>(n.graph.nodes.size()); ++id) {
    ExpectRuns(n.graph, Stage{Strategy::kParallel, {{id}}}, n.graph.node(id).name);
  }
}

TEST(StageProgramTest, ConcurrentGroupsOfSequencesGetOneLaneEach) {
  const TestNet n = BuildNet();
  const Stage stage{Strategy::kParallel, {{n.a, n.grouped}, {n.b, n.max, n.gavg}, {n.c}}};
  ExpectRuns(n.graph, stage, "concurrent");
  const Program program = StageProgram(MakeStageSpec(n.graph, stage));
  ASSERT_EQ(program.stages.size(), 1u);
  EXPECT_EQ(program.stages[0].lanes.size(), 3u);
}

TEST(StageProgramTest, SlicedAndSummedInputsAreGatheredOnTheLaneThatNeedsThem) {
  const TestNet n = BuildNet();
  const Program program =
      StageProgram(MakeStageSpec(n.graph, Stage{Strategy::kParallel, {{n.summed}}}));
  ASSERT_EQ(program.stages[0].lanes.size(), 1u);
  const auto& steps = program.stages[0].lanes[0].steps;
  ASSERT_EQ(steps.size(), 3u);  // gather term 0 (a sum), gather term 1, the conv
  EXPECT_EQ(steps[0].op.kind, OpKind::kIdentity);
  EXPECT_EQ(steps[0].inputs.size(), 2u);
  EXPECT_EQ(steps[1].op.kind, OpKind::kIdentity);
  EXPECT_EQ(steps[2].op.kind, OpKind::kConv);
  EXPECT_EQ(steps[1].output.offset, 2);
}

TEST(StageProgramTest, SequentialUnitIsExpandedIntoSteps) {
  const TestNet n = BuildNet();
  const Program program =
      StageProgram(MakeStageSpec(n.graph, Stage{Strategy::kParallel, {{n.seq}}}));
  const auto& steps = program.stages[0].lanes[0].steps;
  ASSERT_EQ(steps.size(), 5u);  // two gathers, relu, depthwise, pointwise
  EXPECT_EQ(steps[2].op.kind, OpKind::kActivation);
  EXPECT_EQ(steps[3].op.conv.groups, 5);
  EXPECT_EQ(program.weights.size(), 2u);
}

TEST(StageProgramTest, ConcatenationIsComputedExactly) {
  // The identity op writes each term straight to its channels.
  GraphBuilder g({3, 1, 2});
  const NodeId cat = g.Add("cat", IdentityOp(), {{g.S(0, 2, 3)}, {g.S(0, 0, 1), g.S(0, 1, 2)}});
  const Graph graph = g.Done();
  const Program program = StageProgram(MakeStageSpec(graph, Stage{Strategy::kParallel, {{cat}}}));
  const auto out = RunOnReference(program, {{1, 2, 10, 20, 100, 200}}, 1);
  EXPECT_EQ(out[0], (std::vector<float>{100, 200, 11, 22}));
}

TEST(StageProgramTest, MergeStageIsOneStackedConvolutionWithAViewPerMember) {
  const TestNet n = BuildNet();
  const Stage stage{Strategy::kMerge, {{n.m1}, {n.m3}, {n.m5}}};
  ExpectRuns(n.graph, stage, "merge");
  const Program program = StageProgram(MakeStageSpec(n.graph, stage));
  ASSERT_EQ(program.stages.size(), 1u);
  ASSERT_EQ(program.stages[0].lanes.size(), 1u);
  const auto& steps = program.stages[0].lanes[0].steps;
  ASSERT_EQ(steps.size(), 3u);  // two gathers of the concatenated input, one conv
  EXPECT_EQ(steps[2].op.conv.out_channels, 7);
  EXPECT_EQ(steps[2].op.conv.kernel, (Window{5, 5}));
  ASSERT_EQ(program.outputs.size(), 3u);
  int channels = 0;
  for (const View& v : program.outputs) {
    EXPECT_EQ(v.buffer, steps[2].output.buffer);
    EXPECT_EQ(v.offset, channels);
    channels += v.channels;
  }
  EXPECT_EQ(channels, 7);
}

TEST(StageProgramTest, SameSeedSameWeights) {
  const TestNet n = BuildNet();
  const StageSpec spec = MakeStageSpec(n.graph, Stage{Strategy::kParallel, {{n.a}, {n.b}}});
  EXPECT_EQ(StageProgram(spec, 3).weights, StageProgram(spec, 3).weights);
  EXPECT_NE(StageProgram(spec, 3).weights, StageProgram(spec, 4).weights);
}

}  // namespace
}  // namespace ios::exec
