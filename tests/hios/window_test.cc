#include "hios/window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>

#include "common/error.h"
#include "hios/costs.h"
#include "hios/dag.h"
#include "hios/schedule.h"
#include "tests/hios/recording_costs.h"

namespace ios::hios {
namespace {

using Stages = std::vector<std::vector<std::vector<OpId>>>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Prices listed multi-op stages (keyed by their sorted ops); any other costs
// the sum of its ops, i.e. no gain from running them together.
TableCosts Priced(int devices, std::vector<double> op_ms, std::vector<double> transfer,
                  std::map<std::vector<OpId>, double> stage_ms) {
  const std::vector<double> times = op_ms;
  return TableCosts(devices, std::move(op_ms), std::move(transfer),
                    [times, stage_ms](std::span<const OpId> ops, int) {
                      std::vector<OpId> key(ops.begin(), ops.end());
                      std::sort(key.begin(), key.end());
                      const auto it = stage_ms.find(key);
                      if (it != stage_ms.end()) return it->second;
                      double sum = 0;
                      for (OpId op : ops) sum += times[static_cast<size_t>(op)];
                      return sum;
                    });
}

double LatencyOf(const Dag& dag, const Costs& costs, const MultiSchedule& q) {
  const Timeline t = Evaluate(dag, costs, q);
  EXPECT_TRUE(t.acyclic) << t.problem;
  if (t.acyclic) CheckTimeline(dag, costs, q, t);
  return t.latency_ms;
}

TEST(WindowTest, MergesIndependentNeighboursWhenTheStageIsFaster) {
  // 0 (3 ms) and 1 (2 ms), independent, one after the other: 5 ms. Together
  // in 4 ms: merged. In 5 ms (no gain) or 6 ms: kept apart.
  const Dag dag = Dag::Make(2, {});
  const MultiSchedule q{{{{0}, {1}}}};
  const TableCosts faster = Priced(1, {3, 2}, {}, {{{0, 1}, 4}});
  const MultiSchedule merged = Parallelize(dag, faster, q, {});
  EXPECT_EQ(merged.stages, (Stages{{{0, 1}}}));
  EXPECT_EQ(LatencyOf(dag, faster, merged), 4);
  for (double price : {5.0, 6.0}) {
    const TableCosts no_gain = Priced(1, {3, 2}, {}, {{{0, 1}, price}});
    EXPECT_EQ(Parallelize(dag, no_gain, q, {}).stages, q.stages) << price;
  }
}

TEST(WindowTest, KeepsDependentNeighboursApart) {
  // Device 0 runs 0, 1, 3; device 1 runs 2. 0 -> 2 -> 1 makes 0 and 1
  // dependent only through the other device; 1 -> 3 directly. Every stage
  // is offered at 0.1 ms, yet no neighbours of device 0 are independent: the
  // window must neither merge them nor ask for a price.
  const Dag dag = Dag::Make(4, {{0, 2}, {2, 1}, {1, 3}});
  std::map<std::vector<OpId>, double> cheap;
  for (const std::vector<OpId>& s :
       std::vector<std::vector<OpId>>{{0, 1}, {1, 3}, {0, 1, 3}, {0, 3}})
    cheap[s] = 0.1;
  const TableCosts table = Priced(2, {1, 1, 1, 1}, {1, 1, 1}, cheap);
  const RecordingCosts costs(table);
  const MultiSchedule q{{{{0}, {1}, {3}}, {{2}}}};
  const MultiSchedule out = Parallelize(dag, costs, q, {.window = 3, .streams = 3});
  EXPECT_EQ(out.stages, q.stages);
  EXPECT_TRUE(costs.asked.empty())
      << "priced a stage of " << costs.asked.front().size() << " dependent ops";
}

TEST(WindowTest, RejectsAMergeThatDeadlocksAnotherDevice) {
  // a=0, b=1 on device 0; d=3 then c=2 on device 1; a -> d, c -> b; 1 ms
  // each, 1 ms per transfer. As given: a [0,1], d [2,3], c [3,4], b [5,6]:
  // 6 ms. {a,b} at 0.1 ms would wait for c, c for d, d for a: a deadlock,
  // though a and b are independent in the DAG. {d,c} at 1 ms: dc [2,3],
  // b [4,5]: 5 ms, the only merge to take.
  const Dag dag = Dag::Make(4, {{0, 3}, {2, 1}});
  const TableCosts table = Priced(2, {1, 1, 1, 1}, {1, 1}, {{{0, 1}, 0.1}, {{2, 3}, 1}});
  const RecordingCosts costs(table);
  const MultiSchedule q{{{{0}, {1}}, {{3}, {2}}}};
  ASSERT_EQ(LatencyOf(dag, costs, q), 6);
  const MultiSchedule out = Parallelize(dag, costs, q, {});
  EXPECT_EQ(out.stages, (Stages{{{0}, {1}}, {{3, 2}}}));
  EXPECT_EQ(LatencyOf(dag, costs, out), 5);
  // {a,b} was considered (so refused for the cycle, not overlooked).
  EXPECT_NE(std::find(costs.asked.begin(), costs.asked.end(), std::vector<OpId>{0, 1}),
            costs.asked.end());
}

TEST(WindowTest, StartsAtTheVisitedOperatorsOwnStage) {
  {
    // x=0 -> y=1, x -> z=2 on one device: a window always placed at the
    // first stage (the reference) only ever sees the dependent {x,y}. At y:
    // {y,z} in 3 ms, 1 + 3 = 4 ms instead of 1 + 2 + 2 = 5.
    const Dag dag = Dag::Make(3, {{0, 1}, {0, 2}});
    const TableCosts costs = Priced(1, {1, 2, 2}, {0, 0}, {{{1, 2}, 3}});
    const MultiSchedule out = Parallelize(dag, costs, {{{{0}, {1}, {2}}}}, {});
    EXPECT_EQ(out.stages, (Stages{{{0}, {1, 2}}}));
    EXPECT_EQ(LatencyOf(dag, costs, out), 4);
  }
  {
    // One device runs a=0 (2 ms), b=1 (4), x=2 (1), y=3 (4.5) with b -> x;
    // priorities b 5, y 4.5, a 2, x 1 visit b, y, a, x. At b: {b,x} is
    // dependent. At y: the last stage. At a: {a,b} in 4 ms, 11.5 -> 9.5. At
    // x: its CURRENT stage is index 1 ({x,y} in 4.5 ms: 8.5); its index
    // before the merge, 2, now holds y, the last stage: nothing to merge.
    const Dag dag = Dag::Make(4, {{1, 2}});
    const TableCosts costs = Priced(1, {2, 4, 1, 4.5}, {0}, {{{0, 1}, 4}, {{2, 3}, 4.5}});
    const MultiSchedule q{{{{0}, {1}, {2}, {3}}}};
    ASSERT_EQ(PriorityOrder(dag, costs), (std::vector<OpId>{1, 3, 0, 2}));
    const MultiSchedule out = Parallelize(dag, costs, q, {});
    EXPECT_EQ(out.stages, (Stages{{{0, 1}, {2, 3}}}));
    EXPECT_EQ(LatencyOf(dag, costs, out), 8.5);
  }
}

TEST(WindowTest, HonoursWindowAndStreamOptions) {
  // Three independent ops of 3, 2, 1 ms: 6 ms in a row. {0,1} costs 5 and
  // {1,2} costs 3 (no gain: 5+1 = 3+3 = 6); only all three at once gain
  // (4 ms). That takes a window of 3 stages AND 3 streams.
  const Dag dag = Dag::Make(3, {});
  const TableCosts costs = Priced(1, {3, 2, 1}, {}, {{{0, 1}, 5}, {{1, 2}, 3}, {{0, 1, 2}, 4}});
  const MultiSchedule q{{{{0}, {1}, {2}}}};
  EXPECT_EQ(Parallelize(dag, costs, q, {.window = 3, .streams = 3}).stages, (Stages{{{0, 1, 2}}}));
  EXPECT_EQ(Parallelize(dag, costs, q, {.window = 2, .streams = 3}).stages, q.stages);
  EXPECT_EQ(Parallelize(dag, costs, q, {.window = 3, .streams = 2}).stages, q.stages);
  EXPECT_EQ(Parallelize(dag, costs, q, {}).stages, q.stages);
  // {0,1} at 1 ms gains a lot, yet window 1 or streams 1 merges nothing.
  const TableCosts pair = Priced(1, {3, 2, 1}, {}, {{{0, 1}, 1}});
  EXPECT_EQ(Parallelize(dag, pair, q, {}).stages, (Stages{{{0, 1}, {2}}}));
  EXPECT_EQ(Parallelize(dag, pair, q, {.window = 1, .streams = 2}).stages, q.stages);
  EXPECT_EQ(Parallelize(dag, pair, q, {.window = 2, .streams = 1}).stages, q.stages);
}

// A random DAG on 4..15 ops (ids shuffled, so not topological), mapped at
// random on 1..3 devices in priority order; stages priced 0.5..1.3 times
// their sum, one in ten unpriceable (+inf). The same set always gets the
// same price, whatever the order of its ops.
struct RandomCase {
  Dag dag;
  std::unique_ptr<TableCosts> costs;
  MultiSchedule q;
};

RandomCase MakeRandomCase(uint32_t seed) {
  std::mt19937 rng(seed);
  const int n = 4 + static_cast<int>(rng() % 12);
  std::vector<OpId> label(static_cast<size_t>(n));
  std::iota(label.begin(), label.end(), 0);
  std::shuffle(label.begin(), label.end(), rng);
  std::vector<Edge> edges;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (rng() % 4 == 0)
        edges.push_back({label[static_cast<size_t>(i)], label[static_cast<size_t>(j)]});
    }
  }
  const int devices = 1 + static_cast<int>(rng() % 3);
  std::uniform_real_distribution<double> time(0.2, 4.0), wait(0.0, 2.0);
  std::vector<double> op_ms(static_cast<size_t>(n)), transfer(edges.size());
  for (double& t : op_ms) t = time(rng);
  for (double& w : transfer) w = wait(rng);
  RandomCase c;
  c.dag = Dag::Make(n, edges);
  const std::vector<double> times = op_ms;
  c.costs = std::make_unique<TableCosts>(devices, std::move(op_ms), std::move(transfer),
                                         [times, seed](std::span<const OpId> ops, int) {
                                           std::vector<OpId> key(ops.begin(), ops.end());
                                           std::sort(key.begin(), key.end());
                                           std::seed_seq seq(key.begin(), key.end());
                                           std::mt19937 price_rng(seq);
                                           price_rng.discard(seed % 7);
                                           if (price_rng() % 10 == 0) return kInf;
                                           double sum = 0;
                                           for (OpId op : key)
                                             sum += times[static_cast<size_t>(op)];
                                           return sum * std::uniform_real_distribution<double>(
                                                            0.5, 1.3)(price_rng);
                                         });
  std::vector<int> device_of(static_cast<size_t>(n));
  for (int& d : device_of) d = static_cast<int>(rng() % static_cast<uint32_t>(devices));
  c.q = SingletonSchedule(devices, device_of, PriorityOrder(c.dag, *c.costs));
  return c;
}

