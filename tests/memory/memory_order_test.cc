#include "memory/memory_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>
#include <set>

#include "common/part_dag.h"
#include "coordinator/dp.h"
#include "tests/coordinator/wide_models.h"

namespace ios::memory {
namespace {

// Serenity's own model on a bare DAG: each operator's output of `bytes[u]`
// is allocated when it runs, while its inputs are still live, and freed once
// its last consumer has run; outputs of sinks stay to the end.
class PerNodeCosts : public OrderCosts {
 public:
  PerNodeCosts(const PartDag& dag, std::vector<int64_t> bytes)
      : dag_(dag), bytes_(std::move(bytes)) {}

  int operators() const override { return dag_.size(); }
  int64_t Background() const override { return 0; }
  int64_t Resident(uint64_t done) const override {
    int64_t sum = 0;
    for (int u = 0; u < dag_.size(); ++u) {
      if ((done & OpBit(u)) && (dag_.successors(u) == 0 || (dag_.successors(u) & ~done)))
        sum += bytes_[u];
    }
    return sum;
  }
  StepCost Step(uint64_t done, int64_t resident, int op) const override {
    StepCost step{resident + bytes_[op], resident + bytes_[op]};
    const uint64_t after = done | OpBit(op);
    for (uint64_t rest = dag_.predecessors(op); rest; rest &= rest - 1) {
      const int p = std::countr_zero(rest);
      if ((dag_.successors(p) & ~after) == 0) step.resident_after -= bytes_[p];
    }
    return step;
  }
  int64_t LowerBound() const override {
    int64_t bound = 0;
    for (int u = 0; u < dag_.size(); ++u) {
      int64_t need = bytes_[u];
      for (uint64_t rest = dag_.predecessors(u); rest; rest &= rest - 1)
        need += bytes_[std::countr_zero(rest)];
      bound = std::max(bound, need);
    }
    return bound;
  }

