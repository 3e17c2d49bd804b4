// Canonical stage keys: what makes two stages the same DB entry, and what
// keeps them apart.
#include "common/stage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "common/zoo.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

// ---------------------------------------------------------------- builders

using ::ios::testing::ConvOp;
using ::ios::testing::PoolOp;

OpParams AddOp() { return ::ios::testing::EltwiseOp(EltwiseType::kAdd); }
OpParams ConcatOp() { return ::ios::testing::IdentityOp(); }

// Builds a graph node by node; every input is a whole producer tensor.
// Names get `prefix` so the same structure can be built under other names.
class Net {
 public:
  explicit Net(Shape input, std::string prefix = "") : prefix_(std::move(prefix)) {
    Node in;
    in.name = prefix_ + "in";
    in.op.kind = OpKind::kInput;
    in.output = input;
    graph_.nodes.push_back(in);
  }

  //! `name` = op over `terms` (producers by unprefixed name; one term each
  //! unless given as a list).
  NodeId Add(const std::string& name, const OpParams& op,
             const std::vector<std::vector<std::string>>& terms) {
    Node node;
    node.name = prefix_ + name;
    node.hint = "hint-" + prefix_ + name;
    node.op = op;
    std::vector<Shape> term_shapes;
    for (const auto& term : terms) {
      Term t;
      for (const std::string& producer : term) {
        const NodeId id = Id(producer);
        t.push_back({id, 0, graph_.node(id).output.c});
      }
      term_shapes.push_back(graph_.node(t[0].producer).output);
      node.inputs.push_back(std::move(t));
    }
    node.output = InferOpOutput(op, term_shapes, node.name);
    graph_.nodes.push_back(std::move(node));
    return static_cast<NodeId>(graph_.nodes.size()) - 1;
  }
  NodeId Add(const std::string& name, const OpParams& op, const std::string& producer) {
    return Add(name, op, std::vector<std::vector<std::string>>{{producer}});
  }

  NodeId Id(const std::string& name) const {
    const auto id = graph_.Find(prefix_ + name);
    if (!id) throw Error("test graph has no node " + prefix_ + name);
    return *id;
  }

  //! Closes the graph into blocks ending at `exits` (default: one block
  //! ending at the last node) and checks it with InferShapes. Later calls
  //! return the same graph.
  Graph Done(std::vector<std::string> exits = {}) {
    if (!graph_.blocks.empty()) return graph_;
    std::vector<NodeId> exit_ids;
    for (const auto& e : exits) exit_ids.push_back(Id(e));
    if (exit_ids.empty()) exit_ids.push_back(static_cast<NodeId>(graph_.nodes.size()) - 1);
    NodeId enter = 0;
    for (NodeId exit : exit_ids) {
      Block block;
      block.enter = enter;
      for (NodeId id = enter + 1; id < exit; ++id) block.inner.push_back(id);
      block.exit = exit;
      graph_.blocks.push_back(block);
      enter = exit;
    }
    InferShapes(graph_);
    return graph_;
  }

  //! A stage over unprefixed names.
  Stage Make(Strategy strategy, const std::vector<std::vector<std::string>>& groups) const {
    Stage stage{strategy, {}};
    for (const auto& g : groups) {
      std::vector<NodeId> ids;
      for (const auto& n : g) ids.push_back(Id(n));
      stage.groups.push_back(std::move(ids));
    }
    return stage;
  }

 private:
  std::string prefix_;
  Graph graph_;
};

std::string KeyOf(const Graph& graph, const Stage& stage) {
  return MakeStageSpec(graph, stage).Key();
}

// An Inception-like block: three branches and a pool from one input, each
// branch a short chain, joined by a concat.
struct InceptionLike {
  Net net;
  Graph graph;
  explicit InceptionLike(const std::string& prefix) : net({32, 16, 16}, prefix) {
    net.Add("b1", ConvOp(16, 1), "in");
    net.Add("b2a", ConvOp(8, 1), "in");
    net.Add("b2b", ConvOp(16, 3, 1, 1), "b2a");
    net.Add("b3a", ConvOp(8, 1), "in");
    net.Add("b3b", ConvOp(16, 5, 1, 2), "b3a");
    net.Add("pool", PoolOp(PoolType::kAvg, 3, 1, 1), "in");
    net.Add("b4", ConvOp(8, 1), "pool");
    net.Add("cat", ConcatOp(), {{"b1"}, {"b2b"}, {"b3b"}, {"b4"}});
    graph = net.Done();
  }
};

// Named stages of InceptionLike, by node name.
struct NamedStage {
  std::string label;
  Strategy strategy;
  std::vector<std::vector<std::string>> groups;
};

