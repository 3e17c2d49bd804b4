// Planning gives one plan however it is computed: keys built and parts
// walked on several threads (SearchOptions::plan_threads) or repeated parts reused
// (SearchOptions::reuse_repeated_parts) give exactly the plan of one thread
// walking every part: the same distinct stages, in the same id order, and
// every part's stages mapped to the same ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/stage.h"
#include "common/zoo.h"
#include "coordinator/search.h"
#include "tests/coordinator/search_testing.h"
#include "tests/testing/sanitizers.h"

namespace ios::coordinator {
namespace {

void ExpectSamePlan(const SearchPlan& a, const SearchPlan& b) {
  ASSERT_EQ(a.key_hashes, b.key_hashes);
  EXPECT_EQ(a.stage_occurrences, b.stage_occurrences);
  ASSERT_EQ(a.parts.size(), b.parts.size());
  for (size_t p = 0; p < a.parts.size(); ++p) {
    EXPECT_EQ(a.parts[p].stage_ids, b.parts[p].stage_ids) << "part " << p;
  }
}

TEST(PlanThreadsTest, NasnetPlannedOnTwoOrThreeThreadsIsThePlanOfOneThread) {
  const Graph g = BuildZooModel("nasnet");
  SearchOptions options = testing::DefaultOptions();
  options.plan_threads = 1;
  const SearchPlan serial = PlanSearch(g, options);
  // Large parts exist, so the threads really split the work.
  size_t largest = 0;
  for (const PartPlan& part : serial.parts) {
    largest = std::max(largest, static_cast<size_t>(part.space.stage_count()));
  }
  ASSERT_GT(largest, 3u * 2048u);
  for (int threads : {2, 3}) {
    options.plan_threads = threads;
    ExpectSamePlan(serial, PlanSearch(g, options));
  }
}

// With more than one thread, parts are walked ahead of the planning thread
// with the per-part budgets only. Where the search's budget runs out part
// way, the planning thread must walk again and meet the very same budget
// hits: the same pieces, warnings and stages as one thread planning alone.
TEST(PlanThreadsTest, BudgetsHitPartWayGiveThePlanAndWarningsOfOneThread) {
  const Graph g = BuildZooModel("nasnet");
  for (const bool reuse : {true, false}) {
    SearchOptions options = testing::DefaultOptions();
    options.reuse_repeated_parts = reuse;
    options.max_search_stages = 30'000;  // runs out after some parts
    options.dp.max_stages = 9'000;       // and some parts are over their own
    options.plan_threads = 1;
    const SearchPlan serial = PlanSearch(g, options);
    ASSERT_FALSE(serial.warnings.empty()) << "the budgets must bite for this test to mean much";
    options.plan_threads = 2;
    const SearchPlan walked_ahead = PlanSearch(g, options);
    EXPECT_EQ(serial.warnings, walked_ahead.warnings) << "reuse " << reuse;
    ExpectSamePlan(serial, walked_ahead);
    for (size_t p = 0; p < serial.parts.size(); ++p) {
      EXPECT_EQ(serial.parts[p].schedule, walked_ahead.parts[p].schedule) << "part " << p;
      EXPECT_EQ(serial.parts[p].ops, walked_ahead.parts[p].ops) << "part " << p;
    }
  }
}

TEST(PlanThreadsTest, EveryDistinctKeyIsFoundByItsTextAndIsTheKeyOfItsStage) {
  const Graph g = BuildZooModel("inception_v3");
  SearchOptions options = testing::DefaultOptions();
  options.plan_threads = 2;
  const SearchPlan plan = PlanSearch(g, options);
  StageKeyer keyer(g);
  for (int id = 0; id < static_cast<int>(plan.stage_count()); ++id) {
    const std::string key = plan.KeyOf(keyer, id);
    EXPECT_EQ(plan.IdOf(key), id);
    EXPECT_EQ(HashStageKey(key), plan.key_hashes[id]);
  }
  EXPECT_EQ(plan.IdOf("v1;not a key"), -1);
}

TEST(PlanThreadsTest, ThreadCountOutsideItsRangeIsRefused) {
  const Graph g = BuildZooModel("squeezenet");
  SearchOptions options = testing::DefaultOptions();
  options.plan_threads = -1;
  EXPECT_THROW(PlanSearch(g, options), Error);
  options.plan_threads = SearchOptions::kMaxPlanThreads + 1;
  EXPECT_THROW(PlanSearch(g, options), Error);
}

// NASNet repeats its cells: parts of the same structure are planned once
// and reused (SearchOptions::reuse_repeated_parts). The plan must be the one
// walking every part gives: the same stages in every part, the same ids.
class PlanReuseTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanReuseTest, ReusingRepeatedPartsGivesThePlanOfWalkingEveryPart) {
  const Graph g = BuildZooModel(GetParam());
  SearchOptions options = testing::DefaultOptions();
  options.reuse_repeated_parts = false;
  const SearchPlan walked = PlanSearch(g, options);
  options.reuse_repeated_parts = true;
  const SearchPlan reused = PlanSearch(g, options);
  EXPECT_EQ(walked.reused_parts, 0);
  // Every part whose structure came before is reused (each zoo part is exact).
  StageKeyer keyer(g);
  std::set<std::string> seen;
  int repeated = 0;
  for (const PartPlan& part : walked.parts)
    repeated += !seen.insert(keyer.OrderedKey(part.ops)).second;
  EXPECT_EQ(reused.reused_parts, repeated);
  if (GetParam() == "nasnet") {
    EXPECT_GE(repeated, 6) << "NASNet repeats normal cells in each of its three stacks";
  }
  ExpectSamePlan(walked, reused);
  for (size_t p = 0; p < walked.parts.size(); ++p) {
    const PartPlan& a = walked.parts[p];
    const PartPlan& b = reused.parts[p];
    ASSERT_EQ(a.ops, b.ops) << "part " << p;
    EXPECT_EQ(a.schedule, b.schedule) << "part " << p;
    ASSERT_EQ(a.space.stage_count(), b.space.stage_count()) << "part " << p;
    EXPECT_EQ(a.space.state_count(), b.space.state_count()) << "part " << p;
    for (int k = 0; k < a.space.stage_count();
         k += static_cast<int>(::ios::testing::kExhaustiveStride)) {
      const Stage x = a.space.stage(k), y = b.space.stage(k);
      EXPECT_EQ(x.strategy, y.strategy) << "part " << p << " stage " << k;
      EXPECT_EQ(x.groups, y.groups) << "part " << p << " stage " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, PlanReuseTest, ::testing::Values("inception_v3", "nasnet"));

TEST(PlanReuseTest, OrderedKeysTellRepeatedCellsApartFromDifferentOnes) {
  const Graph g = BuildZooModel("nasnet");
  StageKeyer keyer(g);
  // Two blocks' parts are the same structure only when their texts are equal;
  // equal texts must then give equal keys for corresponding stages.
  SearchOptions options = testing::DefaultOptions();
  options.reuse_repeated_parts = false;
  const SearchPlan plan = PlanSearch(g, options);
  int repeats = 0;
  for (size_t p = 0; p < plan.parts.size(); ++p) {
    for (size_t q = p + 1; q < plan.parts.size(); ++q) {
      const std::string first = keyer.OrderedKey(plan.parts[p].ops);
      if (keyer.OrderedKey(plan.parts[q].ops) != first) continue;
      ++repeats;
      EXPECT_EQ(plan.parts[p].stage_ids, plan.parts[q].stage_ids) << "parts " << p << ", " << q;
    }
  }
  EXPECT_GT(repeats, 0);
}

}  // namespace
}  // namespace ios::coordinator