// Ops of each device in order, stages concatenated.
std::vector<std::vector<OpId>> Sequences(const MultiSchedule& q) {
  std::vector<std::vector<OpId>> seqs;
  for (const auto& list : q.stages) {
    seqs.emplace_back();
    for (const auto& stage : list)
      seqs.back().insert(seqs.back().end(), stage.begin(), stage.end());
  }
  return seqs;
}

TEST(WindowTest, NeverRaisesTheLatency) {
  int merges = 0, gains = 0;
  for (uint32_t seed = 0; seed < 300; ++seed) {
    const RandomCase c = MakeRandomCase(seed);
    const WindowOptions options{.window = 1 + static_cast<int>(seed % 4),
                                .streams = 1 + static_cast<int>(seed / 4 % 4)};
    const double before = LatencyOf(c.dag, *c.costs, c.q);
    const MultiSchedule out = Parallelize(c.dag, *c.costs, c.q, options);
    const double after = LatencyOf(c.dag, *c.costs, out);
    EXPECT_LE(after, before) << "seed " << seed;
    gains += after < before;
    // Only neighbours are joined: each device keeps its op sequence, so
    // every op is still there exactly once.
    EXPECT_EQ(Sequences(out), Sequences(c.q)) << "seed " << seed;
    for (const auto& list : out.stages) {
      for (const auto& stage : list) {
        EXPECT_LE(static_cast<int>(stage.size()), options.streams) << "seed " << seed;
        merges += stage.size() > 1;
      }
    }
  }
  // The cases exercise the window rather than pass for lack of merges.
  EXPECT_GT(merges, 100);
  EXPECT_GT(gains, 50);
}