 private:
  const PartDag& dag_;
  std::vector<int64_t> bytes_;
};

// A graph of 1x1 convolutions, operators 1..n, each reading the sum of its
// producers (or the input); edges (from, to) with from < to.
Graph MakeGraph(int n, const std::vector<std::pair<int, int>>& edges) {
  Graph g;
  g.name = "dag";
  Node input{"in", "", {}, {}, {4, 2, 2}};
  input.op.kind = OpKind::kInput;
  g.nodes.push_back(input);
  for (int v = 1; v <= n; ++v) {
    Node node{"op" + std::to_string(v), "", {}, {}, {}};
    node.op.kind = OpKind::kConv;
    node.op.conv.out_channels = 4;
    node.op.conv.kernel = {1, 1};
    node.op.conv.stride = {1, 1};
    Term sum;
    for (const auto& [from, to] : edges) {
      if (to == v) sum.push_back({from, 0, 4});
    }
    if (sum.empty()) sum.push_back({0, 0, 4});
    node.inputs = {sum};
    g.nodes.push_back(node);
  }
  InferShapes(g);
  return g;
}

std::vector<NodeId> Ops(int n) {
  std::vector<NodeId> ops;
  for (int v = 1; v <= n; ++v) ops.push_back(v);
  return ops;
}

struct RandomCase {
  Graph graph;
  std::vector<int64_t> bytes;
};

RandomCase MakeRandomCase(std::mt19937& rng, int n, double density = 0.35) {
  std::vector<std::pair<int, int>> edges;
  std::bernoulli_distribution coin(density);
  for (int u = 1; u <= n; ++u) {
    for (int v = u + 1; v <= n; ++v) {
      if (coin(rng)) edges.emplace_back(u, v);
    }
  }
  std::uniform_int_distribution<int64_t> size(1, 20);
  std::vector<int64_t> bytes(static_cast<size_t>(n));
  for (int64_t& b : bytes) b = size(rng);
  return {MakeGraph(n, edges), bytes};
}

// The least peak over every topological order, by enumerating them all.
int64_t BruteForcePeak(const PartDag& dag, const OrderCosts& costs) {
  int64_t best = std::numeric_limits<int64_t>::max();
  std::vector<int> order;
  std::function<void(uint64_t)> extend = [&](uint64_t done) {
    if (done == dag.full()) {
      best = std::min(best, PeakOfOrder(costs, order));
      return;
    }
    for (uint64_t ready = dag.Ready(done); ready; ready &= ready - 1) {
      const int u = std::countr_zero(ready);
      order.push_back(u);
      extend(done | OpBit(u));
      order.pop_back();
    }
  };
  extend(0);
  return best;
}

int64_t DownSets(const PartDag& dag) {
  std::set<uint64_t> seen;
  std::function<void(uint64_t)> walk = [&](uint64_t done) {
    if (!seen.insert(done).second) return;
    for (uint64_t r = dag.Ready(done); r; r &= r - 1) walk(done | OpBit(std::countr_zero(r)));
  };
  walk(0);
  return static_cast<int64_t>(seen.size());
}

bool IsTopological(const PartDag& dag, const std::vector<int>& order) {
  uint64_t done = 0;
  for (int u : order) {
    if ((dag.predecessors(u) & ~done) != 0 || (done & OpBit(u))) return false;
    done |= OpBit(u);
  }
  return done == dag.full();
}

MemoryOrderOptions Deterministic(MemoryOrderOptions::Engine engine, int64_t states = 4'000'000) {
  MemoryOrderOptions options;
  options.engine = engine;
  options.step_seconds = 0;
  options.max_states_per_step = states;
  return options;
}

TEST(MemoryOrderTest, MatchesBruteForceOverAllTopologicalOrders) {
  std::mt19937 rng(2024);
  for (int n = 1; n <= 8; ++n) {
    for (int trial = 0; trial < 12; ++trial) {
      const RandomCase c = MakeRandomCase(rng, n);
      const std::vector<NodeId> ops = Ops(n);
      const PartDag dag = PartDag::Make(c.graph, ops);
      const PerNodeCosts costs(dag, c.bytes);
      const int64_t expected = BruteForcePeak(dag, costs);
      for (auto engine :
           {MemoryOrderOptions::Engine::kBudgeted, MemoryOrderOptions::Engine::kBestFirst}) {
        const PartOrder got = OptimalPartOrder(dag, costs, Deterministic(engine));
        SCOPED_TRACE("n=" + std::to_string(n) + " trial=" + std::to_string(trial));
        EXPECT_TRUE(got.exact) << got.why;
        EXPECT_EQ(got.peak, expected);
        ASSERT_TRUE(IsTopological(dag, got.ops));
        EXPECT_EQ(PeakOfOrder(costs, got.ops), got.peak);
      }
    }
  }
}

// x -> A1(8) -> A2(1) and x -> B1(8) -> B2(1), J reads A2 and B2. Kahn runs
// both big ones before either small one (A2 beside A1 and B1: 17); finishing
// one branch first peaks when B2 runs beside B1 and A2 (10).
TEST(MemoryOrderTest, DepthFirstBeatsKahnOnTwoBigThenSmallBranches) {
  const Graph g = MakeGraph(5, {{1, 3}, {2, 4}, {3, 5}, {4, 5}});
  const std::vector<NodeId> ops = Ops(5);  // op1 = A1, op2 = B1, op3 = A2, op4 = B2, op5 = J
  const PartDag dag = PartDag::Make(g, ops);
  const PerNodeCosts costs(dag, {8, 8, 1, 1, 1});
  EXPECT_EQ(KahnOrder(dag), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(PeakOfOrder(costs, KahnOrder(dag)), 17);
  const PartOrder best = OptimalPartOrder(dag, costs, Deterministic({}));
  EXPECT_TRUE(best.exact);
  EXPECT_EQ(best.peak, 10);
}

// Whatever the state budget, a result marked exact is the optimum and a
// fallback says so and reports its own order's true peak.
TEST(MemoryOrderTest, AnySolutionFoundIsOptimalAndNoneBelowTheOptimum) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 30; ++trial) {
    const RandomCase c = MakeRandomCase(rng, 9);
    const std::vector<NodeId> ops = Ops(9);
    const PartDag dag = PartDag::Make(c.graph, ops);
    const PerNodeCosts costs(dag, c.bytes);
    const int64_t optimum = BruteForcePeak(dag, costs);
    const PartOrder exact = OptimalPartOrder(dag, costs, Deterministic({}));
    EXPECT_EQ(exact.peak, optimum);
    for (int64_t states : {2, 5, 20, 100}) {
      const PartOrder limited = OptimalPartOrder(dag, costs, Deterministic({}, states));
      if (limited.exact) {
        EXPECT_EQ(limited.peak, optimum);
      } else {
        EXPECT_GE(limited.peak, optimum);
        EXPECT_NE(limited.why.find("memory order:"), std::string::npos);
        EXPECT_EQ(PeakOfOrder(costs, limited.ops), limited.peak);
      }
    }
  }
}

// Down-sets are the IOS DP's states: with one operator per stage the IOS
// walk reaches every one, and so does the memory order without a threshold.
TEST(MemoryOrderTest, VisitsExactlyTheStatesOfTheIosSpaceWithOneOperatorStages) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 20; ++trial) {
    const RandomCase c = MakeRandomCase(rng, 10);
    const std::vector<NodeId> ops = Ops(10);
    const PartDag dag = PartDag::Make(c.graph, ops);
    coordinator::DpOptions options;
    options.max_group_size = 1;
    options.max_groups = 1;
    options.strategies = coordinator::StrategySet::kParallel;
    const auto space = coordinator::PartSpace::Enumerate(c.graph, ops, options);
    EXPECT_EQ(space.state_count() + 1, DownSets(dag));
  }
}

