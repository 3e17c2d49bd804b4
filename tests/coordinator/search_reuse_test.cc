// Which stored results a search reuses: good measurements and failures that
// are facts about the stage (out of memory, unsupported); transient failures
// (timeout, backend failure, lost worker) are measured again.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "common/measurement.h"
#include "common/zoo.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "tests/coordinator/search_testing.h"

namespace ios::coordinator {
namespace {

using testing::CountingMeasurer;
using testing::DefaultOptions;

struct ReuseCase {
  MeasureError stored;
  bool measured_again;
};

void PrintTo(const ReuseCase& c, std::ostream* os) { *os << ToString(c.stored); }

class StoredFailureTest : public ::testing::TestWithParam<ReuseCase> {};

TEST_P(StoredFailureTest, NextSearchReusesFactsAboutTheStageAndMeasuresTransientFailuresAgain) {
  const ReuseCase& c = GetParam();
  const Graph g = BuildZooModel("squeezenet");
  const SearchOptions options = DefaultOptions();
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer first;
  const SearchOutcome searched = RunSearch(g, "squeezenet", options, *store, first);

  // Replace the stored results of three merge stages (the search can do
  // without them) by failures of the kind under test.
  constexpr int kFailed = 3;
  MeasureResult failure;
  failure.error = c.stored;
  failure.error_message = "stored by the test";
  std::vector<int> ids;
  std::vector<db::MeasurementKey> keys;
  const std::vector<std::string> plan_keys = testing::PlanKeys(g, searched.plan);
  for (int id = 0; id < static_cast<int>(searched.plan.stage_count()) && ids.size() < kFailed;
       ++id) {
    const Stage stage = searched.plan.StageOf(id);
    if (stage.strategy != Strategy::kMerge || stage.OperatorCount() < 2) continue;
    ids.push_back(id);
    keys.push_back({plan_keys[id], first.Device().fingerprint, 1, options.settings.Key()});
    store->Store(keys.back(), failure);
  }
  ASSERT_EQ(ids.size(), size_t{kFailed}) << "squeezenet has merge candidates";

  CountingMeasurer second;
  const SearchOutcome again = RunSearch(g, "squeezenet", options, *store, second);
  EXPECT_EQ(second.asked, c.measured_again ? kFailed : 0);
  EXPECT_EQ(again.table.stats.measured, c.measured_again ? kFailed : 0);
  EXPECT_EQ(again.table.stats.failed, c.measured_again ? 0 : kFailed);
  for (int i = 0; i < kFailed; ++i) {
    const auto stored = store->Lookup(keys[i]);
    ASSERT_TRUE(stored.has_value());
    // Measured again: the new result replaced the failure. Reused: kept.
    EXPECT_EQ(stored->ok(), c.measured_again);
    EXPECT_EQ(std::isinf(again.table.latency_ms[ids[i]]), !c.measured_again);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, StoredFailureTest,
                         ::testing::Values(ReuseCase{MeasureError::kTimeout, true},
                                           ReuseCase{MeasureError::kBackendFailure, true},
                                           ReuseCase{MeasureError::kOutOfMemory, false},
                                           ReuseCase{MeasureError::kUnsupported, false}),
                         [](const auto& param_info) {
                           return std::string(ToString(param_info.param.stored));
                         });

TEST(MeasureErrorTest, OnlyTimeoutsAndBackendFailuresAreTransient) {
  EXPECT_TRUE(IsTransient(MeasureError::kTimeout));
  EXPECT_TRUE(IsTransient(MeasureError::kBackendFailure));
  EXPECT_FALSE(IsTransient(MeasureError::kOutOfMemory));
  EXPECT_FALSE(IsTransient(MeasureError::kUnsupported));
  EXPECT_FALSE(IsTransient(MeasureError::kNone));
}

}  // namespace
}  // namespace ios::coordinator