TEST(WindowTest, CandidatesCoverEveryPriceTheWindowAsks) {
  {
    // One device runs 0, 1, 2 with 0 -> 2: runs of two or three
    // consecutive independent ops are {0,1} and {1,2} only.
    const Dag dag = Dag::Make(3, {{0, 2}});
    const MultiSchedule q{{{{0}, {1}, {2}}}};
    EXPECT_EQ(WindowCandidates(dag, q, {.window = 3, .streams = 3}),
              (std::vector<std::vector<OpId>>{{0, 1}, {1, 2}}));
    EXPECT_TRUE(WindowCandidates(dag, q, {.window = 1, .streams = 3}).empty());
    // q's own multi-op stages are priced by Evaluate whatever the options.
    EXPECT_EQ(WindowCandidates(dag, {{{{0, 1}, {2}}}}, {.window = 2, .streams = 1}),
              (std::vector<std::vector<OpId>>{{0, 1}}));
  }
  int asked = 0;
  for (uint32_t seed = 0; seed < 300; ++seed) {
    const RandomCase c = MakeRandomCase(seed);
    const WindowOptions options{.window = 2 + static_cast<int>(seed % 3),
                                .streams = 2 + static_cast<int>(seed / 3 % 3)};
    // Twice: the second pass starts from a schedule that has merged stages.
    MultiSchedule q = c.q;
    for (int pass = 0; pass < 2; ++pass) {
      const auto candidates = WindowCandidates(c.dag, q, options);
      const RecordingCosts costs(*c.costs);
      MultiSchedule out = Parallelize(c.dag, costs, q, options);
      for (const std::vector<OpId>& stage : costs.asked) {
        ++asked;
        EXPECT_TRUE(std::binary_search(candidates.begin(), candidates.end(), stage))
            << "seed " << seed << " pass " << pass << ": a stage of " << stage.size()
            << " ops was priced but not listed";
      }
      q = std::move(out);
    }
  }
  EXPECT_GT(asked, 500);
}

TEST(WindowTest, RefusesABadOption) {
  const Dag dag = Dag::Make(2, {});
  const TableCosts costs(1, {1, 1}, {});
  const MultiSchedule q{{{{0}, {1}}}};
  auto message = [&](const WindowOptions& options, bool candidates) -> std::string {
    try {
      if (candidates) {
        WindowCandidates(dag, q, options);
      } else {
        Parallelize(dag, costs, q, options);
      }
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  for (bool candidates : {false, true}) {
    EXPECT_NE(message({.window = 0}, candidates).find("option window is 0, expected at least 1"),
              std::string::npos)
        << message({.window = 0}, candidates);
    EXPECT_NE(
        message({.streams = -1}, candidates).find("option streams is -1, expected at least 1"),
        std::string::npos)
        << message({.streams = -1}, candidates);
  }
}

TEST(WindowTest, RefusesAScheduleThatCannotRun) {
  // Device 0 runs 1 before 0 although 0 -> 1.
  const Dag dag = Dag::Make(2, {{0, 1}});
  const TableCosts costs(1, {1, 1}, {1});
  try {
    Parallelize(dag, costs, {{{{1}, {0}}}}, {});
    FAIL() << "parallelized a deadlocked schedule";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run: the stages wait on each other"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ios::hios
