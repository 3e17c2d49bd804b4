// The cpu device against the naive reference device: every op kind
// (padding, stride, dilation, groups and depthwise edge cases, batch 1 and
// 2, views at channel offsets), stage programs with concurrent lanes and
// merged convolutions, and channel shuffles, layer norms, leaky relus and
// hard sigmoids on concatenation views.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/activation.h"
#include "common/op_kinds.h"
#include "common/stage.h"
#include "devices/cpu/cpu_device.h"
#include "exec/program.h"
#include "exec/weights.h"
#include "tests/common/registered_ops_testing.h"
#include "tests/devices/cpu_device_testing.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/ops.h"

namespace ios::devices {
namespace {

using cpu_testing::CpuDeviceTest;
using cpu_testing::ExpectSameAsReference;
using cpu_testing::OneOp;
using ::ios::testing::PoolOp;

OpParams ConvWith(Shape /*in*/, int out, Window kernel, Window pad, Window stride, Window dilation,
                  int groups, Activation act, bool bias = true) {
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv.out_channels = out;
  op.conv.kernel = kernel;
  op.conv.padding = pad;
  op.conv.stride = stride;
  op.conv.dilation = dilation;
  op.conv.groups = groups;
  op.conv.act = act;
  op.conv.bias = bias;
  return op;
}

struct OpCase {
  std::string name;
  OpParams op;
  std::vector<Shape> inputs;
};

OpParams CeilMax(int kernel, int stride, int pad) {
  OpParams op = PoolOp(PoolType::kMax, kernel, stride, pad);
  op.pool.ceil = true;
  return op;
}

OpParams WithEndExtra(OpParams op, Window extra) {
  op.conv.padding_end_extra = extra;
  return op;
}

OpParams ExcludingPadding(OpParams op) {
  op.pool.exclude_padding = true;
  return op;
}

std::vector<OpCase> EveryOpKind() {
  using A = Activation;
  std::vector<OpCase> cases = {
      {"conv3x3_pad1_relu",
       ConvWith({}, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, A::kRelu),
       {{3, 7, 7}}},
      {"conv3x3_stride2_nopad_nobias",
       ConvWith({}, 5, {3, 3}, {0, 0}, {2, 2}, {1, 1}, 1, A::kNone, false),
       {{3, 8, 7}}},
      {"conv_dilated2_sigmoid",
       ConvWith({}, 4, {3, 3}, {2, 2}, {1, 1}, {2, 2}, 1, A::kSigmoid),
       {{4, 9, 9}}},
      {"conv_dilation_2x3",
       ConvWith({}, 2, {3, 3}, {1, 2}, {1, 1}, {2, 3}, 1, A::kNone),
       {{2, 7, 8}}},
      {"grouped2_tanh", ConvWith({}, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, A::kTanh), {{4, 6, 6}}},
      {"depthwise_stride2",
       ConvWith({}, 6, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 6, A::kRelu),
       {{6, 7, 7}}},
      {"depthwise_multiplier2",
       ConvWith({}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, A::kNone),
       {{4, 6, 6}}},
      {"asymmetric_1x3", ConvWith({}, 3, {1, 3}, {0, 1}, {1, 1}, {1, 1}, 1, A::kRelu), {{3, 6, 5}}},
      {"asymmetric_7x1_stride_2x1",
       ConvWith({}, 3, {7, 1}, {3, 0}, {2, 1}, {1, 1}, 1, A::kNone),
       {{3, 9, 5}}},
      {"stride_beyond_kernel",
       ConvWith({}, 2, {1, 1}, {0, 0}, {3, 3}, {1, 1}, 1, A::kNone),
       {{2, 7, 7}}},
      {"padding_beyond_half_kernel",
       ConvWith({}, 2, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, A::kNone),
       {{3, 4, 4}}},
      {"conv5x5_pad2_stride3",
       ConvWith({}, 3, {5, 5}, {2, 2}, {3, 3}, {1, 1}, 1, A::kRelu),
       {{2, 8, 8}}},
      // TensorFlow's SAME padding at stride 2 (BlazeFace): ONNX pads
      // [0,0,1,1] on a depthwise 3x3, [1,1,2,2] on a 5x5, and one axis only.
      {"depthwise_stride2_pads_0011",
       WithEndExtra(ConvWith({}, 6, {3, 3}, {0, 0}, {2, 2}, {1, 1}, 6, A::kRelu), {1, 1}),
       {{6, 8, 8}}},
      {"conv5x5_stride2_pads_1122",
       WithEndExtra(ConvWith({}, 4, {5, 5}, {1, 1}, {2, 2}, {1, 1}, 1, A::kNone), {1, 1}),
       {{3, 7, 7}}},
      {"conv3x3_stride2_extra_bottom_only",
       WithEndExtra(ConvWith({}, 3, {3, 3}, {1, 0}, {2, 2}, {1, 1}, 1, A::kNone), {2, 0}),
       {{2, 6, 5}}},
      {"max_3x3_s2_p1", PoolOp(PoolType::kMax, 3, 2, 1), {{3, 7, 7}}},
      {"max_2x2_s2_odd_input", PoolOp(PoolType::kMax, 2, 2, 0), {{3, 7, 7}}},
      {"avg_3x3_s1_p1", PoolOp(PoolType::kAvg, 3, 1, 1), {{3, 5, 6}}},
      {"avg_3x3_s2_p1", PoolOp(PoolType::kAvg, 3, 2, 1), {{2, 8, 8}}},
      {"avg_2x2_s2_odd_input", PoolOp(PoolType::kAvg, 2, 2, 0), {{2, 5, 5}}},
      {"global_max", PoolOp(PoolType::kGlobalMax, 1, 1, 0), {{3, 5, 3}}},
      {"avg_3x3_s2_p1_excluding_padding",
       ExcludingPadding(PoolOp(PoolType::kAvg, 3, 2, 1)),
       {{2, 7, 8}}},
      {"avg_2x3_s1_p1x1_excluding_padding",
       ExcludingPadding(PoolOp(PoolType::kAvg, 3, 1, 1)),
       {{3, 4, 5}}},
      {"max_3x3_s2_ceil", CeilMax(3, 2, 0), {{3, 8, 8}}},     // 3x3 -> 4x4
      {"max_3x3_s2_p1_ceil", CeilMax(3, 2, 1), {{2, 6, 7}}},  // windows past the padding
      {"global_avg", PoolOp(PoolType::kGlobalAvg, 1, 1, 0), {{3, 5, 3}}},
      {"add_of_two", ::ios::testing::EltwiseOp(EltwiseType::kAdd), {{3, 4, 4}, {3, 4, 4}}},
      {"add_of_three",
       ::ios::testing::EltwiseOp(EltwiseType::kAdd),
       {{2, 3, 5}, {2, 3, 5}, {2, 3, 5}}},
      {"mul_of_two", ::ios::testing::EltwiseOp(EltwiseType::kMul), {{3, 4, 4}, {3, 4, 4}}},
      {"mul_broadcast_first", ::ios::testing::EltwiseOp(EltwiseType::kMul), {{3, 1, 1}, {3, 4, 5}}},
      {"add_broadcast_second",
       ::ios::testing::EltwiseOp(EltwiseType::kAdd),
       {{3, 4, 5}, {3, 1, 1}, {3, 4, 5}}},
      {"identity_copy", ::ios::testing::IdentityOp(), {{3, 4, 4}}},
      {"identity_sum_of_three", ::ios::testing::IdentityOp(), {{2, 4, 3}, {2, 4, 3}, {2, 4, 3}}},
  };
  // Every activation, on its own and as a convolution's post-op.
  for (const ActivationKind& kind : ActivationKinds()) {
    const A act = kind.id;
    if (act == A::kNone) continue;
    cases.push_back({std::string("conv_") + ToString(act),
                     ConvWith({}, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, act),
                     {{3, 5, 5}}});
    OpParams op;
    op.kind = OpKind::kActivation;
    op.act = act;
    cases.push_back({std::string("activation_") + ToString(act), op, {{3, 4, 5}}});
  }
  // Every kind of common/op_kinds.h at its defaults (channel_shuffle: 2
  // groups, so an even channel count), and softmax's logarithm. Swin's
  // kinds cut the map into squares (7x7 windows, 2x2 blocks) that must
  // divide it: maps of their own.
  for (const OpKindSpec& spec : RegisteredKinds()) {
    Shape input{6, 3, 4};
    if (spec.kind == RegisteredKind::kWindowAttention) input = {6, 7, 14};
    if (spec.kind == RegisteredKind::kSpaceToDepth) input = {6, 4, 6};
    cases.push_back({std::string(spec.name), MakeRegisteredOp(spec.kind), {input}});
  }
  OpParams log_softmax = MakeRegisteredOp(RegisteredKind::kSoftmax);
  log_softmax.registered.attributes = {1};
  cases.push_back({"logsoftmax", log_softmax, {{7, 2, 2}}});
  cases.push_back(
      {"softmax_of_classes", MakeRegisteredOp(RegisteredKind::kSoftmax), {{1000, 1, 1}}});
  OpParams flatten_nhwc = MakeRegisteredOp(RegisteredKind::kFlatten);
  flatten_nhwc.registered.attributes = {1};
  cases.push_back({"flatten_channels_last", flatten_nhwc, {{5, 3, 4}}});
  return cases;
}

TEST_F(CpuDeviceTest, EveryOpKindMatchesTheReferenceWithAndWithoutChannelOffsets) {
  for (const OpCase& c : EveryOpKind()) {
    for (const bool offsets : {false, true}) {
      const exec::Program program = OneOp(c.op, c.inputs, offsets);
      for (const int batch : {1, 2}) {
        ExpectSameAsReference(*device_, program, batch,
                              c.name + (offsets ? " at channel offsets" : ""));
      }
    }
  }
}

// ---- channel_shuffle: a permutation, so exactly the reference's values ------

OpParams ShuffleOp(int groups) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kChannelShuffle);
  op.registered.attributes = {groups};
  return op;
}

