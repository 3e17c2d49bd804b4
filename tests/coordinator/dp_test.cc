#include "coordinator/dp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "common/error.h"

namespace ios::coordinator {
namespace {

// A graph of 1x1 convolutions on a 8x8 map: `edges` are (from, to) in
// operator numbering 1..n; operators without a producer read the input.
// Convs that read the same producer are mergeable.
Graph MakeDag(int n, const std::vector<std::pair<int, int>>& edges) {
  Graph g;
  g.name = "dag";
  Node input{"in", "", {}, {}, {8, 8, 8}};
  input.op.kind = OpKind::kInput;
  g.nodes.push_back(input);
  for (int v = 1; v <= n; ++v) {
    Node node{"op" + std::to_string(v), "", {}, {}, {}};
    node.op.kind = OpKind::kConv;
    node.op.conv.out_channels = 8;
    node.op.conv.kernel = {1, 1};
    node.op.conv.stride = {1, 1};
    for (const auto& [from, to] : edges) {
      if (to == v) node.inputs.push_back({{from, 0, 8}});
    }
    if (node.inputs.empty()) node.inputs.push_back({{0, 0, 8}});
    if (node.inputs.size() > 1) {  // several producers: sum them instead of concatenating
      Term sum;
      for (const Term& t : node.inputs) sum.push_back(t[0]);
      node.inputs = {sum};
    }
    g.nodes.push_back(node);
  }
  Block block{0, {}, n, {}};
  for (int v = 1; v < n; ++v) block.inner.push_back(v);
  g.blocks.push_back(block);
  InferShapes(g);
  return g;
}

std::vector<NodeId> AllOps(const Graph& g) { return g.blocks[0].Operators(); }

// A made-up latency for a stage: deterministic in its strategy and set.
double FakeLatency(const Stage& stage, uint64_t seed) {
  std::vector<NodeId> ops;
  for (const auto& group : stage.groups) ops.insert(ops.end(), group.begin(), group.end());
  std::sort(ops.begin(), ops.end());
  uint64_t h =
      seed * 0x9e3779b97f4a7c15ULL + (stage.strategy == Strategy::kMerge && ops.size() > 1);
  for (NodeId id : ops) h = (h ^ static_cast<uint64_t>(id)) * 0x100000001b3ULL;
  h ^= h >> 29;
  return 0.1 + static_cast<double>(h % 1000) / 100.0;
}

// A made-up value of running `ending` after `before`: depends on both.
int64_t FakeValue(uint64_t before, uint64_t ending) {
  uint64_t h = (before * 0x9e3779b97f4a7c15ULL) ^ (ending * 0xc2b2ae3d27d4eb4fULL);
  h ^= h >> 31;
  return static_cast<int64_t>(h % 40);
}

// Reference: every valid ending checked straight from the definitions, and
// every schedule walked without memoisation.
class BruteForce {
 public:
  BruteForce(const Graph& g, const DpOptions& o, uint64_t seed) : g_(g), o_(o), seed_(seed) {
    n_ = g.OperatorCount();
    succ_.assign(n_, 0);
    for (int v = 0; v < n_; ++v) {
      for (const Term& t : g.node(v + 1).inputs) {
        for (const Slice& s : t) {
          if (s.producer > 0) succ_[s.producer - 1] |= uint64_t{1} << v;
        }
      }
    }
    closure_.assign(n_, 0);
    for (int u = n_ - 1; u >= 0; --u) {
      closure_[u] = uint64_t{1} << u;
      for (int v = 0; v < n_; ++v) {
        if (succ_[u] >> v & 1) closure_[u] |= closure_[v];
      }
    }
  }

