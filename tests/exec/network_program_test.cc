// BuildNetworkProgram: a whole network under sequential, concurrent, merge
// and greedy schedules computes what a naive node-by-node evaluation does;
// concatenations become views where they can; the memory plan reuses
// storage; the zoo models' programs validate.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/stage.h"
#include "common/zoo.h"
#include "exec/program.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/ops.h"

namespace ios::exec {
namespace {

using ::ios::exec::testing::EvaluateNaively;
using ::ios::exec::testing::ExpectClose;
using ::ios::exec::testing::GraphBuilder;
using ::ios::exec::testing::Ramp;
using ::ios::exec::testing::RunOnReference;
using ::ios::testing::ConvOp;
using ::ios::testing::EltwiseOp;
using ::ios::testing::IdentityOp;
using ::ios::testing::PoolOp;
using ::testing::HasSubstr;

Stage Parallel(std::vector<std::vector<NodeId>> groups) {
  return {Strategy::kParallel, std::move(groups)};
}

std::vector<Stage> Sequential(const Graph& graph) {
  std::vector<Stage> stages;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    stages.push_back(Parallel({{id}}));
  }
  return stages;
}

//! Every operator whose producers have all run, in one stage, one group each.
std::vector<Stage> Greedy(const Graph& graph) {
  std::vector<bool> done(graph.nodes.size(), false);
  done[0] = true;
  std::vector<Stage> stages;
  size_t scheduled = 1;
  while (scheduled < graph.nodes.size()) {
    Stage stage;
    for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
      if (done[static_cast<size_t>(id)]) continue;
      bool ready = true;
      for (const Term& term : graph.node(id).inputs) {
        for (const Slice& s : term) ready = ready && done[static_cast<size_t>(s.producer)];
      }
      if (ready) stage.groups.push_back({id});
    }
    for (const auto& g : stage.groups) done[static_cast<size_t>(g[0])] = true;
    scheduled += stage.groups.size();
    stages.push_back(std::move(stage));
  }
  return stages;
}

// An inception-like net: three branches concatenated (twice read, so one
// concat buffer), two mergeable convolutions, eltwise, an identity with a
// summed slice, a sequential unit and a pool.
struct ProgramNet {
  Graph graph;
  NodeId a, b, c, d, e, f, h, i, j, k;
};

ProgramNet BuildProgramNet() {
  GraphBuilder g({4, 8, 8});
  ProgramNet n;
  n.a = g.Add("a", ConvOp(4, 1, 1, 0), {{g.S(0)}});
  n.b = g.Add("b", ConvOp(4, 3, 1, 1), {{g.S(0)}});
  n.c = g.Add("c", PoolOp(PoolType::kMax, 3, 1, 1), {{g.S(0)}});
  n.d = g.Add("d", ConvOp(4, 1, 1, 0, Activation::kTanh), {{g.S(n.c)}});
  n.e = g.Add("e", ConvOp(6, 3, 1, 1), {{g.S(n.a)}, {g.S(n.b)}, {g.S(n.d)}});
  OpParams f = ConvOp(6, 1, 1, 0);
  f.conv.bias = false;
  n.f = g.Add("f", f, {{g.S(n.a)}, {g.S(n.b)}, {g.S(n.d)}});
  n.h = g.Add("h", EltwiseOp(EltwiseType::kMul), {{g.S(n.e)}, {g.S(n.f)}});
  n.i = g.Add("i", IdentityOp(), {{g.S(n.h, 0, 3), g.S(n.e, 3, 6)}, {g.S(n.f)}});
  OpParams seq;
  seq.kind = OpKind::kSequential;
  OpParams relu;
  relu.kind = OpKind::kActivation;
  seq.chain = {relu, ConvOp(9, 3, 1, 1, Activation::kNone, 9), ConvOp(5, 1, 1, 0)};
  n.j = g.Add("j", seq, {{g.S(n.i)}});
  n.k = g.Add("k", PoolOp(PoolType::kAvg, 3, 2, 1), {{g.S(n.j)}, {g.S(n.h, 1, 2)}});
  n.graph = g.Done();
  return n;
}

void ExpectMatchesNaive(const Graph& graph, const std::vector<Stage>& stages,
                        const std::string& what) {
  SCOPED_TRACE(what);
  const WeightStore weights = WeightStore::Random(graph, 11);
  const NetworkProgram net = BuildNetworkProgram(graph, stages, weights);
  ASSERT_NO_THROW(Validate(net.program));
  for (const int batch : {1, 2}) {
    const std::vector<float> input =
        Ramp(testing::Elements(graph.nodes[0].output, batch), 0.05f, 0.1f);
    const auto expected = EvaluateNaively(graph, weights, input, batch);
    const auto actual = RunOnReference(net.program, {input}, batch);
    ASSERT_EQ(actual.size(), 1u);
    ExpectClose(actual[0], expected.back(), 1e-4, what + " batch " + std::to_string(batch));
  }
}

