// Canonical stage keys, what keeps stages apart: every parameter, shape,
// grouping and strategy change changes the key; merge stages are checked
// when built; and a spec's description.
#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "common/stage.h"
#include "tests/common/stage_testing.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

using ::ios::testing::ConvOp;
using ::ios::testing::PoolOp;
using stage_testing::ConcatOp;
using stage_testing::KeyOf;
using stage_testing::Net;

// ----------------------------------------------------- what changes a key

// Base: a conv and a pool of one input, plus a second conv that could be
// merged with the first. A case changes one thing before building.
struct Base {
  Shape input{16, 16, 16};
  OpParams a = ConvOp(16, 3, 1, 1, Activation::kRelu);
  OpParams b = PoolOp(PoolType::kMax, 3, 1, 1);
  OpParams c = ConvOp(8, 1, 1, 0, Activation::kRelu);
  int a_channels = 16;  // a reads channels [0, a_channels) of the input
};

Graph BuildBase(const Base& base) {
  Graph g;
  Node in;
  in.name = "in";
  in.op.kind = OpKind::kInput;
  in.output = base.input;
  g.nodes.push_back(in);
  g.nodes.push_back({"a", "", base.a, {{{0, 0, base.a_channels}}}, {}});
  g.nodes.push_back({"b", "", base.b, {{{0, 0, base.input.c}}}, {}});
  g.nodes.push_back({"c", "", base.c, {{{0, 0, base.input.c}}}, {}});
  g.blocks.push_back({0, {1, 2}, 3, {}});
  InferShapes(g);
  return g;
}

struct ParamChange {
  std::string label;
  std::function<void(Base&)> change;
};
void PrintTo(const ParamChange& c, std::ostream* os) { *os << c.label; }

class ParamChangeTest : public ::testing::TestWithParam<ParamChange> {};

