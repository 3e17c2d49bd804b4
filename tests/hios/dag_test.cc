#include "hios/dag.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "hios/schedule.h"

namespace ios::hios {
namespace {

TEST(DagTest, TopologicalOrderTakesTheSmallestReadyIdFirst) {
  // 3 -> 1 -> 0, 2 alone: ids are not topological.
  const Dag dag = Dag::Make(4, {{3, 1}, {1, 0}});
  EXPECT_EQ(dag.topological(), (std::vector<OpId>{2, 3, 1, 0}));
  EXPECT_EQ(dag.topo_rank(0), 3);
  ASSERT_EQ(dag.in_edges(0).size(), 1u);
  EXPECT_EQ(dag.edge(dag.in_edges(0)[0]).src, 1);
}

TEST(DagTest, ADefaultDagHasNoOperators) {
  EXPECT_EQ(Dag().ops(), 0);
  EXPECT_EQ(Dag::Make(0, {}).ops(), 0);
}

TEST(DagTest, RefusesACycleAnOutOfRangeEndASelfLoopAndADuplicate) {
  EXPECT_THROW(Dag::Make(3, {{0, 1}, {1, 2}, {2, 0}}), Error);
  EXPECT_THROW(Dag::Make(2, {{0, 2}}), Error);
  EXPECT_THROW(Dag::Make(2, {{1, 1}}), Error);
  EXPECT_THROW(Dag::Make(2, {{0, 1}, {0, 1}}), Error);
  try {
    Dag::Make(2, {{0, 5}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("edge 0 (0 -> 5)"), std::string::npos) << e.what();
  }
}

TEST(DagTest, PriorityOrderIsTopologicalEvenWithZeroWeights) {
  // All times and transfers 0: every priority ties, the order must still
  // put every source before its destination.
  const Dag dag = Dag::Make(5, {{4, 2}, {2, 0}, {3, 1}, {1, 0}});
  const TableCosts costs(2, std::vector<double>(5, 0.0), std::vector<double>(4, 0.0));
  const std::vector<OpId> order = PriorityOrder(dag, costs);
  std::vector<int> at(5);
  for (int i = 0; i < 5; ++i) at[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
  for (const Edge& e : dag.edges()) {
    EXPECT_LT(at[static_cast<size_t>(e.src)], at[static_cast<size_t>(e.dst)]);
  }
}

TEST(DagTest, PriorityCountsEveryVertexAndTheTransfersOnTheLongestTail) {
  // 0 -> 1 -> 2 and 0 -> 2: p(2) = 3, p(1) = 2 + 1 + 3, p(0) = 1 + max(1 + 6, 5 + 3).
  const Dag dag = Dag::Make(3, {{0, 1}, {1, 2}, {0, 2}});
  const TableCosts costs(2, {1, 2, 3}, {1, 1, 5});
  EXPECT_EQ(Priorities(dag, costs), (std::vector<double>{9, 6, 3}));
}

}  // namespace
}  // namespace ios::hios
