// Canonical stage keys: what makes two stages the same DB entry (names,
// places, group order), and the keyer agreeing with MakeStageSpec. What keeps
// stages apart: stage_key_change_test.cc.
#include "common/stage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/zoo.h"
#include "tests/common/stage_testing.h"
#include "tests/testing/ops.h"

namespace ios {
namespace {

// ---------------------------------------------------------------- builders

using ::ios::testing::ConvOp;
using ::ios::testing::PoolOp;

using stage_testing::ConcatOp;
using stage_testing::KeyOf;
using stage_testing::Net;

OpParams AddOp() { return ::ios::testing::EltwiseOp(EltwiseType::kAdd); }

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