#include "memory/network_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "common/blocks.h"
#include "common/error.h"
#include "common/part_dag.h"
#include "exec/tensor_layout.h"
#include "tests/coordinator/wide_models.h"
#include "tests/testing/random_dags.h"

namespace ios::memory {
namespace {

using ios::testing::OneOperatorStages;
using ios::testing::RandomSmallGraph;

std::vector<std::vector<NodeId>> OneEach(const std::vector<NodeId>& order) {
  std::vector<std::vector<NodeId>> stages;
  for (NodeId id : order) stages.push_back({id});
  return stages;
}

std::vector<NodeId> OperatorProducers(const Node& node) {
  std::vector<NodeId> producers;
  for (const Term& term : node.inputs) {
    for (const Slice& slice : term) {
      if (slice.producer != 0) producers.push_back(slice.producer);
    }
  }
  return producers;
}

// The least PeakOf over every topological order of `graph`'s operators.
int64_t BruteForcePeak(const Graph& graph, MemoryModel model) {
  const NodeId n = static_cast<NodeId>(graph.nodes.size());
  std::vector<bool> done(static_cast<size_t>(n), false);
  std::vector<NodeId> order;
  int64_t best = std::numeric_limits<int64_t>::max();
  std::function<void()> extend = [&] {
    if (static_cast<NodeId>(order.size()) == n - 1) {
      best = std::min(best, PeakOf(graph, OneEach(order), 1, model));
      return;
    }
    for (NodeId v = 1; v < n; ++v) {
      if (done[static_cast<size_t>(v)]) continue;
      const std::vector<NodeId> producers = OperatorProducers(graph.node(v));
      if (!std::all_of(producers.begin(), producers.end(),
                       [&](NodeId p) { return done[static_cast<size_t>(p)]; })) {
        continue;
      }
      done[static_cast<size_t>(v)] = true;
      order.push_back(v);
      extend();
      order.pop_back();
      done[static_cast<size_t>(v)] = false;
    }
  };
  extend();
  return best;
}

// Two random graphs one after the other: a 1x1 convolution turns the
// first's output into the second's input, so it and the first's output are
// cut vertices and the network has several blocks.
Graph TwoRandomGraphsInSequence(uint64_t seed, int first_operators, int second_operators) {
  Graph g = RandomSmallGraph(seed, first_operators);
  const Graph second = RandomSmallGraph(seed * 7919 + 1, second_operators);
  g.name = "chain_" + std::to_string(seed);
  const NodeId bridge = static_cast<NodeId>(g.nodes.size());
  Node conv{"bridge", "", ios::testing::ConvOp(second.nodes[0].output.c, 1), {}, {}};
  conv.inputs = {{{bridge - 1, 0, g.nodes.back().output.c}}};
  g.nodes.push_back(conv);
  for (size_t v = 1; v < second.nodes.size(); ++v) {
    Node node = second.nodes[v];
    node.name = "second_" + node.name;
    for (Term& term : node.inputs) {
      for (Slice& slice : term)
        slice.producer = slice.producer == 0 ? bridge : bridge + slice.producer;
    }
    g.nodes.push_back(std::move(node));
  }
  Block block{0, {}, static_cast<NodeId>(g.nodes.size()) - 1, {}};
  for (NodeId v = 1; v < block.exit; ++v) block.inner.push_back(v);
  g.blocks = {block};
  InferShapes(g);
  return g;
}

// Returns whether the optimum beats every baseline (so the test could fail).
bool ExpectOptimal(const Graph& g, MemoryModel model) {
  NetworkOrderOptions options;
  options.model = model;
  options.order.step_seconds = 0;  // deterministic: states only
  const NetworkOrder found = OptimalNetworkOrder(g, options);
  EXPECT_EQ(found.order.size(), g.nodes.size() - 1);
  EXPECT_TRUE(found.optimal);
  EXPECT_TRUE(found.warnings.empty());
  EXPECT_EQ(found.peak_bytes, PeakOf(g, OneEach(found.order), 1, model));  // throws if not an order
  EXPECT_EQ(found.peak_bytes, BruteForcePeak(g, model));
  EXPECT_LE(found.peak_bytes, found.kahn_peak_bytes);
  EXPECT_LE(found.peak_bytes, found.node_order_peak_bytes);
  EXPECT_LE(found.peak_bytes, found.greedy_peak_bytes);
  return found.peak_bytes <
         std::min({found.kahn_peak_bytes, found.node_order_peak_bytes, found.greedy_peak_bytes});
}

TEST(NetworkOrderTest, MatchesBruteForceOverAllTopologicalOrders) {
  int better = 0;
  for (MemoryModel model : {MemoryModel::kPlan, MemoryModel::kPerNode}) {
    for (int n = 1; n <= 8; ++n) {
      for (uint64_t seed = 1; seed <= 12; ++seed) {
        const Graph g = RandomSmallGraph(seed * 100 + static_cast<uint64_t>(n), n);
        SCOPED_TRACE(g.name + (model == MemoryModel::kPlan ? " plan" : " per-node"));
        better += ExpectOptimal(g, model);
      }
    }
  }
  EXPECT_GT(better, 0);
}

TEST(NetworkOrderTest, MatchesBruteForceOnGraphsOfSeveralBlocks) {
  int several = 0, better = 0;
  for (MemoryModel model : {MemoryModel::kPlan, MemoryModel::kPerNode}) {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      const Graph g = TwoRandomGraphsInSequence(seed, 4, 4);  // 9 operators
      SCOPED_TRACE(g.name + (model == MemoryModel::kPlan ? " plan" : " per-node"));
      several += FindBlocks(g).size() >= 3;
      better += ExpectOptimal(g, model);
    }
  }
  EXPECT_GT(better, 0);
  EXPECT_EQ(several, 80);  // the bridge and the first graph's output at least
}

TEST(NetworkOrderTest, CuttingAtBlocksGivesThePeakOfOneSearchOverTheWholeGraph) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const Graph g = TwoRandomGraphsInSequence(seed, 4, 4);  // 9 operators
    SCOPED_TRACE(g.name);
    std::vector<NodeId> all;
    for (NodeId v = 1; v < static_cast<NodeId>(g.nodes.size()); ++v) all.push_back(v);
    const PartDag dag = PartDag::Make(g, all);
    const PartMemory costs(exec::LayoutTensors(g), {all}, 0);
    MemoryOrderOptions exact;
    exact.step_seconds = 0;
    const PartOrder whole = OptimalPartOrder(dag, costs, exact);
    ASSERT_TRUE(whole.exact);
    NetworkOrderOptions options;
    options.order.step_seconds = 0;
    const NetworkOrder cut = OptimalNetworkOrder(g, options);
    EXPECT_GT(cut.parts.size(), 1u);
    EXPECT_EQ(cut.peak_bytes, costs.Background() + whole.peak);
  }
}