TEST_P(ParamChangeTest, ChangesTheKeyOfEveryStageThatContainsIt) {
  const Graph before = BuildBase(Base{});
  Base changed_base;
  GetParam().change(changed_base);
  const Graph after = BuildBase(changed_base);
  const std::vector<Stage> stages = {
      {Strategy::kParallel, {{1}, {2}}},
      {Strategy::kParallel, {{1}, {2}, {3}}},
  };
  for (const Stage& stage : stages) {
    const std::string key_before = KeyOf(before, stage);
    const std::string key_after = KeyOf(after, stage);
    EXPECT_NE(key_before, key_after) << GetParam().label << "\n" << key_before;
    StageKeyer keyer(after);
    EXPECT_EQ(keyer.Key(stage), key_after);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Params, ParamChangeTest,
    ::testing::Values(
        ParamChange{"kernel",
                    [](Base& b) {
                      b.a.conv.kernel = {5, 5};
                      b.a.conv.padding = {2, 2};
                    }},
        ParamChange{"kernel_width_only",
                    [](Base& b) {
                      b.a.conv.kernel = {3, 1};
                      b.a.conv.padding = {1, 0};
                    }},
        ParamChange{"stride",
                    [](Base& b) {
                      b.a.conv.stride = {2, 2};
                    }},
        ParamChange{"padding",
                    [](Base& b) {
                      b.a.conv.padding = {0, 0};
                    }},
        ParamChange{"dilation",
                    [](Base& b) {
                      b.a.conv.dilation = {2, 2};
                      b.a.conv.padding = {2, 2};
                    }},
        ParamChange{"groups", [](Base& b) { b.a.conv.groups = 4; }},
        ParamChange{"out_channels", [](Base& b) { b.a.conv.out_channels = 32; }},
        ParamChange{"conv_activation", [](Base& b) { b.a.conv.act = Activation::kNone; }},
        ParamChange{"conv_sigmoid", [](Base& b) { b.a.conv.act = Activation::kSigmoid; }},
        ParamChange{"bias", [](Base& b) { b.a.conv.bias = false; }},
        ParamChange{"pool_type", [](Base& b) { b.b.pool.type = PoolType::kAvg; }},
        ParamChange{"pool_kernel",
                    [](Base& b) {
                      b.b.pool.kernel = {5, 5};
                      b.b.pool.padding = {2, 2};
                    }},
        ParamChange{"pool_stride",
                    [](Base& b) {
                      b.b.pool.stride = {2, 2};
                    }},
        ParamChange{"pool_to_activation",
                    [](Base& b) {
                      b.b = OpParams{};
                      b.b.kind = OpKind::kActivation;
                      b.b.act = Activation::kRelu;
                    }},
        ParamChange{"input_resolution",
                    [](Base& b) {
                      b.input = {16, 20, 20};
                    }},
        ParamChange{"input_channels",
                    [](Base& b) {
                      b.input = {24, 16, 16};
                      b.a_channels = 24;
                    }},
        ParamChange{"input_slice", [](Base& b) { b.a_channels = 8; }}),
    [](const auto& param_info) { return param_info.param.label; });

TEST(StageKeyTest, ActivationOperatorTypeIsPartOfTheKey) {
  Net relu({8, 8, 8}), tanh({8, 8, 8});
  OpParams r;
  r.kind = OpKind::kActivation;
  r.act = Activation::kRelu;
  OpParams t = r;
  t.act = Activation::kTanh;
  relu.Add("x", r, "in");
  tanh.Add("x", t, "in");
  const Graph g1 = relu.Done(), g2 = tanh.Done();
  EXPECT_NE(KeyOf(g1, relu.Make(Strategy::kParallel, {{"x"}})),
            KeyOf(g2, tanh.Make(Strategy::kParallel, {{"x"}})));
}

struct StagePair {
  std::string label;
  Stage first, second;
};

// Same graph (BuildBase: a=1 conv, b=2 pool, c=3 conv), different stages.
TEST(StageKeyTest, GroupingAndStrategyArePartOfTheKey) {
  const Graph g = BuildBase(Base{});
  const std::vector<StagePair> pairs = {
      {"one group vs two groups",
       {Strategy::kParallel, {{1, 2}}},
       {Strategy::kParallel, {{1}, {2}}}},
      {"one group vs two groups (convs)",
       {Strategy::kParallel, {{1, 3}}},
       {Strategy::kParallel, {{1}, {3}}}},
      {"merge vs parallel", {Strategy::kMerge, {{1}, {3}}}, {Strategy::kParallel, {{1}, {3}}}},
      {"other operator set", {Strategy::kParallel, {{1}, {3}}}, {Strategy::kParallel, {{1}, {2}}}},
      {"subset", {Strategy::kParallel, {{1}, {2}, {3}}}, {Strategy::kParallel, {{1}, {2}}}},
  };
  for (const StagePair& p : pairs) {
    EXPECT_NE(KeyOf(g, p.first), KeyOf(g, p.second)) << p.label;
  }
}

TEST(StageKeyTest, OneOperatorStageHasTheSameKeyUnderMergeAndParallel) {
  const Graph g = BuildBase(Base{});
  StageKeyer keyer(g);
  for (NodeId id : {1, 2, 3}) {
    const Stage merge{Strategy::kMerge, {{id}}};
    const Stage parallel{Strategy::kParallel, {{id}}};
    const StageSpec spec = MakeStageSpec(g, merge);
    EXPECT_EQ(spec.strategy, Strategy::kParallel) << g.node(id).name;
    EXPECT_EQ(spec.Key(), KeyOf(g, parallel)) << g.node(id).name;
    EXPECT_EQ(keyer.Key(merge), spec.Key()) << g.node(id).name;
  }
}

// ------------------------------------------------------------------ merge

struct MergeCase {
  std::string label;
  std::vector<std::string> nodes;
  bool mergeable;
};
void PrintTo(const MergeCase& c, std::ostream* os) { *os << c.label; }

class MergeStageTest : public ::testing::TestWithParam<MergeCase> {
 protected:
  // Convolutions of `in`, a pool, a depthwise conv, and a conv of another
  // tensor of the same shape.
  static Net MergeNet() {
    Net net({16, 16, 16});
    net.Add("c1", ConvOp(16, 1), "in");
    net.Add("c3", ConvOp(32, 3, 1, 1), "in");
    net.Add("c5", ConvOp(8, 5, 1, 2), "in");
    net.Add("c3_s2", ConvOp(16, 3, 2, 1), "in");
    net.Add("c3_linear", ConvOp(16, 3, 1, 1, Activation::kNone), "in");
    OpParams dw = ConvOp(16, 3, 1, 1);
    dw.conv.groups = 16;
    net.Add("dw", dw, "in");
    net.Add("dw2", dw, "in");
    net.Add("pool", PoolOp(PoolType::kMax, 3, 1, 1), "in");
    net.Add("other", ConvOp(16, 3, 1, 1), "c1");
    net.Add("out", ConcatOp(),
            {{"c1"}, {"c3"}, {"c5"}, {"c3_linear"}, {"dw"}, {"dw2"}, {"pool"}, {"other"}});
    return net;
  }
};

TEST_P(MergeStageTest, MakeStageSpecAcceptsOnlyMergeableMergeStages) {
  const MergeCase& c = GetParam();
  Net net = MergeNet();
  const Graph g = net.Done();
  std::vector<std::vector<std::string>> groups;
  for (const auto& n : c.nodes) groups.push_back({n});
  const Stage stage = net.Make(Strategy::kMerge, groups);
  if (c.mergeable) {
    const StageSpec spec = MakeStageSpec(g, stage);
    EXPECT_EQ(spec.strategy, c.nodes.size() > 1 ? Strategy::kMerge : Strategy::kParallel);
    EXPECT_EQ(spec.OperatorCount(), static_cast<int>(c.nodes.size()));
  } else {
    EXPECT_THROW(MakeStageSpec(g, stage), Error) << c.label;
    // The same operators may always run as a parallel stage.
    const Stage parallel = net.Make(Strategy::kParallel, groups);
    EXPECT_NO_THROW(MakeStageSpec(g, parallel)) << c.label;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MergeStageTest,
    ::testing::Values(MergeCase{"convs_of_one_input", {"c1", "c3", "c5"}, true},
                      MergeCase{"single_pool", {"pool"}, true},
                      MergeCase{"conv_and_pool", {"c3", "pool"}, false},
                      MergeCase{"different_strides", {"c3", "c3_s2"}, false},
                      MergeCase{"different_activations", {"c3", "c3_linear"}, false},
                      MergeCase{"depthwise", {"dw", "dw2"}, false},
                      MergeCase{"different_inputs", {"c3", "other"}, false}),
    [](const auto& param_info) { return param_info.param.label; });

// --------------------------------------------------------------- Describe

TEST(StageSpecTest, DescribeIsReadableAndNamesTheStrategy) {
  const Graph g = BuildBase(Base{});
  const StageSpec parallel = MakeStageSpec(g, {Strategy::kParallel, {{1}, {2}}});
  const StageSpec merge = MakeStageSpec(g, {Strategy::kMerge, {{1}, {3}}});
  EXPECT_FALSE(parallel.Describe().empty());
  EXPECT_NE(parallel.Describe().find("parallel"), std::string::npos) << parallel.Describe();
  EXPECT_NE(merge.Describe().find("merge"), std::string::npos) << merge.Describe();
  EXPECT_NE(parallel.Describe(), merge.Describe());
  EXPECT_EQ(parallel.externals.size(), 1u);
  EXPECT_EQ(parallel.externals[0], (Shape{16, 16, 16}));
}

}  // namespace
}  // namespace ios