int CountSteps(const Program& p, OpKind kind) {
  int count = 0;
  for (const auto& stage : p.stages) {
    for (const auto& lane : stage.lanes) {
      for (const auto& step : lane.steps) count += step.op.kind == kind;
    }
  }
  return count;
}

TEST(NetworkProgramTest, SequentialScheduleMatchesNaiveEvaluation) {
  const ProgramNet n = BuildProgramNet();
  ExpectMatchesNaive(n.graph, Sequential(n.graph), "sequential");
}

TEST(NetworkProgramTest, ConcurrentScheduleMatchesNaiveEvaluation) {
  const ProgramNet n = BuildProgramNet();
  const std::vector<Stage> stages = {Parallel({{n.a}, {n.b}, {n.c, n.d}}), Parallel({{n.e}, {n.f}}),
                                     Parallel({{n.h, n.i, n.j}}), Parallel({{n.k}})};
  ExpectMatchesNaive(n.graph, stages, "concurrent");
  const NetworkProgram net = BuildNetworkProgram(n.graph, stages, WeightStore::Random(n.graph, 1));
  ASSERT_EQ(net.program.stages.size(), 4u);
  EXPECT_EQ(net.program.stages[0].lanes.size(), 3u);
}

TEST(NetworkProgramTest, MergeScheduleMatchesNaiveEvaluation) {
  const ProgramNet n = BuildProgramNet();
  const std::vector<Stage> stages = {Parallel({{n.a}, {n.b}, {n.c, n.d}}),
                                     Stage{Strategy::kMerge, {{n.e}, {n.f}}},
                                     Parallel({{n.h}}),
                                     Parallel({
                                         {n.i},
                                     }),
                                     Parallel({{n.j}}),
                                     Parallel({{n.k}})};
  ExpectMatchesNaive(n.graph, stages, "merge");
  const NetworkProgram net = BuildNetworkProgram(n.graph, stages, WeightStore::Random(n.graph, 1));
  const auto& merge_lanes = net.program.stages[1].lanes;
  ASSERT_EQ(merge_lanes.size(), 1u);
  ASSERT_EQ(merge_lanes[0].steps.size(), 1u);  // the concat is a view: no gather
  EXPECT_EQ(merge_lanes[0].steps[0].op.conv.out_channels, 12);
}

TEST(NetworkProgramTest, GreedyScheduleMatchesNaiveEvaluation) {
  const ProgramNet n = BuildProgramNet();
  ExpectMatchesNaive(n.graph, Greedy(n.graph), "greedy");
}

TEST(NetworkProgramTest, WholeProducerConcatenationIsOneBufferTheProducersWrite) {
  const ProgramNet n = BuildProgramNet();
  const NetworkProgram net =
      BuildNetworkProgram(n.graph, Sequential(n.graph), WeightStore::Random(n.graph, 1));
  EXPECT_EQ(net.memory.concat_views, 1);  // [a, b, d], read by e and f
  // e and f read all 12 channels of one buffer, a, b, d write into it.
  const Step& a = net.program.stages[static_cast<size_t>(n.a - 1)].lanes[0].steps[0];
  const Step& b = net.program.stages[static_cast<size_t>(n.b - 1)].lanes[0].steps[0];
  const Step& e = net.program.stages[static_cast<size_t>(n.e - 1)].lanes[0].steps[0];
  EXPECT_EQ(a.output, (View{e.inputs[0].buffer, 0, 4}));
  EXPECT_EQ(b.output, (View{e.inputs[0].buffer, 4, 4}));
  EXPECT_EQ(e.inputs[0], (View{e.inputs[0].buffer, 0, 12}));
  EXPECT_EQ(net.program.stages[static_cast<size_t>(n.e - 1)].lanes[0].steps.size(), 1u);
  // The only copies: i's summed term and its f term, j's... none; k's
  // concatenation of j with a slice of h.
  EXPECT_EQ(CountSteps(net.program, OpKind::kIdentity), 2 + 2);
}