TEST(NetworkOrderTest, PeakEqualsThePlansPeakLiveBytesAtTheBatch) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const Graph g = TwoRandomGraphsInSequence(seed, 5, 4);
    SCOPED_TRACE(g.name);
    NetworkOrderOptions options;
    options.batch = 3;
    const NetworkOrder found = OptimalNetworkOrder(g, options);
    const std::vector<Stage> stages = found.Stages();
    EXPECT_EQ(stages.size(), found.order.size());
    EXPECT_EQ(found.peak_bytes, exec::PlanMemory(g, stages).peak_live_bytes * 3);
    EXPECT_EQ(found.peak_bytes, PeakOf(g, OneEach(found.order), 3));
    EXPECT_EQ(found.kahn_peak_bytes, PeakOf(g, OneEach(NetworkKahnOrder(g)), 3));
  }
}

TEST(NetworkOrderTest, CutsABlockOverThePartLimitAndSaysTheOrderIsNotOptimal) {
  const Graph g = RandomSmallGraph(4242, 8);
  NetworkOrderOptions options;
  options.max_part_operators = 3;
  const NetworkOrder found = OptimalNetworkOrder(g, options);
  EXPECT_FALSE(found.optimal);
  bool cut = false;
  for (const PartOrderRecord& part : found.parts) {
    EXPECT_LE(part.order.size(), 3u);
    cut = cut || part.cut;
  }
  EXPECT_TRUE(cut);
  EXPECT_EQ(found.peak_bytes, PeakOf(g, OneEach(found.order), 1));
  EXPECT_LE(found.peak_bytes, found.kahn_peak_bytes);
  EXPECT_LE(found.peak_bytes, found.node_order_peak_bytes);
  EXPECT_GE(found.peak_bytes, BruteForcePeak(g, MemoryModel::kPlan));
}

