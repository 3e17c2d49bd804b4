#include "hios/lp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "hios/schedule.h"

namespace ios::hios {
namespace {

std::vector<int> Unmapped(int n) { return std::vector<int>(static_cast<size_t>(n), -1); }

Path LongestOf(const Dag& dag, const Costs& costs, const std::vector<int>& device_of) {
  return LongestValidPath(dag, costs, device_of, PriorityOrder(dag, costs));
}

TEST(LongestPathTest, FirstPathIsTheCriticalPathCountingItsFirstVertex) {
  // 0 -> 1 -> 3 and 0 -> 2 -> 3; every edge weighs 1 between devices.
  const Dag dag = Dag::Make(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  const TableCosts costs(2, {1, 5, 2, 1}, {1, 1, 1, 1});
  const Path path = LongestOf(dag, costs, Unmapped(4));
  EXPECT_EQ(path.ops, (std::vector<OpId>{0, 1, 3}));
  EXPECT_DOUBLE_EQ(path.length_ms, 1 + 5 + 1 + 2);  // three ops, two edges
}

TEST(LongestPathTest, RejectsAPathWhoseMiddleTouchesAMappedOperator) {
  // Chain 0 -> 1 -> 2 -> 3 and 1 -> 4 with 4 mapped: 1 may end or start a
  // path, never sit inside one, so 0 1 2 3 (length 19) is not valid.
  const Dag dag = Dag::Make(5, {{0, 1}, {1, 2}, {2, 3}, {1, 4}});
  const TableCosts costs(2, {10, 1, 1, 1, 1}, {1, 1, 1, 1});
  std::vector<int> device_of = Unmapped(5);
  device_of[4] = 0;
  const Path path = LongestOf(dag, costs, device_of);
  EXPECT_EQ(path.ops, (std::vector<OpId>{0, 1}));
  EXPECT_DOUBLE_EQ(path.length_ms, 10 + 1 + 1 + 1);  // 0, 1, edge 0->1, boundary 1->4
}

TEST(LongestPathTest, IncludesTheBoundaryEdgesToMappedOperators) {
  const Dag dag = Dag::Make(4, {{0, 1}, {1, 2}, {2, 3}});
  const TableCosts costs(2, {1, 1, 1, 1}, {5, 5, 5});
  std::vector<int> device_of = Unmapped(4);
  device_of[0] = 0;
  device_of[3] = 1;
  const Path path = LongestOf(dag, costs, device_of);
  EXPECT_EQ(path.ops, (std::vector<OpId>{1, 2}));
  EXPECT_DOUBLE_EQ(path.length_ms, 1 + 1 + 5 + 5 + 5);
}

TEST(LongestPathTest, NearTiesThatRoundingWouldMergeStillGiveOnePath) {
  // The reference rounds slack to integers: 10.4 and 10.0 both look
  // critical and their union is not a path. Ours keeps the longer branch.
  const Dag dag = Dag::Make(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  const TableCosts costs(4, {0.3, 10.4, 10.0, 0.3}, {0.2, 0.2, 0.2, 0.2});
  const Path path = LongestOf(dag, costs, Unmapped(4));
  EXPECT_EQ(path.ops, (std::vector<OpId>{0, 1, 3}));
}

TEST(LongestPathTest, OnePathPerOperatorWhenEveryNeighbourIsMapped) {
  const Dag dag = Dag::Make(3, {{0, 1}, {1, 2}});
  const TableCosts costs(2, {1, 2, 3}, {4, 8});
  const Path path = LongestOf(dag, costs, {0, -1, 1});
  EXPECT_EQ(path.ops, (std::vector<OpId>{1}));
  EXPECT_DOUBLE_EQ(path.length_ms, 2 + 4 + 8);
  EXPECT_TRUE(LongestOf(dag, costs, {0, 0, 1}).ops.empty());
}

// Every valid path by enumeration: the oracle for random cases.
double BruteForceLongest(const Dag& dag, const Costs& costs, const std::vector<int>& device_of) {
  auto mapped = [&](OpId v) { return device_of[static_cast<size_t>(v)] >= 0; };
  auto touches_mapped = [&](OpId v) {
    for (EdgeId e : dag.in_edges(v)) {
      if (mapped(dag.edge(e).src)) return true;
    }
    for (EdgeId e : dag.out_edges(v)) {
      if (mapped(dag.edge(e).dst)) return true;
    }
    return false;
  };
  auto boundary = [&](OpId v, bool in) {
    double w = 0;
    for (EdgeId e : in ? dag.in_edges(v) : dag.out_edges(v)) {
      if (mapped(in ? dag.edge(e).src : dag.edge(e).dst))
        w = std::max(w, costs.TransferMs(e, 0, 1));
    }
    return w;
  };
  double best = -1;
  // Extend from `v`, `length` counting everything up to v (not its out boundary).
  std::function<void(OpId, double, bool)> walk = [&](OpId v, double length, bool first) {
    best = std::max(best, length + boundary(v, false));
    if (!first && touches_mapped(v)) return;  // it would sit inside the path
    for (EdgeId e : dag.out_edges(v)) {
      const OpId w = dag.edge(e).dst;
      if (!mapped(w)) walk(w, length + costs.TransferMs(e, 0, 1) + costs.OpMs(w, 0), false);
    }
  };
  for (OpId v = 0; v < dag.ops(); ++v) {
    if (!mapped(v)) walk(v, costs.OpMs(v, 0) + boundary(v, true), true);
  }
  return best;
}

TEST(LongestPathTest, MatchesEnumerationOfEveryValidPathOnRandomDags) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const int n = 2 + static_cast<int>(rng() % 9);
    std::vector<Edge> edges;
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (rng() % 3 == 0) edges.push_back({a, b});
      }
    }
    std::vector<double> t(static_cast<size_t>(n)), w(edges.size());
    for (double& x : t) x = 1 + static_cast<double>(rng() % 1000) / 100;
    for (double& x : w) x = static_cast<double>(rng() % 500) / 100;
    const Dag dag = Dag::Make(n, edges);
    const TableCosts costs(2, t, w);
    std::vector<int> device_of = Unmapped(n);
    for (int& d : device_of) d = rng() % 3 == 0 ? 0 : -1;
    if (std::count(device_of.begin(), device_of.end(), -1) == 0) device_of[0] = -1;
    const Path path = LongestOf(dag, costs, device_of);
    ASSERT_FALSE(path.ops.empty()) << "round " << round;
    // A real path of unmapped ops with the reported length.
    double length = 0;
    for (size_t i = 0; i < path.ops.size(); ++i) {
      const OpId v = path.ops[i];
      ASSERT_EQ(device_of[static_cast<size_t>(v)], -1);
      length += t[static_cast<size_t>(v)];
      if (i == 0) continue;
      bool joined = false;
      for (EdgeId e : dag.in_edges(v)) {
        if (dag.edge(e).src == path.ops[i - 1]) joined = true, length += w[static_cast<size_t>(e)];
      }
      ASSERT_TRUE(joined) << "round " << round << ": no edge into " << v;
    }
    EXPECT_NEAR(path.length_ms, BruteForceLongest(dag, costs, device_of), 1e-9)
        << "round " << round;
    EXPECT_GE(path.length_ms, length - 1e-9);
  }
}