const std::vector<NamedStage>& InceptionLikeStages() {
  static const std::vector<NamedStage> stages = {
      {"single conv", Strategy::kParallel, {{"b1"}}},
      {"three parallel 1x1", Strategy::kParallel, {{"b1"}, {"b2a"}, {"b3a"}}},
      {"merged 1x1", Strategy::kMerge, {{"b1"}, {"b2a"}, {"b3a"}}},
      {"chains and pool", Strategy::kParallel, {{"b2a", "b2b"}, {"b3a", "b3b"}, {"pool", "b4"}}},
      {"concat", Strategy::kParallel, {{"cat"}}},
  };
  return stages;
}

// ------------------------------------------------------- names and places

TEST(StageKeyTest, RenamingNodesAndHintsKeepsTheKey) {
  const InceptionLike a("first_"), b("other.");
  for (const NamedStage& s : InceptionLikeStages()) {
    const std::string key_a = KeyOf(a.graph, a.net.Make(s.strategy, s.groups));
    const std::string key_b = KeyOf(b.graph, b.net.Make(s.strategy, s.groups));
    EXPECT_EQ(key_a, key_b) << s.label;
    EXPECT_EQ(key_a.find("first_"), std::string::npos) << key_a;
    EXPECT_EQ(key_a.find("hint"), std::string::npos) << key_a;
  }
}

