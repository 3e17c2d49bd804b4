#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/error.h"
#include "hios/costs.h"
#include "hios/dag.h"
#include "hios/schedule.h"

namespace ios::hios {
namespace {

using Stages = std::vector<std::vector<std::vector<OpId>>>;

Timeline EvaluateChecked(const Dag& dag, const Costs& costs, Stages stages) {
  const MultiSchedule q{std::move(stages)};
  Timeline t = Evaluate(dag, costs, q);
  if (t.acyclic) CheckTimeline(dag, costs, q, t);
  return t;
}

TEST(EvaluatorTest, ChainOnOneDeviceCostsTheSumOfItsOperators) {
  const Dag dag = Dag::Make(3, {{0, 1}, {1, 2}});
  const TableCosts costs(2, {1, 2, 4}, {10, 10});
  const Timeline t = EvaluateChecked(dag, costs, {{{0}, {1}, {2}}, {}});
  ASSERT_TRUE(t.acyclic) << t.problem;
  EXPECT_EQ(t.latency_ms, 7);
  EXPECT_EQ(t.start_ms, (std::vector<double>{0, 1, 3}));
}

TEST(EvaluatorTest, ChargesATransferOnlyBetweenDevices) {
  const Dag dag = Dag::Make(3, {{0, 1}, {1, 2}});
  const TableCosts costs(2, {1, 2, 4}, {10, 20});
  // 0 on device 0, 1 and 2 on device 1: only edge 0 crosses.
  const Timeline t = EvaluateChecked(dag, costs, {{{0}}, {{1}, {2}}});
  ASSERT_TRUE(t.acyclic) << t.problem;
  EXPECT_EQ(t.start_ms[1], 11);
  EXPECT_EQ(t.latency_ms, 17);
}

TEST(EvaluatorTest, StartsAfterEveryPredecessorNotOnlyTheFirst) {
  // 2 has an early predecessor (0) and a late one (1, on another device).
  const Dag dag = Dag::Make(3, {{0, 2}, {1, 2}});
  const TableCosts costs(2, {1, 9, 1}, {0.5, 3});
  const Timeline t = EvaluateChecked(dag, costs, {{{0}, {2}}, {{1}}});
  ASSERT_TRUE(t.acyclic) << t.problem;
  EXPECT_EQ(t.start_ms[2], 12);
}

TEST(EvaluatorTest, TakesTheLargestTransferBetweenTwoStagesNotTheirSum) {
  // Stage {0, 1} on device 0 feeds stage {2} on device 1 over two edges.
  const Dag dag = Dag::Make(3, {{0, 2}, {1, 2}});
  const TableCosts costs(2, {1, 1, 1}, {3, 5});
  const Timeline t = EvaluateChecked(dag, costs, {{{0, 1}}, {{2}}});
  ASSERT_TRUE(t.acyclic) << t.problem;
  EXPECT_EQ(t.start_ms[2], 2 + 5);  // stage price is the sum without a stage model
}

TEST(EvaluatorTest, ReportsACycleThroughAnotherDevicesOrder) {
  // a=0, b=1, c=2, d=3 with a -> d and c -> b: a and b are independent,
  // yet on device 0 as one stage they wait for c, which runs after d, which
  // waits for a.
  const Dag dag = Dag::Make(4, {{0, 3}, {2, 1}});
  const TableCosts costs(2, {1, 1, 1, 1}, {1, 1});
  const Timeline apart = EvaluateChecked(dag, costs, {{{0}, {1}}, {{3}, {2}}});
  EXPECT_TRUE(apart.acyclic) << apart.problem;
  const Timeline merged = EvaluateChecked(dag, costs, {{{0, 1}}, {{3}, {2}}});
  ASSERT_FALSE(merged.acyclic);
  EXPECT_TRUE(std::isinf(merged.latency_ms));
  ASSERT_EQ(merged.cycle.size(), 3u) << merged.problem;
  EXPECT_NE(merged.problem.find("device 0 stage 0"), std::string::npos) << merged.problem;
  EXPECT_NE(merged.problem.find("device 1 stage 1"), std::string::npos) << merged.problem;
}

TEST(EvaluatorTest, ReportsACycleOfSingletonsAcrossTwoDevices) {
  // Same DAG, device 0 runs b before a: b waits for c, c after d, d for a,
  // a after b.
  const Dag dag = Dag::Make(4, {{0, 3}, {2, 1}});
  const TableCosts costs(2, {1, 1, 1, 1}, {1, 1});
  const Timeline t = EvaluateChecked(dag, costs, {{{1}, {0}}, {{3}, {2}}});
  ASSERT_FALSE(t.acyclic);
  EXPECT_EQ(t.cycle.size(), 4u) << t.problem;
  EXPECT_TRUE(std::isnan(t.start_ms[0]));
}

TEST(EvaluatorTest, RefusesDependentOperatorsInOneStage) {
  const Dag dag = Dag::Make(2, {{0, 1}});
  const TableCosts costs(1, {1, 1}, {1});
  const Timeline t = EvaluateChecked(dag, costs, {{{0, 1}}});
  ASSERT_FALSE(t.acyclic);
  ASSERT_EQ(t.cycle.size(), 1u);
  EXPECT_NE(t.problem.find("operators 0 and 1 depend on each other"), std::string::npos)
      << t.problem;
}

TEST(EvaluatorTest, AnOrderedStageHoldsItsOwnChainAndStillWaitsForOtherDevices) {
  // 0 -> 1 -> 2 and 3 -> 2: {1, 2} is one IOS-style stage (a chain) on
  // device 0 after 0; 3 runs on device 1 and its result (4 ms later) is
  // awaited by the stage that holds 2.
  const Dag dag = Dag::Make(4, {{0, 1}, {1, 2}, {3, 2}});
  const TableCosts costs(2, {1, 2, 3, 5}, {10, 10, 4},
                         [](std::span<const OpId>, int) { return 4.5; });
  MultiSchedule q{{{{0}, {1, 2}}, {{3}}}};
  q.ordered_stages = true;
  const Timeline t = Evaluate(dag, costs, q);
  ASSERT_TRUE(t.acyclic) << t.problem;
  EXPECT_NO_THROW(CheckTimeline(dag, costs, q, t));
  EXPECT_DOUBLE_EQ(t.start_ms[1], 5 + 4);  // after 3's finish and its copy
  EXPECT_DOUBLE_EQ(t.latency_ms, 9 + 4.5);
  // A real cycle is still found: 3 now waits for the stage that waits for it.
  MultiSchedule cyclic{{{{0}, {1, 2}}, {{3}}}};
  cyclic.ordered_stages = true;
  const Dag back = Dag::Make(4, {{0, 1}, {1, 2}, {3, 2}, {1, 3}});
  const TableCosts back_costs(2, {1, 2, 3, 5}, {10, 10, 4, 1},
                              [](std::span<const OpId>, int) { return 4.5; });
  const Timeline c = Evaluate(back, back_costs, cyclic);
  EXPECT_FALSE(c.acyclic);
  EXPECT_EQ(c.cycle.size(), 2u) << c.problem;
}

TEST(EvaluatorTest, IgnoresUnmappedOperatorsAndTheirEdges) {
  const Dag dag = Dag::Make(3, {{0, 1}, {1, 2}});
  const TableCosts costs(2, {1, 100, 1}, {5, 5});
  const Timeline t = EvaluateChecked(dag, costs, {{{0}}, {{2}}});
  ASSERT_TRUE(t.acyclic) << t.problem;
  EXPECT_EQ(t.latency_ms, 1);
  EXPECT_TRUE(std::isnan(t.start_ms[1]));
}

TEST(EvaluatorTest, ThrowsOnAMalformedSchedule) {
  const Dag dag = Dag::Make(2, {{0, 1}});
  const TableCosts costs(2, {1, 1}, {1});
  EXPECT_THROW(Evaluate(dag, costs, {{{{0}}, {{0}}}}), Error);  // listed twice
  EXPECT_THROW(Evaluate(dag, costs, {{{{2}}, {}}}), Error);     // out of range
  EXPECT_THROW(Evaluate(dag, costs, {{{{}}, {}}}), Error);      // empty stage
  EXPECT_THROW(Evaluate(dag, costs, {{{{0}}}}), Error);         // one list for two devices
}

TEST(EvaluatorTest, CheckTimelineNamesTheEdgeAStartViolates) {
  const Dag dag = Dag::Make(2, {{0, 1}});
  const TableCosts costs(2, {1, 1}, {4});
  const MultiSchedule q{{{{0}}, {{1}}}};
  Timeline t = Evaluate(dag, costs, q);
  t.start_ms[1] = 4.5;  // needs 1 + 4
  try {
    CheckTimeline(dag, costs, q, t);
    FAIL() << "accepted a start before the transfer arrived";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("edge 0 (operator 0 on device 0 -> operator 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(EvaluatorTest, GivesTheSameLatencyWhateverTheOperatorIds) {
  // A random layered DAG, mapped round-robin in priority order, then every
  // id relabelled: the latency must not change.
  std::mt19937 rng(7);
  const int n = 60;
  std::vector<Edge> edges;
  for (OpId v = 1; v < n; ++v) {
    for (int k = 0; k < 2; ++k) edges.push_back({static_cast<OpId>(rng() % v), v});
  }
  std::sort(edges.begin(), edges.end(),
            [](Edge a, Edge b) { return std::pair(a.src, a.dst) < std::pair(b.src, b.dst); });
  edges.erase(std::unique(edges.begin(), edges.end(),
                          [](Edge a, Edge b) { return a.src == b.src && a.dst == b.dst; }),
              edges.end());
  std::vector<double> op_ms(n), transfer(edges.size());
  // Continuous draws: tied priorities would let the ids pick the order.
  std::uniform_real_distribution<double> time(0.5, 4.0), wait(0.0, 2.0);
  for (double& t : op_ms) t = time(rng);
  for (double& w : transfer) w = wait(rng);
  std::vector<OpId> relabel(n);
  std::iota(relabel.begin(), relabel.end(), 0);
  std::shuffle(relabel.begin(), relabel.end(), rng);

  auto latency = [&](const std::vector<OpId>& id) {
    std::vector<Edge> e2;
    for (const Edge& e : edges) {
      e2.push_back({id[static_cast<size_t>(e.src)], id[static_cast<size_t>(e.dst)]});
    }
    std::vector<double> t2(n);
    for (int v = 0; v < n; ++v)
      t2[static_cast<size_t>(id[static_cast<size_t>(v)])] = op_ms[static_cast<size_t>(v)];
    const Dag dag = Dag::Make(n, e2);
    const TableCosts costs(3, t2, transfer);
    // Devices follow the original labels so both runs map the same ops alike.
    std::vector<int> device_of(n);
    for (int v = 0; v < n; ++v) device_of[static_cast<size_t>(id[static_cast<size_t>(v)])] = v % 3;
    const MultiSchedule q = SingletonSchedule(3, device_of, PriorityOrder(dag, costs));
    const Timeline t = Evaluate(dag, costs, q);
    EXPECT_TRUE(t.acyclic) << t.problem;
    CheckTimeline(dag, costs, q, t);
    return t.latency_ms;
  };
  std::vector<OpId> same(n);
  std::iota(same.begin(), same.end(), 0);
  EXPECT_DOUBLE_EQ(latency(same), latency(relabel));
}

}  // namespace
}  // namespace ios::hios