TEST_F(CpuDeviceTest, ChannelShuffleEqualsTheReferenceExactlyForShuffleNetsGroupings) {
  struct Case {
    int channels, groups;
  };
  // ShuffleNet V2's 2 groups of 29 (its 116-channel stage split in two),
  // and both edges: one group (a copy) and one channel per group.
  for (const Case c : {Case{6, 3}, Case{6, 2}, Case{58, 2}, Case{6, 1}, Case{6, 6}}) {
    for (const bool offsets : {false, true}) {
      const exec::Program program = OneOp(ShuffleOp(c.groups), {{c.channels, 4, 3}}, offsets);
      for (const int batch : {1, 3}) {
        ExpectSameAsReference(*device_, program, batch,
                              "channel_shuffle of " + std::to_string(c.channels) + " in " +
                                  std::to_string(c.groups) + " groups" +
                                  (offsets ? " at channel offsets" : ""),
                              {0.0});
      }
    }
  }
}

//! Half a ShuffleNet V2 unit, every value exact (max pooling, relu,
//! concatenations, shuffles): shuffles that read channel slices of a
//! concatenation and write into the concatenation the last node reads,
//! beside a convolution that can run in parallel with them.
struct ShuffleNet {
  Graph graph;
  NodeId left, right, cat, shuffle_a, shuffle_b, side, out;
};

