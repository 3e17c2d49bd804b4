// Memory-bounded IOS (coordinator/memory_search.h): the schedule a search
// returns under --memory-budget is the fastest of those under the cap, the
// same whether every stage is measured or only what the lazy search needs,
// and it fits in ios-run's plan; --objective memory gives the least peak.
#include "coordinator/memory_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/zoo.h"
#include "coordinator/memory_front.h"
#include "coordinator/report.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "exec/tensor_layout.h"
#include "memory/memory_model.h"
#include "tests/coordinator/search_testing.h"
#include "tests/testing/random_dags.h"
#include "tests/testing/sanitizers.h"

namespace ios::coordinator {
namespace {

using testing::CountingMeasurer;
using testing::DefaultOptions;
using testing::ExpectValidSchedule;
using testing::SearchInMemory;

// Every stage of `schedule`, block after block, as exec::PlanMemory takes them.
std::vector<Stage> FlatStagesOf(const Schedule& schedule) {
  std::vector<Stage> stages;
  for (const auto& block : schedule.blocks) {
    for (const ScheduledStage& s : block) stages.push_back(s.stage);
  }
  return stages;
}

// The fastest schedule under `cap` (bytes per sample) by the capped DP over
// the unrestricted space of a one-part graph, every stage measured.
double ReferenceWithin(const Graph& g, const SearchOutcome& unconstrained, int64_t cap) {
  EXPECT_EQ(unconstrained.plan.parts.size(), 1u);
  const PartPlan& part = unconstrained.plan.parts[0];
  const exec::TensorLayout layout = exec::LayoutTensors(g);
  const memory::PartMemory costs(layout, {{}, part.ops, {}}, 1);
  const std::vector<int64_t> values =
      part.space.TransitionValues([&](uint64_t before, uint64_t ending) {
        return costs.Background() + costs.StageBytes(before, ending);
      });
  std::vector<double> latency;
  for (int id : part.stage_ids) latency.push_back(unconstrained.table.latency_ms[id]);
  return part.space.SolveWithin(latency, values, cap).latency_ms;
}

TEST(MemorySearchTest, TheFastestScheduleUnderTheCapLazyOrNot) {
  int constrained = 0;
  // A sanitized build checks memory errors, which a few graphs exercise as
  // well as twelve.
  const uint64_t seeds = ::ios::testing::kSanitized ? 4 : 12;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const Graph g = ::ios::testing::RandomSmallGraph(seed, 7 + static_cast<int>(seed % 5));
    SearchOptions options = DefaultOptions();
    options.verify.enabled = false;
    const SearchOutcome free = SearchInMemory(g, options);
    SearchOptions least_options = options;
    least_options.memory.objective = MemoryOptions::Objective::kMemory;
    const SearchOutcome least = SearchInMemory(g, least_options);
    const int64_t low = least.plan.memory.least_peak, high = free.ios.peak_bytes;
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (int64_t cap : {low, (low + high) / 2, high}) {
      SearchOptions capped = options;
      capped.memory.budget_bytes = cap;
      const SearchOutcome all = SearchInMemory(g, capped);
      capped.measure = MeasureMode::kLazy;
      const SearchOutcome lazy = SearchInMemory(g, capped);
      ExpectValidSchedule(g, all.ios);
      EXPECT_NEAR(all.ios.latency_ms, ReferenceWithin(g, free, cap), 1e-9);
      EXPECT_NEAR(lazy.ios.latency_ms, all.ios.latency_ms, 1e-9);
      EXPECT_LE(all.ios.peak_bytes, cap);
      EXPECT_EQ(all.ios.peak_bytes, exec::PlanMemory(g, FlatStagesOf(all.ios)).peak_live_bytes);
      EXPECT_GE(all.ios.latency_ms, free.ios.latency_ms - 1e-9);
      constrained += all.ios.latency_ms > free.ios.latency_ms + 1e-9;
    }
  }
  EXPECT_GT(constrained, 0);  // some caps cost latency: the test sees a trade-off
}

TEST(MemorySearchTest, ObjectiveMemoryGivesTheLeastPeakOfAnyOrder) {
  for (uint64_t seed = 20; seed < (::ios::testing::kSanitized ? 23u : 30u); ++seed) {
    const Graph g = ::ios::testing::RandomSmallGraph(seed, 8);
    SearchOptions options = DefaultOptions();
    options.memory.objective = MemoryOptions::Objective::kMemory;
    const SearchOutcome outcome = SearchInMemory(g, options);
    ASSERT_TRUE(outcome.plan.memory.active);
    EXPECT_TRUE(outcome.plan.memory.least_exact);
    EXPECT_EQ(outcome.ios.peak_bytes, outcome.plan.memory.least_peak);
    // No topological order peaks lower: by every order of the 8 operators.
    std::vector<NodeId> order = g.blocks[0].Operators();
    int64_t best = std::numeric_limits<int64_t>::max();
    std::sort(order.begin(), order.end());
    do {
      std::vector<std::vector<NodeId>> stages;
      std::vector<char> done(g.nodes.size(), 0);
      done[0] = 1;
      bool valid = true;
      for (NodeId id : order) {
        for (const Term& term : g.node(id).inputs) {
          for (const Slice& s : term) valid = valid && done[static_cast<size_t>(s.producer)];
        }
        done[static_cast<size_t>(id)] = 1;
        stages.push_back({id});
      }
      if (valid) best = std::min(best, memory::PeakOf(g, stages, 1));
    } while (std::next_permutation(order.begin(), order.end()));
    EXPECT_EQ(outcome.ios.peak_bytes, best) << "seed " << seed;
  }
}

TEST(MemorySearchTest, ABudgetBelowTheLeastPeakFallsBackToItWithAWarning) {
  const Graph g = ::ios::testing::RandomSmallGraph(5, 9);
  SearchOptions options = DefaultOptions(4);
  options.memory.budget_bytes = 1;
  const SearchOutcome outcome = SearchInMemory(g, options);
  ASSERT_FALSE(outcome.plan.memory.warnings.empty());
  EXPECT_NE(outcome.plan.memory.warnings[0].find("below the least peak"), std::string::npos);
  EXPECT_EQ(outcome.ios.peak_bytes, outcome.plan.memory.least_peak * 4);
  EXPECT_NE(FormatReport(g, outcome).find("memory: ios is the fastest schedule"),
            std::string::npos);
}

TEST(MemorySearchTest, BaselinesOverTheCapAreNotVerifiedOrReturned) {
  int greedy_over = 0;
  for (uint64_t seed = 20; seed < 26; ++seed) {
    const Graph g = ::ios::testing::RandomSmallGraph(seed, 8);
    SearchOptions options = DefaultOptions();
    options.measure = MeasureMode::kLazy;
    options.memory.objective = MemoryOptions::Objective::kMemory;
    const SearchOutcome outcome = SearchInMemory(g, options);
    ASSERT_TRUE(outcome.verification.ran());
    const int64_t cap = outcome.plan.memory.cap;
    for (const VerifiedSchedule& c : outcome.verification.candidates) {
      EXPECT_LE(c.schedule.peak_bytes, cap) << c.name << ", seed " << seed;
    }
    EXPECT_LE(outcome.Returned().peak_bytes, cap);
    greedy_over += outcome.greedy.peak_bytes > cap;
  }
  EXPECT_GT(greedy_over, 0);  // a greedy schedule was there to leave out
}

// Inception's IOS schedule merges convolutions, whose stacked outputs ios-run
// keeps live longer than the model's per-operator buffers: under a budget
// of the sequential schedule's peak the returned schedule still fits in the
// plan, and is faster than sequential.
TEST(MemorySearchTest, InceptionUnderTheSequentialPeakFitsInThePlan) {
  const Graph g = BuildZooModel("inception_v3");
  SearchOptions options = DefaultOptions();
  options.measure = MeasureMode::kLazy;
  const SearchOutcome free = SearchInMemory(g, options);
  ASSERT_GT(free.ios.peak_bytes, free.sequential.peak_bytes);  // what makes the test worth it
  options.memory.budget_bytes = free.sequential.peak_bytes;
  const SearchOutcome capped = SearchInMemory(g, options);
  EXPECT_LE(capped.ios.peak_bytes, free.sequential.peak_bytes);
  EXPECT_LE(capped.Returned().peak_bytes, free.sequential.peak_bytes);
  EXPECT_LT(capped.ios.latency_ms, free.sequential.latency_ms);
}

// What makes a front: no kept point dominates another, every dropped one is
// dominated by a kept one, it runs from the least peak to the unconstrained
// IOS latency, and no search went over its budget.
void ExpectAFront(const MemoryFront& front) {
  std::vector<const MemoryFrontPoint*> kept;
  for (const MemoryFrontPoint& p : front.points) {
    if (!p.dominated) kept.push_back(&p);
    if (p.budget_bytes > 0) {
      EXPECT_LE(p.schedule.peak_bytes, p.budget_bytes);
    }
  }
  ASSERT_FALSE(kept.empty());
  auto dominates = [](const Schedule& q, const Schedule& p) {
    return q.latency_ms <= p.latency_ms + 1e-9 && q.peak_bytes <= p.peak_bytes;
  };
  for (size_t i = 0; i < kept.size(); ++i) {
    for (size_t j = 0; j < kept.size(); ++j) {
      if (i == j) continue;
      EXPECT_FALSE(dominates(kept[j]->schedule, kept[i]->schedule)) << i << " " << j;
    }
    if (i > 0) {  // by increasing peak, so by decreasing latency
      EXPECT_LT(kept[i - 1]->schedule.peak_bytes, kept[i]->schedule.peak_bytes);
      EXPECT_GT(kept[i - 1]->schedule.latency_ms, kept[i]->schedule.latency_ms);
    }
  }
  for (const MemoryFrontPoint& p : front.points) {
    if (!p.dominated) continue;
    EXPECT_TRUE(std::any_of(kept.begin(), kept.end(), [&](const MemoryFrontPoint* q) {
      return dominates(q->schedule, p.schedule);
    }));
  }
  const SearchOutcome& free = front.unconstrained;
  const auto least = std::find_if(front.points.begin(), front.points.end(), [](const auto& p) {
    return p.kind == MemoryFrontPoint::Kind::kLeastPeak;
  });
  ASSERT_NE(least, front.points.end());
  EXPECT_EQ(kept.front()->schedule.peak_bytes, least->schedule.peak_bytes);
  EXPECT_NEAR(kept.back()->schedule.latency_ms, free.ios.latency_ms, 1e-9);
  for (const MemoryFrontPoint& p : front.points) {
    EXPECT_GE(p.schedule.peak_bytes, kept.front()->schedule.peak_bytes);
    EXPECT_GE(p.schedule.latency_ms, free.ios.latency_ms - 1e-9);
  }
}

TEST(MemoryFrontTest, RunsFromTheLeastPeakToTheUnconstrainedLatencyWithinEveryBudget) {
  const Graph g = BuildZooModel("darts_cell");
  for (int batch : {1, 4}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    SearchOptions options = DefaultOptions(batch);
    options.measure = MeasureMode::kLazy;
    options.verify.enabled = batch == 1;
    auto store = db::ProfileStore::Open(":memory:");
    CountingMeasurer measurer;
    MemoryFrontOptions front_options;
    front_options.points = 6;
    int steps = 0;
    MemoryFrontStep last;
    const MemoryFront front =
        SearchMemoryFront(g, g.name, options, front_options, *store, measurer,
                          [&](const MemoryFrontStep& step) { last = step, ++steps; });
    ExpectAFront(front);
    // The unconstrained, the least peak, 4 budgets, and the sequential peak
    // unless it is the least.
    const bool sequential_least =
        front.unconstrained.sequential.peak_bytes == front.points.front().schedule.peak_bytes;
    EXPECT_EQ(front.points.size(), sequential_least ? 6u : 7u);
    EXPECT_EQ(steps, static_cast<int>(front.points.size()));
    EXPECT_EQ(last.count, steps);
    EXPECT_FALSE(measurer.asked_twice) << "the searches share one profiling DB";
    EXPECT_EQ(front.unconstrained.verification.ran(), batch == 1);
    // DARTS's cell trades memory for latency: more than two points.
    EXPECT_GT(front.points.size() - front.DominatedCount(), 2u);
    const std::string table = FormatMemoryFront(g, front);
    EXPECT_NE(table.find("at the sequential schedule's peak"), std::string::npos) << table;
    EXPECT_NE(table.find("all latencies above are simulated"), std::string::npos);
  }
}

TEST(MemoryFrontTest, IsAFrontOnRandomGraphs) {
  for (uint64_t seed = 40; seed < 48; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Graph g = ::ios::testing::RandomSmallGraph(seed, 10);
    SearchOptions options = DefaultOptions();
    options.verify.enabled = false;
    auto store = db::ProfileStore::Open(":memory:");
    CountingMeasurer measurer;
    MemoryFrontOptions front_options;
    front_options.points = 5;
    ExpectAFront(SearchMemoryFront(g, g.name, options, front_options, *store, measurer));
  }
}

TEST(MemoryFrontTest, KeepsTheFirstOfEqualPointsAndDropsTheDominated) {
  auto point = [](int64_t peak, double ms) {
    MemoryFrontPoint p;
    p.schedule.peak_bytes = peak;
    p.schedule.latency_ms = ms;
    return p;
  };
  std::vector<MemoryFrontPoint> points = {point(10, 3.0), point(10, 3.0), point(12, 3.0),
                                          point(12, 2.5), point(20, 2.0), point(30, 2.0)};
  MarkDominated(points);
  std::vector<bool> dominated;
  for (const MemoryFrontPoint& p : points) dominated.push_back(p.dominated);
  EXPECT_EQ(dominated, (std::vector<bool>{false, true, true, false, false, true}));
}

TEST(MemoryFrontTest, RefusesAPointCountOutOfRange) {
  const Graph g = ::ios::testing::RandomSmallGraph(1, 4);
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  for (int points : {1, MemoryFrontOptions::kMaxPoints + 1}) {
    MemoryFrontOptions front_options;
    front_options.points = points;
    EXPECT_THROW(SearchMemoryFront(g, g.name, DefaultOptions(), front_options, *store, measurer),
                 Error);
  }
  EXPECT_EQ(measurer.asked, 0);
}

TEST(MemorySearchTest, ParsesByteSizesAndRefusesTheRest) {
  EXPECT_EQ(ParseByteSize("500000"), 500000);
  EXPECT_EQ(ParseByteSize("64K"), 64 * 1024);
  EXPECT_EQ(ParseByteSize("1.5M"), 3 * 512 * 1024);
  EXPECT_EQ(ParseByteSize("2G"), int64_t{2} << 30);
  for (const char* bad : {"", "M", "12Q", "-5", "0", "1e30"}) {
    EXPECT_THROW(ParseByteSize(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace ios::coordinator