// Layer-wise convolutions 1..6 and 7..12 (7+i reads 1+i), a concat 13.
TEST(NetworkOrderTest, UsesTheGraphsOwnPartsOfABlockWithExactlyItsOperators) {
  Graph g = coordinator::testing::WideBlock(6, 2);
  ASSERT_EQ(FindBlocks(g).size(), 1u);
  const std::vector<std::vector<NodeId>> own{{1, 2, 3, 7, 8, 9}, {4, 5, 6, 10, 11, 12, 13}};
  g.blocks[0].parts = own;
  NetworkOrderOptions options;
  options.max_part_operators = 7;
  NetworkOrder found = OptimalNetworkOrder(g, options);
  ASSERT_EQ(found.parts.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    std::vector<NodeId> ops = found.parts[k].order;
    std::sort(ops.begin(), ops.end());
    EXPECT_EQ(ops, own[k]) << "part " << k;
    EXPECT_TRUE(found.parts[k].cut);
  }
  EXPECT_EQ(found.peak_bytes, PeakOf(g, OneEach(found.order), 1));
  // Parts with an edge going back (10 reads 4) are not the graph's to use:
  // NarrowParts cuts the block instead, in runs of node order.
  g.blocks[0].parts = {{1, 2, 3, 7, 8, 9, 10}, {4, 5, 6, 11, 12, 13}};
  found = OptimalNetworkOrder(g, options);
  ASSERT_GE(found.parts.size(), 2u);
  std::vector<NodeId> first = found.parts[0].order;
  std::sort(first.begin(), first.end());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], static_cast<NodeId>(i + 1));
}

// A rewrite's partials can grow one of the graph's parts past the limit
// (memory/rewrite.h): only that part is cut, the others stay as they were.
TEST(NetworkOrderTest, CutsOnlyTheGraphsOwnPartThatIsOverTheLimit) {
  Graph g = coordinator::testing::WideBlock(6, 2);
  const std::vector<std::vector<NodeId>> own{{1, 2, 3, 7, 8, 9}, {4, 5, 6, 10, 11, 12, 13}};
  g.blocks[0].parts = own;
  NetworkOrderOptions options;
  options.max_part_operators = 6;
  const NetworkOrder found = OptimalNetworkOrder(g, options);
  ASSERT_GE(found.parts.size(), 3u);
  std::vector<NodeId> first = found.parts[0].order, rest;
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, own[0]);
  for (size_t k = 1; k < found.parts.size(); ++k) {
    EXPECT_LE(found.parts[k].order.size(), 6u) << "part " << k;
    rest.insert(rest.end(), found.parts[k].order.begin(), found.parts[k].order.end());
  }
  std::sort(rest.begin(), rest.end());
  EXPECT_EQ(rest, own[1]);
  EXPECT_EQ(found.peak_bytes, PeakOf(g, OneEach(found.order), 1));
}