ShuffleNet BuildShuffleNet() {
  using ::ios::testing::ActOp;
  using ::ios::testing::IdentityOp;
  exec::testing::GraphBuilder g({8, 5, 5});
  ShuffleNet n;
  n.left = g.Add("left", PoolOp(PoolType::kMax, 3, 1, 1), {{g.S(0, 0, 6)}});
  n.right = g.Add("right", ActOp(Activation::kRelu), {{g.S(0, 2, 8)}});
  n.cat = g.Add("cat", IdentityOp(), {{g.S(n.left)}, {g.S(n.right)}});
  n.shuffle_a = g.Add("shuffle_a", ShuffleOp(3), {{g.S(n.cat, 3, 9)}});
  n.shuffle_b = g.Add("shuffle_b", ShuffleOp(2), {{g.S(n.right)}});
  n.side = g.Add("side", ::ios::testing::ConvOp(4, 3, 1, 1), {{g.S(0)}});
  n.out = g.Add("out", IdentityOp(), {{g.S(n.shuffle_a)}, {g.S(n.shuffle_b)}});
  n.graph = g.Done();
  return n;
}

//! Whether `view` is its whole buffer rather than a channel view of it.
bool CoversItsBuffer(const exec::Program& program, const exec::View& view) {
  return view.offset == 0 && view.channels == program.buffers.at(view.buffer).shape.c;
}

