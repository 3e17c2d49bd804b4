#include "hios/mr.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "hios/schedule.h"

namespace ios::hios {
namespace {

double Evaluated(const Dag& dag, const Costs& costs, const std::vector<int>& device_of) {
  const MultiSchedule q = SingletonSchedule(costs.devices(), device_of, PriorityOrder(dag, costs));
  const Timeline t = Evaluate(dag, costs, q);
  EXPECT_TRUE(t.acyclic) << t.problem;
  if (t.acyclic) CheckTimeline(dag, costs, q, t);
  return t.latency_ms;
}

TEST(MrTest, WaitsForItsLatestPredecessor) {
  // 2 needs 0 (short) and 1 (long). Order by priority: 1, 0, 2. Best: 1 on
  // device 0, 0 on device 1, 2 after 1 on device 0 at 10 (0's result
  // arrives at 1.5). Waiting only for the first predecessor listed (0)
  // would start 2 at 1.5 and report 2.5.
  const Dag dag = Dag::Make(3, {{0, 2}, {1, 2}});
  const TableCosts costs(2, {1, 10, 1}, {0.5, 0.5});
  const RecordedMapping r = MapByRecording(dag, costs);
  EXPECT_DOUBLE_EQ(r.makespan_ms, 11);
  EXPECT_EQ(r.device_of[1], r.device_of[2]);
  EXPECT_DOUBLE_EQ(Evaluated(dag, costs, r.device_of), 11);
}

TEST(MrTest, SpreadsIndependentWork) {
  // 0 -> {1, 2} -> 3: 1 on device 0 finishes at 11, 2 on device 1 at 11.5;
  // 3 is best after 2 on device 1 (1's result arrives at 11.5 too).
  const Dag dag = Dag::Make(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  const RecordedMapping r =
      MapByRecording(dag, TableCosts(2, {1, 10, 10, 1}, {0.5, 0.5, 0.5, 0.5}));
  EXPECT_NE(r.device_of[1], r.device_of[2]);
  EXPECT_DOUBLE_EQ(r.makespan_ms, 12.5);
}

TEST(MrTest, RecordsTheChainWhereTheOperatorFinishesEarliestAsThePaperDoes) {
  // Alg. 3 line 20 keeps, per (op, device), the chain where the op itself
  // finishes first. With dear transfers that drops the one-device chain:
  // op 2 on device 0 after op 1 went to device 1 finishes at 11 (against 21),
  // so op 3 must wait for 1's result (61 + 50) or run on device 1 (62). One
  // device alone takes 22: hios.h compares with it.
  const Dag dag = Dag::Make(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  const RecordedMapping r = MapByRecording(dag, TableCosts(2, {1, 10, 10, 1}, {50, 50, 50, 50}));
  EXPECT_DOUBLE_EQ(r.makespan_ms, 62);
}

TEST(MrTest, ItsTableEqualsTheEvaluatorOnTheChosenMapping) {
  std::mt19937 rng(3);
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<Edge> edges;
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (rng() % 4 == 0) edges.push_back(rng() % 2 ? Edge{a, b} : Edge{b, a});
      }
    }
    // Orient every edge from the smaller rank of a random permutation: a DAG
    // whose ids are not topological.
    std::vector<int> rank(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) rank[static_cast<size_t>(i)] = i;
    std::shuffle(rank.begin(), rank.end(), rng);
    for (Edge& e : edges) {
      if (rank[static_cast<size_t>(e.src)] > rank[static_cast<size_t>(e.dst)])
        std::swap(e.src, e.dst);
    }
    std::vector<double> t(static_cast<size_t>(n)), w(edges.size());
    for (double& x : t) x = 0.1 + static_cast<double>(rng() % 400) / 100;
    for (double& x : w) x = static_cast<double>(rng() % 300) / 100;
    const Dag dag = Dag::Make(n, edges);
    const TableCosts costs(1 + static_cast<int>(rng() % 4), t, w);
    const RecordedMapping r = MapByRecording(dag, costs);
    ASSERT_EQ(std::count(r.device_of.begin(), r.device_of.end(), -1), 0);
    EXPECT_NEAR(Evaluated(dag, costs, r.device_of), r.makespan_ms, 1e-9) << "round " << round;
  }
}

}  // namespace
}  // namespace ios::hios
