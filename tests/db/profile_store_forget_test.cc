// ForgetMeasurements and ForgetNetworkRuns drop exactly the rows their
// filter selects.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "db/profile_store.h"
#include "tests/db/profile_store_testing.h"

namespace ios::db {
namespace {

using testing::Key;
using testing::Ok;
using testing::RealH100;
using testing::SimV100;

MeasureResult Failed(MeasureError error) {
  MeasureResult result;
  result.error = error;
  result.error_message = "failed for the test";
  return result;
}

// A filter by its fields (designated initializers would warn about the rest).
ForgetFilter Filter(bool failures, bool successes, std::vector<MeasureError> kinds = {},
                    const std::string& device = "", const std::string& model = "") {
  ForgetFilter filter;
  filter.failures = failures;
  filter.successes = successes;
  filter.kinds = std::move(kinds);
  filter.device = device;
  filter.model = model;
  return filter;
}

// Two devices; on each: good "conv" and "pool", a timeout on "merge" and an
// out-of-memory on "big". Model "a" uses conv and merge, model "b" the rest.
std::unique_ptr<ProfileStore> Populated() {
  auto store = ProfileStore::Open(":memory:");
  for (const char* stage : {"conv", "pool", "merge", "big"}) store->UpsertStage(stage, stage);
  store->LinkModelStageKeys("a", {"conv", "merge"});
  store->LinkModelStageKeys("b", {"pool", "big"});
  for (const DeviceInfo& device : {SimV100(), RealH100()}) {
    store->UpsertDevice(device);
    store->Store(Key("conv", device), Ok(1.0));
    store->Store(Key("pool", device), Ok(0.5));
    store->Store(Key("merge", device), Failed(MeasureError::kTimeout));
    store->Store(Key("big", device), Failed(MeasureError::kOutOfMemory));
  }
  return store;
}

TEST(ForgetMeasurementsTest, FailuresAloneDropEveryFailureAndNoGoodMeasurement) {
  auto store = Populated();
  EXPECT_EQ(store->ForgetMeasurements(Filter(true, false)), 4);
  EXPECT_EQ(store->GetStats().measurements, 4);
  EXPECT_EQ(store->GetStats().failed_measurements, 0);
}

TEST(ForgetMeasurementsTest, AKindNarrowsTheFailures) {
  auto store = Populated();
  EXPECT_EQ(store->ForgetMeasurements(Filter(true, false, {MeasureError::kTimeout})), 2);
  EXPECT_FALSE(store->Lookup(Key("merge", SimV100())).has_value());
  EXPECT_TRUE(store->Lookup(Key("big", SimV100())).has_value());
  EXPECT_EQ(store->ForgetMeasurements(
                Filter(true, false, {MeasureError::kUnsupported, MeasureError::kOutOfMemory})),
            2);
  EXPECT_EQ(store->GetStats().measurements, 4);
}

TEST(ForgetMeasurementsTest, ADeviceIsNamedByNameOrFingerprint) {
  auto store = Populated();
  EXPECT_EQ(store->ForgetMeasurements(Filter(true, false, {}, "sim:v100")), 2);
  EXPECT_EQ(store->ForgetMeasurements(Filter(true, false, {}, RealH100().fingerprint)), 2);
  EXPECT_EQ(store->ForgetMeasurements(Filter(true, false, {}, "no such device")), 0);
}

TEST(ForgetMeasurementsTest, AModelNarrowsToItsStages) {
  auto store = Populated();
  EXPECT_EQ(store->ForgetMeasurements(Filter(false, true, {}, "sim:v100", "a")), 1);
  EXPECT_FALSE(store->Lookup(Key("conv", SimV100())).has_value());
  EXPECT_TRUE(store->Lookup(Key("conv", RealH100())).has_value());
  EXPECT_TRUE(store->Lookup(Key("pool", SimV100())).has_value());
}

TEST(ForgetMeasurementsTest, BothDropEverythingThatMatches) {
  auto store = Populated();
  EXPECT_EQ(store->ForgetMeasurements(Filter(true, true, {}, "", "b")), 4);
  EXPECT_EQ(store->GetStats().measurements, 4);
  EXPECT_EQ(store->GetStats().stages, 4);  // stages and devices stay
  EXPECT_EQ(store->GetStats().devices, 2);
}

TEST(ForgetMeasurementsTest, RefusesAFilterThatSelectsNothingOrMixesKindsWithSuccesses) {
  auto store = Populated();
  EXPECT_THROW(store->ForgetMeasurements(Filter(false, false)), Error);
  EXPECT_THROW(store->ForgetMeasurements(Filter(false, true, {MeasureError::kTimeout})), Error);
  EXPECT_EQ(store->GetStats().measurements, 8);
}

// End-to-end figures on both devices: model "a" under "ios" (good) and
// "greedy" (timed out), model "b" under "ios" (out of memory).
std::unique_ptr<ProfileStore> WithFigures() {
  auto store = Populated();
  for (const DeviceInfo& device : {SimV100(), RealH100()}) {
    const auto figure = [&](const std::string& model, const std::string& schedule,
                            const MeasureResult& result) {
      NetworkRunRow row;
      row.key = {model + "/" + schedule, device.fingerprint, 1, "w2-n1-r10-float32"};
      row.model = model;
      row.schedule = schedule;
      row.stages = 3;
      row.result = result;
      store->StoreNetworkRun(row);
    };
    figure("a", "ios", Ok(2.0));
    figure("a", "greedy", Failed(MeasureError::kTimeout));
    figure("b", "ios", Failed(MeasureError::kOutOfMemory));
  }
  return store;
}

NetworkRunKey FigureKey(const std::string& model, const std::string& schedule,
                        const DeviceInfo& device) {
  return {model + "/" + schedule, device.fingerprint, 1, "w2-n1-r10-float32"};
}

TEST(ForgetNetworkRunsTest, FailuresAloneDropEveryFailedFigureAndNoGoodOne) {
  auto store = WithFigures();
  EXPECT_EQ(store->ForgetNetworkRuns(Filter(true, false)), 4);
  ASSERT_EQ(store->NetworkRuns("").size(), 2u);
  for (const NetworkRunRow& row : store->NetworkRuns("")) EXPECT_TRUE(row.result.ok());
  // Measurements are another table: untouched.
  EXPECT_EQ(store->GetStats().measurements, 8);
}

TEST(ForgetNetworkRunsTest, AKindNarrowsTheFailedFigures) {
  auto store = WithFigures();
  EXPECT_EQ(store->ForgetNetworkRuns(Filter(true, false, {MeasureError::kOutOfMemory})), 2);
  EXPECT_FALSE(store->LookupNetworkRun(FigureKey("b", "ios", SimV100())).has_value());
  EXPECT_TRUE(store->LookupNetworkRun(FigureKey("a", "greedy", SimV100())).has_value());
}

TEST(ForgetNetworkRunsTest, ADeviceIsNamedByNameOrFingerprint) {
  auto store = WithFigures();
  // A figure keeps its device as a fingerprint, which names it even where
  // the devices table has no row for it.
  NetworkRunRow unregistered;
  unregistered.key = {"a/ios", "tpu|v5", 1, "w2-n1-r10-float32"};
  unregistered.model = "a";
  unregistered.schedule = "ios";
  unregistered.result = Ok(1.0);
  store->StoreNetworkRun(unregistered);
  EXPECT_EQ(store->ForgetNetworkRuns(Filter(true, true, {}, "sim:v100")), 3);
  EXPECT_EQ(store->ForgetNetworkRuns(Filter(true, true, {}, RealH100().fingerprint)), 3);
  EXPECT_EQ(store->ForgetNetworkRuns(Filter(true, true, {}, "no such device")), 0);
  EXPECT_EQ(store->ForgetNetworkRuns(Filter(true, true, {}, "tpu|v5")), 1);
  EXPECT_TRUE(store->NetworkRuns("").empty());
}

TEST(ForgetNetworkRunsTest, AModelNarrowsToItsOwnFigures) {
  auto store = WithFigures();
  EXPECT_EQ(store->ForgetNetworkRuns(Filter(false, true, {}, "sim:v100", "a")), 1);
  EXPECT_FALSE(store->LookupNetworkRun(FigureKey("a", "ios", SimV100())).has_value());
  EXPECT_TRUE(store->LookupNetworkRun(FigureKey("a", "ios", RealH100())).has_value());
  EXPECT_TRUE(store->LookupNetworkRun(FigureKey("a", "greedy", SimV100())).has_value());
  EXPECT_EQ(store->NetworkRuns("b").size(), 2u);
}

TEST(ForgetNetworkRunsTest, RefusesAFilterThatSelectsNothingOrMixesKindsWithSuccesses) {
  auto store = WithFigures();
  EXPECT_THROW(store->ForgetNetworkRuns(Filter(false, false)), Error);
  EXPECT_THROW(store->ForgetNetworkRuns(Filter(false, true, {MeasureError::kTimeout})), Error);
  EXPECT_EQ(store->NetworkRuns("").size(), 6u);
}

}  // namespace
}  // namespace ios::db