TEST(StageKeyTest, DistinctStagesOfOneBlockHaveDistinctKeys) {
  const InceptionLike a("");
  std::vector<std::string> keys;
  for (const NamedStage& s : InceptionLikeStages()) {
    keys.push_back(KeyOf(a.graph, a.net.Make(s.strategy, s.groups)));
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
}

// The same sub-structure twice, in two blocks (so at other node ids, reading
// another tensor of the same shape).
TEST(StageKeyTest, SameStructureInTwoBlocksSharesTheKey) {
  Net net({16, 16, 16});
  net.Add("a1", ConvOp(16, 1), "in");
  net.Add("a2", ConvOp(16, 3, 1, 1), "in");
  net.Add("a3", ConvOp(16, 3, 1, 1), "a2");
  net.Add("ax", AddOp(), {{"a1"}, {"a3"}});
  net.Add("c1", ConvOp(16, 1), "ax");
  net.Add("c2", ConvOp(16, 3, 1, 1), "ax");
  net.Add("c3", ConvOp(16, 3, 1, 1), "c2");
  net.Add("cx", AddOp(), {{"c1"}, {"c3"}});
  const Graph g = net.Done({"ax", "cx"});
  ASSERT_EQ(g.blocks.size(), 2u);

  const std::vector<std::pair<Stage, Stage>> pairs = {
      {net.Make(Strategy::kParallel, {{"a1"}, {"a2"}}),
       net.Make(Strategy::kParallel, {{"c1"}, {"c2"}})},
      {net.Make(Strategy::kMerge, {{"a1"}, {"a2"}}), net.Make(Strategy::kMerge, {{"c1"}, {"c2"}})},
      {net.Make(Strategy::kParallel, {{"a1"}, {"a2", "a3"}}),
       net.Make(Strategy::kParallel, {{"c1"}, {"c2", "c3"}})},
      {net.Make(Strategy::kParallel, {{"ax"}}), net.Make(Strategy::kParallel, {{"cx"}})},
  };
  for (const auto& [first, second] : pairs) EXPECT_EQ(KeyOf(g, first), KeyOf(g, second));
}

// The same two branches, once at nodes 1-2 and once after unrelated nodes
// that push them to other positions of the graph.
TEST(StageKeyTest, SameStructureAtOtherNodePositionsSharesTheKey) {
  Net plain({16, 16, 16});
  plain.Add("a", ConvOp(16, 3, 1, 1), "in");
  plain.Add("b", PoolOp(PoolType::kMax, 3, 1, 1), "in");
  plain.Add("out", ConcatOp(), {{"a"}, {"b"}});
  const Graph g1 = plain.Done();

  Net shifted({16, 16, 16}, "s_");
  shifted.Add("x", ConvOp(4, 1), "in");
  shifted.Add("b", PoolOp(PoolType::kMax, 3, 1, 1), "in");
  shifted.Add("y", ConvOp(4, 1), "x");
  shifted.Add("a", ConvOp(16, 3, 1, 1), "in");
  shifted.Add("out", ConcatOp(), {{"a"}, {"b"}, {"y"}});
  const Graph g2 = shifted.Done();
  ASSERT_NE(plain.Id("a"), shifted.Id("a"));

  EXPECT_EQ(KeyOf(g1, plain.Make(Strategy::kParallel, {{"a"}, {"b"}})),
            KeyOf(g2, shifted.Make(Strategy::kParallel, {{"a"}, {"b"}})));
  EXPECT_EQ(KeyOf(g1, plain.Make(Strategy::kParallel, {{"b"}, {"a"}})),
            KeyOf(g2, shifted.Make(Strategy::kParallel, {{"a"}, {"b"}})));
}

// One group u -> {v, w}: the same group whichever of the siblings v, w the
// graph happens to list first.
TEST(StageKeyTest, OrderOfIndependentSiblingsInTheGraphDoesNotChangeTheKey) {
  auto build = [](bool v_first, Net& net) {
    net.Add("u", ConvOp(16, 1), "in");
    if (v_first) {
      net.Add("v", ConvOp(16, 3, 1, 1), "u");
      net.Add("w", ConvOp(8, 1), "u");
    } else {
      net.Add("w", ConvOp(8, 1), "u");
      net.Add("v", ConvOp(16, 3, 1, 1), "u");
    }
    net.Add("out", ConcatOp(), {{"v"}, {"w"}});
    return net.Done();
  };
  Net n1({16, 16, 16}), n2({16, 16, 16});
  const Graph g1 = build(true, n1), g2 = build(false, n2);
  ASSERT_NE(n1.Id("v"), n2.Id("v"));
  EXPECT_EQ(KeyOf(g1, n1.Make(Strategy::kParallel, {{"u", "v", "w"}})),
            KeyOf(g2, n2.Make(Strategy::kParallel, {{"u", "v", "w"}})));
}

// One group u -> {v1, v2} (identical convolutions of u), v1 -> w: the key
// must not depend on which of the look-alike siblings the graph lists first.
TEST(StageKeyTest, OrderOfIdenticalSiblingsInTheGraphDoesNotChangeTheKey) {
  auto build = [](bool v1_first, Net& net) {
    net.Add("u", ConvOp(16, 1), "in");
    if (v1_first) {
      net.Add("v1", ConvOp(16, 3, 1, 1), "u");
      net.Add("v2", ConvOp(16, 3, 1, 1), "u");
    } else {
      net.Add("v2", ConvOp(16, 3, 1, 1), "u");
      net.Add("v1", ConvOp(16, 3, 1, 1), "u");
    }
    net.Add("w", ConvOp(8, 1), "v1");
    net.Add("out", ConcatOp(), {{"w"}, {"v2"}});
    return net.Done();
  };
  Net n1({16, 16, 16}), n2({16, 16, 16});
  const Graph g1 = build(true, n1), g2 = build(false, n2);
  ASSERT_NE(n1.Id("v1"), n2.Id("v1"));
  EXPECT_EQ(KeyOf(g1, n1.Make(Strategy::kParallel, {{"u", "v1", "v2", "w"}})),
            KeyOf(g2, n2.Make(Strategy::kParallel, {{"u", "v1", "v2", "w"}})));
}

// ------------------------------------------------------------ group order

struct GroupOrderCase {
  std::string label;
  std::function<Net()> build;
  Strategy strategy;
  std::vector<std::vector<std::string>> groups;
};
void PrintTo(const GroupOrderCase& c, std::ostream* os) { *os << c.label; }

Net InceptionNet() { return InceptionLike("").net; }

// Two identical convolutions of two different tensors p and q of one shape,
// and a third group that reads p: only a canonical form that numbers inputs
// independently of the given group order keeps one key.
Net TiedGroupsNet() {
  Net net({16, 8, 8});
  net.Add("p", ConvOp(16, 1), "in");
  net.Add("q", ConvOp(16, 1), "in");
  net.Add("r", PoolOp(PoolType::kMax, 3, 1, 1), "in");
  net.Add("cp", ConvOp(16, 3, 1, 1), "p");
  net.Add("cq", ConvOp(16, 3, 1, 1), "q");
  net.Add("s", AddOp(), {{"p"}, {"r"}});
  net.Add("out", ConcatOp(), {{"cp"}, {"cq"}, {"s"}});
  return net;
}

// Inception V3's 8x8 blocks in small: a 1x3 and a 3x1 convolution of each
// of two tensors p and q of one shape. The groups tie in pairs, and the
// stage is symmetric under p <-> q.
Net SymmetricPairsNet() {
  Net net({16, 8, 8});
  net.Add("p", ConvOp(16, 1), "in");
  net.Add("q", ConvOp(16, 1), "in");
  OpParams k13 = ConvOp(16, 1), k31 = ConvOp(16, 1);
  k13.conv.kernel = {1, 3};
  k13.conv.padding = {0, 1};
  k31.conv.kernel = {3, 1};
  k31.conv.padding = {1, 0};
  net.Add("p13", k13, "p");
  net.Add("q13", k13, "q");
  net.Add("p31", k31, "p");
  net.Add("q31", k31, "q");
  net.Add("out", ConcatOp(), {{"p13"}, {"q13"}, {"p31"}, {"q31"}});
  return net;
}

class GroupOrderTest : public ::testing::TestWithParam<GroupOrderCase> {};

TEST_P(GroupOrderTest, EveryPermutationOfTheGroupsGivesOneKey) {
  const GroupOrderCase& c = GetParam();
  Net net = c.build();
  const Graph graph = net.Done();
  const Stage stage = net.Make(c.strategy, c.groups);
  const std::string expected = KeyOf(graph, stage);
  StageKeyer keyer(graph);
  std::vector<size_t> order(stage.groups.size());
  std::iota(order.begin(), order.end(), 0);
  int permutations = 0, mismatches = 0;
  do {
    Stage permuted{stage.strategy, {}};
    for (size_t i : order) permuted.groups.push_back(stage.groups[i]);
    const std::string spec_key = KeyOf(graph, permuted);
    const std::string keyer_key = keyer.Key(permuted);
    EXPECT_EQ(keyer_key, spec_key) << c.label << ", permutation " << permutations;
    if (spec_key != expected && ++mismatches == 1) {
      ADD_FAILURE() << c.label << ": permutation " << permutations
                    << " of the groups changes the key\n"
                    << "  given order: " << expected << "\n  permuted:    " << spec_key;
    }
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(mismatches, 0) << "of " << permutations << " permutations";
  EXPECT_GE(permutations, 2);
}

INSTANTIATE_TEST_SUITE_P(Stages, GroupOrderTest,
                         ::testing::Values(GroupOrderCase{"three_branches",
                                                          InceptionNet,
                                                          Strategy::kParallel,
                                                          {{"b1"}, {"b2a", "b2b"}, {"pool", "b4"}}},
                                           GroupOrderCase{"merge_of_three",
                                                          InceptionNet,
                                                          Strategy::kMerge,
                                                          {{"b1"}, {"b2a"}, {"b3a"}}},
                                           GroupOrderCase{"identical_groups_of_one_input",
                                                          InceptionNet,
                                                          Strategy::kParallel,
                                                          {{"b2a"}, {"b3a"}, {"b1"}}},
                                           GroupOrderCase{"identical_groups_of_different_inputs",
                                                          TiedGroupsNet,
                                                          Strategy::kParallel,
                                                          {{"cp"}, {"cq"}, {"s"}}},
                                           GroupOrderCase{"symmetric_pairs_of_look_alike_groups",
                                                          SymmetricPairsNet,
                                                          Strategy::kParallel,
                                                          {{"p13"}, {"q13"}, {"p31"}, {"q31"}}}),
                         [](const auto& param_info) { return param_info.param.label; });

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

// ------------------------------------------------- keyer vs spec on models

// Every single operator, and every pair of operators of a block (as two
// groups, as a merge when mergeable, and as one group when one feeds the
// other).
class KeyerAgreesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KeyerAgreesTest, KeyerMatchesMakeStageSpecOnEverySingleAndPairStage) {
  const Graph g = BuildZooModel(GetParam());
  StageKeyer keyer(g);
  int64_t checked = 0;
  auto check = [&](const Stage& stage) {
    const std::string expected = MakeStageSpec(g, stage).Key();
    const std::string actual = keyer.Key(stage);
    ASSERT_EQ(actual, expected);
    ++checked;
  };
  for (const Block& block : g.blocks) {
    const std::vector<NodeId> ops = block.Operators();
    for (size_t i = 0; i < ops.size(); ++i) {
      check({Strategy::kParallel, {{ops[i]}}});
      check({Strategy::kMerge, {{ops[i]}}});
      for (size_t j = i + 1; j < ops.size(); ++j) {
        check({Strategy::kParallel, {{ops[i]}, {ops[j]}}});
        check({Strategy::kParallel, {{ops[i], ops[j]}}});
        if (CanMerge(g, {ops[i], ops[j]})) check({Strategy::kMerge, {{ops[i]}, {ops[j]}}});
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GT(checked, 300);
}

INSTANTIATE_TEST_SUITE_P(Zoo, KeyerAgreesTest, ::testing::Values("inception_v3", "squeezenet"));

}  // namespace
}  // namespace ios