TEST(NetworkProgramTest, NetworkInputAndProducersNeededTwiceAreNotViews) {
  GraphBuilder g({2, 4, 4});
  const NodeId a = g.Add("a", ConvOp(2, 1, 1, 0), {{g.S(0)}});
  const NodeId b = g.Add("b", ConvOp(2, 1, 1, 0), {{g.S(0)}});
  const NodeId c = g.Add("c", ConvOp(2, 1, 1, 0), {{g.S(0)}});
  const NodeId ab = g.Add("ab", ConvOp(2, 1, 1, 0), {{g.S(a)}, {g.S(b)}});
  const NodeId bc = g.Add("bc", ConvOp(2, 1, 1, 0), {{g.S(b)}, {g.S(c)}});
  const NodeId with_input = g.Add("with_input", ConvOp(2, 1, 1, 0), {{g.S(0)}, {g.S(ab)}});
  g.Add("out", EltwiseOp(EltwiseType::kAdd), {{g.S(bc)}, {g.S(with_input)}});
  const Graph graph = g.Done();
  const NetworkProgram net =
      BuildNetworkProgram(graph, Sequential(graph), WeightStore::Random(graph, 1));
  EXPECT_EQ(net.memory.concat_views, 1);  // [a, b] only: b cannot also sit beside c
  ExpectMatchesNaive(graph, Sequential(graph), "views");
  ExpectMatchesNaive(graph, Greedy(graph), "views greedy");
}

TEST(NetworkProgramTest, IdentityOfAViewIsAnAliasWithoutSteps) {
  GraphBuilder g({2, 4, 4});
  const NodeId a = g.Add("a", ConvOp(3, 1, 1, 0), {{g.S(0)}});
  const NodeId b = g.Add("b", ConvOp(3, 3, 1, 1), {{g.S(0)}});
  const NodeId cat = g.Add("cat", IdentityOp(), {{g.S(a)}, {g.S(b)}});
  const NodeId pass = g.Add("pass", IdentityOp(), {{g.S(cat, 1, 5)}});
  g.Add("out", ConvOp(2, 1, 1, 0), {{g.S(pass)}});
  const Graph graph = g.Done();
  const NetworkProgram net =
      BuildNetworkProgram(graph, Sequential(graph), WeightStore::Random(graph, 1));
  EXPECT_EQ(CountSteps(net.program, OpKind::kIdentity), 0);
  EXPECT_EQ(net.memory.concat_views, 1);
  (void)pass;
  ExpectMatchesNaive(graph, Sequential(graph), "aliases");
  ExpectMatchesNaive(graph, Greedy(graph), "aliases greedy");
}

TEST(NetworkProgramTest, BuffersAreReusedAfterTheirLastReader) {
  GraphBuilder g({8, 8, 8});
  NodeId last = 0;
  for (int i = 0; i < 8; ++i)
    last = g.Add("c" + std::to_string(i), ConvOp(8, 1, 1, 0), {{g.S(last)}});
  const Graph graph = g.Done();
  const NetworkProgram net =
      BuildNetworkProgram(graph, Sequential(graph), WeightStore::Random(graph, 1));
  const int64_t tensor = 4 * 8 * 8 * 8;
  EXPECT_EQ(net.memory.buffers, 9);
  // The input lives throughout; the chain ping-pongs between two slots.
  EXPECT_EQ(net.memory.slots, 3);
  EXPECT_EQ(net.memory.allocated_bytes, 3 * tensor);
  EXPECT_LT(net.memory.allocated_bytes, 9 * tensor);
  EXPECT_EQ(net.memory.peak_live_bytes, 3 * tensor);
  EXPECT_EQ(net.program.ActivationBytes(1), net.memory.allocated_bytes);
  ExpectMatchesNaive(graph, Sequential(graph), "chain");
}

TEST(NetworkProgramTest, RefusesSchedulesThatDoNotCoverTheGraphInOrder) {
  const ProgramNet n = BuildProgramNet();
  const WeightStore w = WeightStore::Random(n.graph, 1);
  std::vector<Stage> missing = Sequential(n.graph);
  missing.pop_back();
  EXPECT_THROW(BuildNetworkProgram(n.graph, missing, w), Error);
  std::vector<Stage> swapped = Sequential(n.graph);
  std::swap(swapped[0], swapped[4]);
  try {
    BuildNetworkProgram(n.graph, swapped, w);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'e' (stage 0) reads 'a'"), std::string::npos)
        << e.what();
  }
  std::vector<Stage> twice = Sequential(n.graph);
  twice.push_back(twice[0]);
  EXPECT_THROW(BuildNetworkProgram(n.graph, twice, w), Error);
  const std::vector<Stage> bad_merge = {Stage{Strategy::kMerge, {{n.a}, {n.b}, {n.c}}}};
  EXPECT_THROW(BuildNetworkProgram(n.graph, bad_merge, w), Error);
}

