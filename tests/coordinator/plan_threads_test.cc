// Keys built on several threads (SearchOptions::plan_threads) give exactly
// the plan of one thread: the same distinct stages, in the same id order,
// and every part's stages mapped to the same ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/stage.h"
#include "common/zoo.h"
#include "coordinator/search.h"
#include "tests/coordinator/search_testing.h"

namespace ios::coordinator {
namespace {

void ExpectSamePlan(const SearchPlan& a, const SearchPlan& b) {
  ASSERT_EQ(a.keys, b.keys);
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

TEST(PlanThreadsTest, EveryDistinctKeyIsFoundByItsTextAndIsTheKeyOfItsStage) {
  const Graph g = BuildZooModel("inception_v3");
  SearchOptions options = testing::DefaultOptions();
  options.plan_threads = 2;
  const SearchPlan plan = PlanSearch(g, options);
  StageKeyer keyer(g);
  for (size_t id = 0; id < plan.keys.size(); ++id) {
    EXPECT_EQ(plan.IdOf(plan.keys[id]), static_cast<int>(id));
    EXPECT_EQ(keyer.Key(plan.StageOf(static_cast<int>(id))), plan.keys[id]);
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

}  // namespace
}  // namespace ios::coordinator