// Parts of one operator fix node id order; where Kahn's order does better,
// it is run instead, and said so.
TEST(NetworkOrderTest, RunsABaselineThatBeatsThePartsOrderAndSaysSo) {
  int swapped = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const Graph g = RandomSmallGraph(seed, 8);
    NetworkOrderOptions options;
    options.max_part_operators = 1;
    const NetworkOrder found = OptimalNetworkOrder(g, options);
    SCOPED_TRACE(g.name);
    EXPECT_EQ(found.peak_bytes, PeakOf(g, OneEach(found.order), 1));
    EXPECT_EQ(found.peak_bytes, std::min(found.kahn_peak_bytes, found.node_order_peak_bytes));
    if (found.kahn_peak_bytes < found.node_order_peak_bytes) {
      ++swapped;
      EXPECT_EQ(found.order, NetworkKahnOrder(g));
      EXPECT_FALSE(found.optimal);
      ASSERT_EQ(found.warnings.size(), 1u);
      EXPECT_NE(found.warnings[0].find("the Kahn order's peak"), std::string::npos)
          << found.warnings[0];
    } else {
      EXPECT_TRUE(found.warnings.empty());
    }
  }
  EXPECT_GT(swapped, 0);
}

TEST(NetworkOrderTest, ReportsAPartOverItsStateBudgetAsAFallbackNamingThePart) {
  const Graph g = coordinator::testing::WideBlock(20, 2);
  NetworkOrderOptions options;
  options.max_part_operators = 64;  // the whole block is one part
  options.order.max_states_per_step = 1000;
  options.order.step_seconds = 0;
  options.recut_over_budget = false;
  const NetworkOrder found = OptimalNetworkOrder(g, options);
  EXPECT_FALSE(found.optimal);
  const auto fallback = std::find_if(found.parts.begin(), found.parts.end(),
                                     [](const PartOrderRecord& p) { return !p.exact; });
  ASSERT_NE(fallback, found.parts.end());
  EXPECT_NE(fallback->why.find("over its state or time budget"), std::string::npos)
      << fallback->why;
  ASSERT_FALSE(found.warnings.empty());
  EXPECT_NE(found.warnings[0].find("'wide20x2' part 0"), std::string::npos) << found.warnings[0];
  EXPECT_NE(found.warnings[0].find("'l0_c0'"), std::string::npos) << found.warnings[0];
  EXPECT_EQ(found.peak_bytes, PeakOf(g, OneEach(found.order), 1));
  EXPECT_LE(found.peak_bytes, found.kahn_peak_bytes);
}

TEST(NetworkOrderTest, CutsAPartOverItsStateBudgetIntoSmallerPartsSearchedExactly) {
  const Graph g = coordinator::testing::WideBlock(20, 2);
  NetworkOrderOptions options;
  options.max_part_operators = 64;  // the whole block is one part
  options.order.max_states_per_step = 1000;
  options.order.step_seconds = 0;
  const NetworkOrder found = OptimalNetworkOrder(g, options);
  EXPECT_FALSE(found.optimal);
  EXPECT_GT(found.recuts, 0);
  ASSERT_GT(found.parts.size(), 1u);
  size_t operators = 0;
  for (const PartOrderRecord& part : found.parts) {
    EXPECT_TRUE(part.exact);
    EXPECT_TRUE(part.cut);
    EXPECT_LE(part.order.size(), 21u);
    operators += part.order.size();
  }
  EXPECT_EQ(operators, g.nodes.size() - 1);
  ASSERT_EQ(found.warnings.size(), static_cast<size_t>(found.recuts));
  EXPECT_NE(found.warnings[0].find("'wide20x2' part 0 (block 0, 41 operators"), std::string::npos)
      << found.warnings[0];
  EXPECT_NE(found.warnings[0].find("cut into 2 parts of at most 21 operators"), std::string::npos)
      << found.warnings[0];
  EXPECT_EQ(found.peak_bytes, PeakOf(g, OneEach(found.order), 1));
  EXPECT_LE(found.peak_bytes, found.kahn_peak_bytes);
}

TEST(NetworkOrderTest, RefusesAPartLimitOutsideWhatAPartMayHold) {
  const Graph g = RandomSmallGraph(1, 3);
  for (int limit : {0, 65}) {
    NetworkOrderOptions options;
    options.max_part_operators = limit;
    EXPECT_THROW(OptimalNetworkOrder(g, options), Error) << limit;
  }
}

}  // namespace
}  // namespace ios::memory