// Two chains 1 -> 2 and 3 -> 4 between a source 0 and a sink 5.
Dag TwoChains() { return Dag::Make(6, {{0, 1}, {1, 2}, {2, 5}, {0, 3}, {3, 4}, {4, 5}}); }

TEST(LpTest, PutsTwoIndependentChainsOnTwoDevices) {
  const Dag dag = TwoChains();
  const TableCosts costs(2, {1, 10, 10, 10, 10, 1}, std::vector<double>(6, 0.5));
  const std::vector<int> dev = MapLongestPaths(dag, costs);
  EXPECT_EQ(dev[1], dev[2]);
  EXPECT_EQ(dev[3], dev[4]);
  EXPECT_NE(dev[1], dev[3]);
  const Timeline t = Evaluate(dag, costs, SingletonSchedule(2, dev, PriorityOrder(dag, costs)));
  EXPECT_DOUBLE_EQ(t.latency_ms, 1 + 0.5 + 20 + 0.5 + 1);
}

TEST(LpTest, KeepsEverythingOnOneDeviceWhenTransfersDominate) {
  const Dag dag = TwoChains();
  const TableCosts costs(2, {1, 10, 10, 10, 10, 1}, std::vector<double>(6, 100));
  const std::vector<int> dev = MapLongestPaths(dag, costs);
  EXPECT_EQ(std::count(dev.begin(), dev.end(), dev[0]), 6);
}

TEST(LpTest, MapsEveryOperatorOfRandomDagsToAValidSchedule) {
  std::mt19937 rng(11);
  for (int round = 0; round < 100; ++round) {
    const int n = 1 + static_cast<int>(rng() % 30);
    std::vector<Edge> edges;
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (rng() % 5 == 0) edges.push_back({b, a});  // ids against the order
      }
    }
    std::vector<double> t(static_cast<size_t>(n)), w(edges.size());
    for (double& x : t) x = 0.1 + static_cast<double>(rng() % 400) / 100;
    for (double& x : w) x = static_cast<double>(rng() % 300) / 100;
    const Dag dag = Dag::Make(n, edges);
    const TableCosts costs(1 + static_cast<int>(rng() % 4), t, w);
    const std::vector<int> dev = MapLongestPaths(dag, costs);
    ASSERT_EQ(std::count(dev.begin(), dev.end(), -1), 0) << "round " << round;
    const MultiSchedule q = SingletonSchedule(costs.devices(), dev, PriorityOrder(dag, costs));
    const Timeline timeline = Evaluate(dag, costs, q);
    ASSERT_TRUE(timeline.acyclic) << timeline.problem;
    EXPECT_NO_THROW(CheckTimeline(dag, costs, q, timeline));
  }
}

}  // namespace
}  // namespace ios::hios