//! How many registered-kind steps read, and how many write, a channel view
//! of a buffer: the views a test of strided access is about (without them
//! it would test dense copies).
struct RegisteredViews {
  int inputs = 0, outputs = 0;
};
RegisteredViews CountRegisteredViews(const exec::Program& program) {
  RegisteredViews views;
  for (const exec::ProgramStage& stage : program.stages) {
    for (const exec::Lane& lane : stage.lanes) {
      for (const exec::Step& step : lane.steps) {
        if (step.op.kind != OpKind::kRegistered) continue;
        views.inputs += !CoversItsBuffer(program, step.inputs.at(0));
        views.outputs += !CoversItsBuffer(program, step.output);
      }
    }
  }
  return views;
}

TEST_F(CpuDeviceTest, ChannelShuffleReadsAndWritesConcatenationViewsInANetworkProgram) {
  const ShuffleNet n = BuildShuffleNet();
  auto parallel = [](std::vector<std::vector<NodeId>> groups) {
    return Stage{Strategy::kParallel, std::move(groups)};
  };
  const std::vector<Stage> sequential = {parallel({{n.left}}),      parallel({{n.right}}),
                                         parallel({{n.cat}}),       parallel({{n.shuffle_a}}),
                                         parallel({{n.shuffle_b}}), parallel({{n.side}}),
                                         parallel({{n.out}})};
  const std::vector<Stage> concurrent = {parallel({{n.left}, {n.right}}), parallel({{n.cat}}),
                                         parallel({{n.shuffle_a}, {n.side}, {n.shuffle_b}}),
                                         parallel({{n.out}})};
  for (const auto& [name, stages] :
       {std::pair{"sequential", sequential}, std::pair{"concurrent", concurrent}}) {
    const exec::Program program =
        exec::BuildNetworkProgram(n.graph, stages, exec::WeightStore::Random(n.graph, 7)).program;
    const RegisteredViews views = CountRegisteredViews(program);
    EXPECT_EQ(views.inputs, 2) << name;
    EXPECT_EQ(views.outputs, 2) << name;
    for (const int batch : {1, 3}) ExpectSameAsReference(*device_, program, batch, name, {0.0});
  }
}

TEST_F(CpuDeviceTest, ChannelShufflesBesideAConvolutionInOneStageMatchTheReference) {
  const ShuffleNet n = BuildShuffleNet();
  const exec::Program program = exec::StageProgram(
      MakeStageSpec(n.graph, {Strategy::kParallel, {{n.shuffle_a}, {n.side}, {n.shuffle_b}}}), 3);
  ASSERT_EQ(program.stages.at(0).lanes.size(), 3u);
  // The shuffles' outputs exactly; the convolution's within oneDNN's rounding.
  std::vector<double> relative;
  for (const exec::View& output : program.outputs) {
    for (const exec::Lane& lane : program.stages[0].lanes) {
      for (const exec::Step& step : lane.steps) {
        if (step.output == output) relative.push_back(step.op.kind == OpKind::kConv ? 1e-4 : 0.0);
      }
    }
  }
  ASSERT_EQ(relative, (std::vector<double>{0.0, 0.0, 1e-4}));  // outputs in node order
  for (const int batch : {1, 3}) {
    ExpectSameAsReference(*device_, program, batch, "shuffle | conv | shuffle", relative);
  }
}

// ---- layernorm: oneDNN's layer norm over {N*H*W, C} rows ----------------------

OpParams LayerNormOp(float eps) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kLayerNorm);
  SetFloatAttribute(op.registered, "eps", eps, "test");
  return op;
}

TEST_F(CpuDeviceTest, LayerNormMatchesTheReferenceForWideAndOddChannelCounts) {
  // ConvNeXt-T's 96 channels, and 7: no vector width divides it.
  for (const int channels : {96, 7}) {
    for (const bool offsets : {false, true}) {
      const exec::Program program = OneOp(LayerNormOp(1e-6f), {{channels, 5, 4}}, offsets);
      for (const int batch : {1, 3}) {
        ExpectSameAsReference(*device_, program, batch,
                              "layernorm of " + std::to_string(channels) + " channels" +
                                  (offsets ? " at channel offsets" : ""),
                              {1e-5});
      }
    }
  }
}