  // The least latency from `state` over schedules whose every stage has
  // FakeValue(before, ending) <= cap (infinity when none).
  double WalkWithin(uint64_t state, int64_t cap) {
    if (state == 0) return 0.0;
    double best = INFINITY;
    for (uint64_t e = state; e; e = (e - 1) & state) {
      if (FakeValue(state & ~e, e) > cap) continue;
      for (const Stage& stage : EndingStages(state, e)) {
        best = std::min(best, WalkWithin(state & ~e, cap) + FakeLatency(stage, seed_));
      }
    }
    return best;
  }

  // (best latency, number of schedules) from `state`.
  std::pair<double, double> Walk(uint64_t state) {
    if (state == 0) return {0.0, 1.0};
    double best = INFINITY, count = 0;
    for (uint64_t e = state; e; e = (e - 1) & state) {
      for (const Stage& stage : EndingStages(state, e)) {
        auto [rest, paths] = Walk(state & ~e);
        best = std::min(best, rest + FakeLatency(stage, seed_));
        count += paths;
      }
    }
    return {best, count};
  }

 private:
  std::vector<Stage> EndingStages(uint64_t state, uint64_t e) {
    std::vector<Stage> stages;
    for (int u = 0; u < n_; ++u) {  // nothing in e may feed the rest of the state
      if ((e >> u & 1) && (succ_[u] & state & ~e)) return stages;
    }
    std::vector<NodeId> ids;
    for (int u = 0; u < n_; ++u) {
      if (e >> u & 1) ids.push_back(u + 1);
    }
    if (o_.strategies != StrategySet::kParallel) {
      bool all_sinks = true;
      for (int u = 0; u < n_; ++u) {
        if ((e >> u & 1) && (succ_[u] & state)) all_sinks = false;
      }
      if (all_sinks && CanMerge(g_, ids)) {
        Stage s{Strategy::kMerge, {}};
        for (NodeId id : ids) s.groups.push_back({id});
        stages.push_back(s);
      }
    }
    if (o_.strategies != StrategySet::kMerge) {
      Stage s{Strategy::kParallel, {}};
      uint64_t covered = 0;
      bool ok = true;
      for (int u = 0; u < n_ && ok; ++u) {
        if (!(e >> u & 1)) continue;
        bool head = true;
        for (int v = 0; v < n_; ++v) {
          if (v != u && (e >> v & 1) && (closure_[v] >> u & 1)) head = false;
        }
        if (!head) continue;
        const uint64_t group = closure_[u] & state;
        if ((group & covered) || std::popcount(group) > o_.max_group_size) ok = false;
        covered |= group;
        std::vector<NodeId> members;
        for (int v = 0; v < n_; ++v) {
          if (group >> v & 1) members.push_back(v + 1);
        }
        s.groups.push_back(members);
      }
      if (ok && covered == e && static_cast<int>(s.groups.size()) <= o_.max_groups) {
        stages.push_back(s);
      }
    }
    return stages;
  }