// The paper's adaptive soft budget: a first threshold (the better known
// order's peak) whose step runs out of states is lowered, and a lower one
// that fits the budget still finds the optimum.
TEST(MemoryOrderTest, LowersTheThresholdAfterAStepOverBudgetAndStillFindsTheOptimum) {
  std::mt19937 rng(31);
  int recovered = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const RandomCase c = MakeRandomCase(rng, 14, 0.15);
    const std::vector<NodeId> ops = Ops(14);
    const PartDag dag = PartDag::Make(c.graph, ops);
    const PerNodeCosts costs(dag, c.bytes);
    // Too many orders to enumerate: the best-first engine, checked against
    // enumeration above, is the oracle.
    const int64_t optimum =
        OptimalPartOrder(dag, costs, Deterministic(MemoryOrderOptions::Engine::kBestFirst)).peak;
    // On random DAGs the prefixes under the optimum still reach most
    // down-sets (a quarter of them is too few budget for every one of 40).
    const PartOrder limited =
        OptimalPartOrder(dag, costs, Deterministic({}, DownSets(dag) * 3 / 4));
    if (!limited.exact) continue;
    EXPECT_EQ(limited.peak, optimum);
    if (limited.steps > 1) ++recovered;
  }
  EXPECT_GT(recovered, 0);
}

TEST(MemoryOrderTest, FallsBackToTheBetterKnownOrderWhenEveryStepIsOverBudget) {
  const Graph g = coordinator::testing::WideBlock(24, 2);
  std::vector<NodeId> ops = g.blocks[0].Operators();
  ops.erase(std::remove(ops.begin(), ops.end(), g.blocks[0].exit), ops.end());
  const PartDag dag = PartDag::Make(g, ops);
  const PerNodeCosts costs(dag, std::vector<int64_t>(ops.size(), 8));
  const PartOrder got = OptimalPartOrder(dag, costs, Deterministic({}, 50));
  EXPECT_FALSE(got.exact);
  EXPECT_NE(got.why.find("over its state or time budget"), std::string::npos) << got.why;
  ASSERT_TRUE(IsTopological(dag, got.ops));
  EXPECT_EQ(got.peak, std::min(PeakOfOrder(costs, KahnOrder(dag)),
                               PeakOfOrder(costs, GreedyMemoryOrder(dag, costs))));
}

TEST(MemoryOrderTest, RefusesACostModelOfAnotherSize) {
  const Graph g = MakeGraph(3, {{1, 2}});
  const std::vector<NodeId> ops = Ops(3);
  const PartDag dag = PartDag::Make(g, ops);
  const PartDag smaller = PartDag::Make(g, std::vector<NodeId>{1, 2});
  const PerNodeCosts costs(smaller, {1, 1});
  EXPECT_THROW(OptimalPartOrder(dag, costs), Error);
}

}  // namespace
}  // namespace ios::memory