//! `op` on channels 1 .. channels of a concatenation (one of a pool's and
//! all but the last of a relu's), written into the first channels of a
//! concatenation: a strided view on both sides of its step.
exec::Program ConcatViewProgram(const OpParams& op, int channels) {
  using ::ios::testing::ActOp;
  using ::ios::testing::IdentityOp;
  exec::testing::GraphBuilder g({channels + 2, 5, 4});
  const NodeId left = g.Add("left", ActOp(Activation::kRelu), {{g.S(0, 0, channels)}});
  const NodeId right = g.Add("right", PoolOp(PoolType::kMax, 3, 1, 1), {{g.S(0, 0, 2)}});
  const NodeId cat = g.Add("cat", IdentityOp(), {{g.S(right)}, {g.S(left)}});
  const NodeId norm = g.Add("op", op, {{g.S(cat, 1, 1 + channels)}});
  const NodeId side = g.Add("side", ActOp(Activation::kRelu), {{g.S(0, channels, channels + 2)}});
  g.Add("out", IdentityOp(), {{g.S(norm)}, {g.S(side)}});
  const Graph graph = g.Done();
  std::vector<Stage> stages;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    stages.push_back(Stage{Strategy::kParallel, {{id}}});
  }
  exec::Program program =
      exec::BuildNetworkProgram(graph, stages, exec::WeightStore::Random(graph, 7)).program;
  const RegisteredViews views = CountRegisteredViews(program);
  // The views these tests are about: without them they would test dense rows.
  EXPECT_EQ(views.inputs, 1) << channels;
  EXPECT_EQ(views.outputs, 1) << channels;
  return program;
}

TEST_F(CpuDeviceTest, LayerNormReadsAndWritesChannelViewsOfConcatenations) {
  for (const int channels : {96, 7}) {
    const exec::Program program = ConcatViewProgram(LayerNormOp(1e-5f), channels);
    for (const int batch : {1, 3}) {
      ExpectSameAsReference(*device_, program, batch,
                            "layernorm of a concatenation view, " + std::to_string(channels),
                            {1e-5});
    }
  }
}

// ---- leaky_relu, hard_sigmoid: oneDNN eltwise steps at the op's coefficients ----

// The inputs run from -1.43 to 1.43: every slope meets negative values,
// and the steeper lines reach both ends of the clip (1.5 x + 0.5 spans
// -1.6 to 2.6) or one of them (-0.75 x + 0.25); ONNX's 0.2 x + 0.5 stays
// inside.
std::vector<OpParams> CoefficientActivations() {
  return {LeakyReluOp(0.01f),        LeakyReluOp(0.2f),         LeakyReluOp(-0.5f),
          HardSigmoidOp(0.2f, 0.5f), HardSigmoidOp(1.5f, 0.5f), HardSigmoidOp(-0.75f, 0.25f)};
}

TEST_F(CpuDeviceTest, LeakyReluAndHardSigmoidMatchTheReferenceOnChannelViews) {
  for (const OpParams& op : CoefficientActivations()) {
    for (const int channels : {16, 7}) {
      for (const bool offsets : {false, true}) {
        const exec::Program program = OneOp(op, {{channels, 5, 4}}, offsets);
        for (const int batch : {1, 3}) {
          ExpectSameAsReference(*device_, program, batch,
                                RegisteredKeyText(op.registered) + " of " +
                                    std::to_string(channels) + " channels" +
                                    (offsets ? " at channel offsets" : ""),
                                {1e-6});
        }
      }
    }
    const exec::Program program = ConcatViewProgram(op, 7);
    ExpectSameAsReference(*device_, program, 3,
                          RegisteredKeyText(op.registered) + " of a concatenation view", {1e-6});
  }
}

//! A graph for stage programs: two branches, slices, sums, a sequential
//! unit and three mergeable convolutions of one input.
struct StageNet {
  Graph graph;
  NodeId a, b, pool, chain, summed, seq, m1, m3, m5;
};

StageNet BuildStageNet() {
  using ::ios::testing::ConvOp;
  exec::testing::GraphBuilder g({6, 7, 7});
  StageNet n;
  n.a = g.Add("a", ConvOp(4, 3, 1, 1), {{g.S(0)}});
  n.b = g.Add("b", ConvOp(4, 3, 2, 1, Activation::kTanh, 2), {{g.S(0)}});
  n.pool = g.Add("pool", PoolOp(PoolType::kAvg, 3, 1, 1), {{g.S(0)}});
  n.chain = g.Add("chain", ConvOp(5, 1, 1, 0), {{g.S(n.a)}});
  n.summed = g.Add("summed", ConvOp(3, 3, 1, 1), {{g.S(0, 0, 2), g.S(0, 3, 5)}, {g.S(n.a, 1, 3)}});
  OpParams seq;
  seq.kind = OpKind::kSequential;
  OpParams relu;
  relu.kind = OpKind::kActivation;
  seq.chain = {relu, ConvOp(6, 3, 1, 1, Activation::kNone, 6), ConvOp(4, 1, 1, 0)};
  n.seq = g.Add("seq", seq, {{g.S(0)}});
  n.m1 = g.Add("m1", ConvOp(2, 1, 1, 0), {{g.S(n.pool)}, {g.S(n.a)}});
  n.m3 = g.Add("m3", ConvOp(3, 3, 1, 1), {{g.S(n.pool)}, {g.S(n.a)}});
  OpParams m5 = ConvOp(2, 5, 1, 2);
  m5.conv.bias = false;
  n.m5 = g.Add("m5", m5, {{g.S(n.pool)}, {g.S(n.a)}});
  n.graph = g.Done();
  return n;
}