  const Graph& g_;
  DpOptions o_;
  uint64_t seed_;
  int n_;
  std::vector<uint64_t> succ_, closure_;
};

std::vector<std::pair<int, int>> RandomDagEdges(int n, std::mt19937& rng, double density) {
  std::vector<std::pair<int, int>> edges;
  std::bernoulli_distribution coin(density);
  for (int u = 1; u <= n; ++u) {
    for (int v = u + 1; v <= n; ++v) {
      if (coin(rng)) edges.emplace_back(u, v);
    }
  }
  return edges;
}

struct DpCase {
  StrategySet strategies;
  int r, s;
};

class DpBruteForceTest : public ::testing::TestWithParam<DpCase> {};

TEST_P(DpBruteForceTest, MatchesBruteForceOnRandomSmallGraphs) {
  std::mt19937 rng(12345);
  const DpCase& c = GetParam();
  DpOptions options{c.r, c.s, c.strategies};
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + trial % 6;
    const Graph g = MakeDag(n, RandomDagEdges(n, rng, trial % 3 == 0 ? 0.2 : 0.45));
    const PartSpace space = PartSpace::Enumerate(g, AllOps(g), options);
    std::vector<double> latency;
    for (int i = 0; i < space.stage_count(); ++i) {
      latency.push_back(FakeLatency(space.stage(i), trial));
    }
    const auto solution = space.Solve(latency);
    BruteForce brute(g, options, trial);
    const auto [best, count] = brute.Walk((uint64_t{1} << n) - 1);
    EXPECT_NEAR(solution.latency_ms, best, 1e-9) << "trial " << trial;
    EXPECT_DOUBLE_EQ(space.schedule_count(), count) << "trial " << trial;
    // The returned sequence is a real schedule with that latency.
    double total = 0;
    std::vector<bool> done(n + 1, false);
    for (int s : solution.stage_sequence) {
      total += latency[s];
      const Stage stage = space.stage(s);
      for (const auto& group : stage.groups) {
        for (NodeId id : group) {
          for (const Term& t : g.node(id).inputs) {
            for (const Slice& sl : t) {
              bool same_stage = false;
              for (const auto& gg : stage.groups) {
                same_stage |= std::find(gg.begin(), gg.end(), sl.producer) != gg.end();
              }
              EXPECT_TRUE(sl.producer == 0 || done[sl.producer] || same_stage);
            }
          }
        }
      }
      for (const auto& group : stage.groups) {
        for (NodeId id : group) done[id] = true;
      }
    }
    EXPECT_NEAR(total, best, 1e-9);
    EXPECT_EQ(std::count(done.begin() + 1, done.end(), true), n);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, DpBruteForceTest,
    ::testing::Values(DpCase{StrategySet::kParallel, 64, 64}, DpCase{StrategySet::kParallel, 2, 2},
                      DpCase{StrategySet::kParallel, 1, 3}, DpCase{StrategySet::kMerge, 64, 64},
                      DpCase{StrategySet::kBoth, 64, 64}, DpCase{StrategySet::kBoth, 3, 8}));

// The capped DP, the least value and the front against walking every
// schedule: for each distinct cap, the least latency of the schedules whose
// every stage is under it.
TEST_P(DpBruteForceTest, SolveWithinAndTheFrontMatchBruteForceUnderEveryCap) {
  std::mt19937 rng(777);
  const DpCase& c = GetParam();
  DpOptions options{c.r, c.s, c.strategies};
  for (int trial = 0; trial < 25; ++trial) {
    const int n = 2 + trial % 5;
    const Graph g = MakeDag(n, RandomDagEdges(n, rng, trial % 3 == 0 ? 0.2 : 0.45));
    const PartSpace space = PartSpace::Enumerate(g, AllOps(g), options);
    std::vector<double> latency;
    for (int i = 0; i < space.stage_count(); ++i) {
      latency.push_back(FakeLatency(space.stage(i), trial));
    }
    const std::vector<int64_t> values = space.TransitionValues(FakeValue);
    BruteForce brute(g, options, trial);
    const uint64_t full = (uint64_t{1} << n) - 1;
    std::vector<PartSpace::FrontPoint> expected;
    int64_t least = std::numeric_limits<int64_t>::max();
    for (int64_t cap = 0; cap < 40; ++cap) {
      const double best = brute.WalkWithin(full, cap);
      const auto got = space.SolveWithin(latency, values, cap);
      if (best == INFINITY) {
        ASSERT_EQ(got.latency_ms, INFINITY) << "trial " << trial << " cap " << cap;
        continue;
      }
      ASSERT_NEAR(got.latency_ms, best, 1e-9) << "trial " << trial << " cap " << cap;
      least = std::min(least, cap);
      if (expected.empty() || best < expected.back().solution.latency_ms - 1e-9) {
        expected.push_back({cap, got});
      }
      // The space restricted to the transitions under the cap solves alike.
      const PartSpace restricted = space.Restricted(
          [cap](uint64_t before, uint64_t ending) { return FakeValue(before, ending) <= cap; });
      std::vector<double> restricted_latency;
      for (int i = 0; i < restricted.stage_count(); ++i) {
        restricted_latency.push_back(FakeLatency(restricted.stage(i), trial));
      }
      EXPECT_NEAR(restricted.Solve(restricted_latency).latency_ms, best, 1e-9);
      EXPECT_LE(restricted.stage_count(), space.stage_count());
      // The schedule returned is under the cap, replayed stage by stage.
      uint64_t before = 0;
      for (int s : got.stage_sequence) {
        uint64_t ending = 0;
        for (const auto& group : space.stage(s).groups) {
          for (NodeId id : group) ending |= uint64_t{1} << (id - 1);
        }
        EXPECT_LE(FakeValue(before, ending), cap);
        before |= ending;
      }
    }
    EXPECT_EQ(space.LeastValue(values), least) << "trial " << trial;
    const auto front = space.Front(latency, values);
    ASSERT_EQ(front.size(), expected.size()) << "trial " << trial;
    for (size_t i = 0; i < front.size(); ++i) {
      EXPECT_EQ(front[i].value, expected[i].value);
      EXPECT_NEAR(front[i].solution.latency_ms, expected[i].solution.latency_ms, 1e-9);
    }
  }
}

TEST(PartSpaceTest, ASequenceSpaceHasOneScheduleAndRefusesABadOrder) {
  const Graph g = MakeDag(4, {{1, 2}, {1, 3}, {2, 4}, {3, 4}});
  const PartSpace space = PartSpace::Sequence(g, AllOps(g), {0, 2, 1, 3});
  EXPECT_EQ(space.schedule_count(), 1.0);
  ASSERT_EQ(space.stage_count(), 4);
  const auto solution = space.Solve({1, 2, 4, 8});
  EXPECT_EQ(solution.latency_ms, 15);
  EXPECT_EQ(solution.stage_sequence, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(space.stage(1).groups, (std::vector<std::vector<NodeId>>{{3}}));
  EXPECT_THROW(PartSpace::Sequence(g, AllOps(g), {1, 0, 2, 3}), Error);  // 2 before 1
  EXPECT_THROW(PartSpace::Sequence(g, AllOps(g), {0, 1, 2}), Error);     // 4 left out
}

TEST(EndingEnumerationTest, DiamondHasTheExpectedEndings) {
  // 1 -> {2, 3} -> 4.
  const Graph g = MakeDag(4, {{1, 2}, {1, 3}, {2, 4}, {3, 4}});
  DpOptions options{3, 8, StrategySet::kParallel};
  const PartSpace space = PartSpace::Enumerate(g, AllOps(g), options);
  // States: {1234}, {123}, {12}, {13}, {1}. Endings: {1234} -> {4}, [2 4],
  // [3 4]; {123} -> {2}, {3}, [2]|[3], [1 2 3]; {12} -> {2}, [1 2];
  // {13} -> {3}, [1 3]; {1} -> {1}. Schedules: 6 + 2 + 2 = 10.
  EXPECT_EQ(space.state_count(), 5);
  EXPECT_EQ(space.transition_count(), 3 + 4 + 2 + 2 + 1);
  EXPECT_EQ(space.width(), 2);
  EXPECT_EQ(space.schedule_count(), 10.0);
}

TEST(EndingEnumerationTest, GroupSizeLimitPrunesLongGroups) {
  const Graph chain = MakeDag(4, {{1, 2}, {2, 3}, {3, 4}});
  const PartSpace unpruned =
      PartSpace::Enumerate(chain, AllOps(chain), {64, 64, StrategySet::kParallel});
  const PartSpace pruned =
      PartSpace::Enumerate(chain, AllOps(chain), {1, 64, StrategySet::kParallel});
  EXPECT_EQ(unpruned.schedule_count(), 8.0);  // compositions of 4
  EXPECT_EQ(pruned.schedule_count(), 1.0);    // one op per stage only
  EXPECT_EQ(pruned.transition_count(), 4);
}

TEST(MergeRuleTest, OnlySinkConvsOfOneInputMerge) {
  // Three 1x1 convs reading the input: mergeable in any combination.
  Graph g = MakeDag(3, {});
  EXPECT_TRUE(CanMerge(g, {1, 2, 3}));
  // A different stride breaks it.
  g.nodes[3].op.conv.stride = {2, 2};
  InferShapes(g);
  EXPECT_FALSE(CanMerge(g, {1, 3}));
  EXPECT_TRUE(CanMerge(g, {1, 2}));
  // Different activation, grouped convs and different inputs break it too.
  Graph act = MakeDag(2, {});
  act.nodes[2].op.conv.act = Activation::kRelu;
  EXPECT_FALSE(CanMerge(act, {1, 2}));
  Graph grouped = MakeDag(2, {});
  grouped.nodes[1].op.conv.groups = 2;
  InferShapes(grouped);
  EXPECT_FALSE(CanMerge(grouped, {1, 2}));
  const Graph chained = MakeDag(3, {{1, 2}});
  EXPECT_FALSE(CanMerge(chained, {2, 3}));
  EXPECT_TRUE(CanMerge(chained, {2}));  // a single operator always is
}

TEST(MergeRuleTest, MergeStrategyEnumeratesEverySinkSubset) {
  const Graph g = MakeDag(3, {});
  const PartSpace space = PartSpace::Enumerate(g, AllOps(g), {3, 8, StrategySet::kMerge});
  // From {1,2,3}: 7 subsets; from each pair: 3; from singletons: 1.
  EXPECT_EQ(space.transition_count(), 7 + 3 * 3 + 3 * 1);
  std::vector<double> latency;
  for (int i = 0; i < space.stage_count(); ++i) {
    latency.push_back(space.stage(i).groups.size() == 3 ? 1.0 : 5.0);
  }
  const auto best = space.Solve(latency);
  ASSERT_EQ(best.stage_sequence.size(), 1u);
  EXPECT_EQ(space.stage(best.stage_sequence[0]).strategy, Strategy::kMerge);
}

TEST(BaselineTest, SequentialAndGreedyCoverEveryOperatorInOrder) {
  const Graph g = MakeDag(4, {{1, 2}, {1, 3}, {2, 4}, {3, 4}});
  const auto seq = SequentialSchedule(AllOps(g));
  EXPECT_EQ(seq.size(), 4u);
  const auto greedy = GreedySchedule(g, AllOps(g));
  ASSERT_EQ(greedy.size(), 3u);
  EXPECT_EQ(greedy[1].groups.size(), 2u);  // 2 and 3 together
}

TEST(PartSpaceTest, RejectsOversizedPartsAndBadOptions) {
  const Graph g = MakeDag(3, {});
  EXPECT_THROW(PartSpace::Enumerate(g, AllOps(g), {0, 8, StrategySet::kBoth}), Error);
  EXPECT_THROW(PartSpace::Enumerate(g, {}, {3, 8, StrategySet::kBoth}), Error);
  const PartSpace space = PartSpace::Enumerate(g, AllOps(g), {3, 8, StrategySet::kBoth});
  EXPECT_THROW(space.Solve({1.0}), Error);
}

TEST(PartSpaceTest, FailedStagesAreAvoided) {
  const Graph g = MakeDag(2, {});
  const PartSpace space = PartSpace::Enumerate(g, AllOps(g), {3, 8, StrategySet::kParallel});
  std::vector<double> latency;
  for (int i = 0; i < space.stage_count(); ++i) {
    latency.push_back(space.stage(i).groups.size() == 2 ? INFINITY : 1.0);
  }
  const auto best = space.Solve(latency);
  EXPECT_DOUBLE_EQ(best.latency_ms, 2.0);
}

}  // namespace
}  // namespace ios::coordinator