TEST(NetworkProgramTest, ZooModelsValidateUnderSequentialAndGreedySchedules) {
  for (const ZooEntry& entry : ZooModels()) {
    SCOPED_TRACE(entry.name);
    const Graph graph = BuildZooModel(entry.name);
    const WeightStore weights = WeightStore::Random(graph, 1);
    for (const auto& [name, stages] :
         {std::pair{"sequential", Sequential(graph)}, std::pair{"greedy", Greedy(graph)}}) {
      SCOPED_TRACE(name);
      const NetworkProgram net = BuildNetworkProgram(graph, stages, weights);
      EXPECT_NO_THROW(Validate(net.program));
      EXPECT_GT(net.memory.peak_live_bytes, 0);
      EXPECT_LE(net.memory.peak_live_bytes, net.memory.allocated_bytes);
    }
  }
}

// in -> a, in -> b; c = concat(a, b) (a concatenation view when both are
// local); d = conv(c). Ids: a 1, b 2, c 3, d 4.
Graph ConcatOfTwo() {
  GraphBuilder g({4, 6, 6});
  const NodeId a = g.Add("a", ConvOp(4, 1), {{g.S(0)}});
  const NodeId b = g.Add("b", ConvOp(4, 3, 1, 1), {{g.S(0)}});
  const NodeId c = g.Add("c", IdentityOp(), {{g.S(a)}, {g.S(b)}});
  g.Add("d", ConvOp(4, 1), {{g.S(c)}});
  return g.Done();
}

TEST(DeviceProgramTest, AReceivedTensorHasItsOwnBufferWrittenBeforeItsFirstReader) {
  const Graph graph = ConcatOfTwo();
  const WeightStore w = WeightStore::Random(graph, 1);
  // Here: a, then c and d; b comes from another device, c goes to one.
  const std::vector<Stage> stages = {Parallel({{1}}), Parallel({{3}}), Parallel({{4}})};
  const DeviceProgram device = BuildDeviceProgram(graph, stages, w, {{2}, {3}});
  EXPECT_NO_THROW(Validate(device.program));
  ASSERT_EQ(device.received.size(), 1u);
  EXPECT_EQ(device.received[0].node, 2);
  EXPECT_EQ(device.received[0].first_stage, 1);
  EXPECT_EQ(device.memory.concat_views, 0) << "b's producer is elsewhere: c gathers a copy";
  ASSERT_EQ(device.sent.size(), 1u);
  EXPECT_EQ(device.sent[0].node, 3);
  EXPECT_EQ(device.sent[0].stage, 1);
  ASSERT_TRUE(device.output.has_value());
  EXPECT_EQ(device.program.inputs, (std::vector<int>{device.input, device.received[0].buffer}));
  EXPECT_EQ(device.program.outputs, (std::vector<View>{device.sent[0].view, *device.output}));
  // Nothing shares storage with the sent tensor after its stage: it can be
  // read once the program has run on.
  const int sent_slot =
      device.program.buffers[static_cast<size_t>(device.sent[0].view.buffer)].slot;
  for (size_t b = 0; b < device.program.buffers.size(); ++b) {
    if (static_cast<int>(b) == device.sent[0].view.buffer) continue;
    EXPECT_NE(device.program.buffers[b].slot, sent_slot) << device.program.buffers[b].label;
  }
  // The same stages with b computed here serve c as a view.
  const DeviceProgram whole = BuildDeviceProgram(
      graph, {Parallel({{1}}), Parallel({{2}}), Parallel({{3}}), Parallel({{4}})}, w, {});
  EXPECT_EQ(whole.memory.concat_views, 1);
  EXPECT_TRUE(whole.received.empty());
}

TEST(DeviceProgramTest, RefusesWhatItCanNeitherComputeNorReceive) {
  const Graph graph = ConcatOfTwo();
  const WeightStore w = WeightStore::Random(graph, 1);
  const std::vector<Stage> stages = {Parallel({{1}}), Parallel({{3}})};
  const auto refusal = [&](const DeviceProgramIo& io) {
    try {
      BuildDeviceProgram(graph, stages, w, io);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("built");
  };
  EXPECT_THAT(refusal({}), HasSubstr("node 'c' reads 'b', which is neither computed here nor "
                                     "received"));
  EXPECT_THAT(refusal({{2, 1}, {}}), HasSubstr("node 'a' is received but also computed here"));
  EXPECT_THAT(refusal({{2}, {4}}), HasSubstr("sent operator #4 is not computed here"));
  EXPECT_THAT(refusal({{2, 4}, {}}), HasSubstr("node 'd' is received but no operator here reads"));
}

}  // namespace
}  // namespace ios::exec