TEST_F(CpuDeviceTest, StageProgramsWithConcurrentLanesMatchTheReference) {
  const StageNet n = BuildStageNet();
  const std::vector<Stage> stages = {
      {Strategy::kParallel, {{n.a, n.chain}}},
      {Strategy::kParallel, {{n.a}, {n.b}}},
      {Strategy::kParallel, {{n.a, n.chain}, {n.pool}, {n.seq}, {n.b}}},
      {Strategy::kParallel, {{n.summed}, {n.seq}}},
      {Strategy::kMerge, {{n.m1}, {n.m3}, {n.m5}}},
  };
  for (size_t i = 0; i < stages.size(); ++i) {
    const exec::Program program = exec::StageProgram(MakeStageSpec(n.graph, stages[i]), 3);
    for (const int batch : {1, 2}) {
      ExpectSameAsReference(*device_, program, batch, "stage " + std::to_string(i));
    }
  }
}

TEST_F(CpuDeviceTest, MergedConvolutionEqualsItsMembers) {
  const StageNet n = BuildStageNet();
  const StageSpec merged = MakeStageSpec(n.graph, {Strategy::kMerge, {{n.m1}, {n.m3}, {n.m5}}});
  StageSpec members = merged;  // the same ops, one lane each: the same seeded weights
  members.strategy = Strategy::kParallel;
  const exec::Program stacked = exec::StageProgram(merged, 5);
  const exec::Program separate = exec::StageProgram(members, 5);
  ASSERT_EQ(stacked.outputs.size(), 3u);
  ASSERT_EQ(separate.outputs.size(), 3u);
  for (const int batch : {1, 2}) {
    auto one = device_->Prepare(stacked, batch);
    auto each = device_->Prepare(separate, batch);
    for (size_t i = 0; i < stacked.inputs.size(); ++i) {
      const Shape& s = stacked.buffers[stacked.inputs[i]].shape;
      const std::vector<float> values = exec::testing::Ramp(exec::testing::Elements(s, batch));
      one->Write(stacked.inputs[i], values);
      each->Write(separate.inputs[i], values);
    }
    one->TimedRuns(1);
    each->TimedRuns(1);
    for (size_t m = 0; m < 3; ++m) {
      exec::testing::ExpectClose(one->Read(stacked.outputs[m]), each->Read(separate.outputs[m]),
                                 1e-4, "member " + std::to_string(m));
    }
  }
}

// BlazeFace's 5x5/2 and 3x3/2 with one more zero row and column at the
// end: equal extras merge (common/stage.h), and the merged convolution
// keeps them.
TEST_F(CpuDeviceTest, AMergeOfConvolutionsWithEqualExtraEndPaddingMatchesTheReference) {
  using ::ios::testing::ConvOp;
  exec::testing::GraphBuilder g({6, 8, 8});
  OpParams five = ConvOp(3, 5, 2, 1), three = ConvOp(4, 3, 2, 0);
  five.conv.padding_end_extra = three.conv.padding_end_extra = {1, 1};
  const NodeId a = g.Add("five", five, {{g.S(0)}});
  const NodeId b = g.Add("three", three, {{g.S(0)}});
  const Graph graph = g.Done();
  const StageSpec spec = MakeStageSpec(graph, {Strategy::kMerge, {{a}, {b}}});
  ASSERT_EQ(spec.groups[1][0].output, (Shape{4, 4, 4}));
  const exec::Program program = exec::StageProgram(spec, 7);
  for (const int batch : {1, 2}) {
    ExpectSameAsReference(*device_, program, batch, "merged with extra end padding");
  }
}

}  // namespace
}  // namespace ios::devices
