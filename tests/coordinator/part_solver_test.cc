// PartSolver (coordinator/dp.h), the incremental DP of the lazy search,
// against PartSpace::Solve and PartSpace::StageSlack: after any sequence of
// latency changes, the same optimum, the same stages and the same slack,
// bit for bit (the lazy search's exactness rests on Solve's tie rule).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/zoo.h"
#include "coordinator/dp.h"
#include "coordinator/search.h"
#include "tests/coordinator/search_testing.h"

namespace ios::coordinator {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void ExpectSameAsSolve(const PartSpace& space, const PartSolver& solver, const std::string& where) {
  const PartSpace::Solution expected = space.Solve(solver.latency());
  std::vector<int> sequence;
  solver.StageSequence(sequence);
  EXPECT_EQ(solver.latency_ms(), expected.latency_ms) << where;
  EXPECT_EQ(sequence, expected.stage_sequence) << where;
  std::vector<double> slack;
  solver.StageSlack(slack);
  EXPECT_EQ(slack, space.StageSlack(solver.latency())) << where;
}

// The parts of Inception V3 with a real choice to make (the largest first).
std::vector<const PartPlan*> ChoosyParts(const SearchPlan& plan, size_t count) {
  std::vector<const PartPlan*> parts;
  for (const PartPlan& part : plan.parts) {
    if (part.space.state_count() > 20) parts.push_back(&part);
  }
  std::sort(parts.begin(), parts.end(), [](const PartPlan* a, const PartPlan* b) {
    return a->space.state_count() > b->space.state_count();
  });
  if (parts.size() > count) parts.resize(count);
  return parts;
}

// Latencies from a few values only, so that many schedules tie and the
// first-ending rule decides.
double Coarse(std::mt19937& rng) { return 0.25 * std::uniform_int_distribution<int>(1, 6)(rng); }

// As the lazy search uses it: bounds first, then stages rise to their
// measured latencies a few at a time; now and then one comes in below
// (noise) or fails (infinite).
TEST(PartSolverTest, RisingAndOccasionallyFallingLatenciesGiveSolvesOptimum) {
  const Graph g = BuildZooModel("inception_v3");
  const SearchPlan plan = PlanSearch(g, testing::DefaultOptions());
  std::mt19937 rng(22);
  const std::vector<const PartPlan*> parts = ChoosyParts(plan, 4);
  ASSERT_FALSE(parts.empty());
  for (const PartPlan* part : parts) {
    const PartSpace& space = part->space;
    PartSolver solver(space);
    const int n = space.stage_count();
    std::vector<double> bound(n);
    for (int id = 0; id < n; ++id) {
      bound[id] = Coarse(rng);
      solver.Set(id, bound[id]);
    }
    solver.Solve();
    ExpectSameAsSolve(space, solver, "first solve");
    std::vector<int> order(n);
    for (int id = 0; id < n; ++id) order[id] = id;
    std::shuffle(order.begin(), order.end(), rng);
    std::uniform_int_distribution<int> batch(1, 4), event(0, 19);
    for (size_t at = 0; at < order.size();) {
      const size_t end = std::min(order.size(), at + static_cast<size_t>(batch(rng)));
      for (; at < end; ++at) {
        const int id = order[at];
        const int e = event(rng);
        const double measured = e == 0 ? kInf : e == 1 ? bound[id] / 2 : bound[id] + Coarse(rng);
        solver.Set(id, measured);
      }
      solver.Solve();
      ExpectSameAsSolve(space, solver,
                        "after " + std::to_string(at) + " of " + std::to_string(n) + " stages");
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// As the bound gap uses it: every stage infinite, then measured ones fall
// to their latencies.
TEST(PartSolverTest, FallingFromInfinityGivesSolvesOptimum) {
  const Graph g = BuildZooModel("inception_v3");
  const SearchPlan plan = PlanSearch(g, testing::DefaultOptions());
  std::mt19937 rng(7);
  for (const PartPlan* part : ChoosyParts(plan, 3)) {
    const PartSpace& space = part->space;
    PartSolver solver(space);
    solver.Solve();
    EXPECT_EQ(solver.latency_ms(), kInf);
    std::vector<int> sequence;
    solver.StageSequence(sequence);
    EXPECT_TRUE(sequence.empty());
    std::vector<int> order(space.stage_count());
    for (size_t id = 0; id < order.size(); ++id) order[id] = static_cast<int>(id);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t at = 0; at < order.size(); ++at) {
      solver.Set(order[at], Coarse(rng));
      if (at % 5 != 4 && at + 1 < order.size()) continue;
      solver.Solve();
      ExpectSameAsSolve(space, solver, "after " + std::to_string(at + 1) + " stages");
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Setting a stage back to what it was, or twice before a solve, is no change.
TEST(PartSolverTest, ASolveWithoutChangesRecomputesNothing) {
  const Graph g = BuildZooModel("inception_v3");
  const SearchPlan plan = PlanSearch(g, testing::DefaultOptions());
  const PartSpace& space = ChoosyParts(plan, 1).front()->space;
  PartSolver solver(space);
  for (int id = 0; id < space.stage_count(); ++id) solver.Set(id, 1.0);
  solver.Solve();
  EXPECT_EQ(solver.last_recomputed(), static_cast<int64_t>(space.state_count()) + 1);
  solver.Solve();
  EXPECT_EQ(solver.last_recomputed(), 0);
  solver.Set(0, 5.0);
  solver.Set(0, 1.0);
  solver.Solve();
  EXPECT_EQ(solver.last_recomputed(), 0);
  ExpectSameAsSolve(space, solver, "unchanged");
}

// The point of it: a stage measured above its bound touches only the states
// that chose it and those whose choice led there, a small share of the
// space (Inception V3's largest part, each stage in turn).
TEST(PartSolverTest, OneRisingStageRecomputesAFewStates) {
  const Graph g = BuildZooModel("inception_v3");
  const SearchPlan plan = PlanSearch(g, testing::DefaultOptions());
  const PartSpace& space = ChoosyParts(plan, 1).front()->space;
  std::mt19937 rng(3);
  PartSolver solver(space);
  for (int id = 0; id < space.stage_count(); ++id) solver.Set(id, Coarse(rng));
  solver.Solve();
  int64_t recomputed = 0;
  for (int id = 0; id < space.stage_count(); ++id) {
    solver.Set(id, solver.latency()[id] + Coarse(rng));
    solver.Solve();
    recomputed += solver.last_recomputed();
  }
  ExpectSameAsSolve(space, solver, "every stage risen");
  const double share =
      double(recomputed) / double(space.stage_count()) / double(space.state_count());
  std::printf("%lld states, %d stages: a rise recomputes %.2f%% of the states on average\n",
              static_cast<long long>(space.state_count()), space.stage_count(), 100 * share);
  EXPECT_LT(share, 0.25);
}

}  // namespace
}  // namespace ios::coordinator
