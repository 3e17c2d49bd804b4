#include "db/profile_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "db/schema.h"
#include "tests/db/profile_store_testing.h"
#include "tests/testing/sanitizers.h"

namespace ios::db {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kApplicationIdOffset;
using testing::Key;
using testing::kUserVersionOffset;
using testing::Ok;
using testing::ReadHeaderField;
using testing::RealH100;
using testing::SimV100;
using testing::WriteHeaderField;

class ProfileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "profile_store_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path DbPath() const { return dir_ / "profile.db"; }

  // A memory store with one device and two stages registered.
  static std::unique_ptr<ProfileStore> PopulatedMemoryStore() {
    auto store = ProfileStore::Open(":memory:");
    store->UpsertDevice(SimV100());
    store->UpsertDevice(RealH100());
    store->UpsertStage("conv3x3", "conv 3x3 64->64");
    store->UpsertStage("conv1x1", "conv 1x1 64->128");
    return store;
  }

  fs::path dir_;
};

TEST_F(ProfileStoreTest, ReturnsWhatWasStored) {
  auto store = PopulatedMemoryStore();
  MeasureResult stored = Ok(1.25);
  store->Store(Key("conv3x3", SimV100()), stored);

  std::optional<MeasureResult> found = store->Lookup(Key("conv3x3", SimV100()));
  ASSERT_TRUE(found.has_value());
  EXPECT_DOUBLE_EQ(found->median_ms, 1.25);
  EXPECT_DOUBLE_EQ(found->spread_ms, 0.125);
  EXPECT_EQ(found->samples, 36);
  EXPECT_TRUE(found->ok());
  EXPECT_EQ(found->error_message, "");
}

TEST_F(ProfileStoreTest, StoringTheSameKeyAgainReplacesTheResult) {
  auto store = PopulatedMemoryStore();
  store->Store(Key("conv3x3", SimV100()), Ok(1.0));
  store->Store(Key("conv3x3", SimV100()), Ok(2.0));

  EXPECT_DOUBLE_EQ(store->Lookup(Key("conv3x3", SimV100()))->median_ms, 2.0);
  EXPECT_EQ(store->GetStats().measurements, 1);
}

TEST_F(ProfileStoreTest, LookupMissesWhenAnyPartOfTheKeyDiffers) {
  auto store = PopulatedMemoryStore();
  store->Store(Key("conv3x3", SimV100(), 1, "w2-n6-r6-float32"), Ok(1.0));

  struct Case {
    const char* what;
    MeasurementKey key;
  };
  const Case cases[] = {
      {"another batch size", Key("conv3x3", SimV100(), 8, "w2-n6-r6-float32")},
      {"another device", Key("conv3x3", RealH100(), 1, "w2-n6-r6-float32")},
      {"other settings", Key("conv3x3", SimV100(), 1, "w2-n6-r6-float16")},
      {"another stage", Key("conv1x1", SimV100(), 1, "w2-n6-r6-float32")},
      {"an unknown stage", Key("nope", SimV100(), 1, "w2-n6-r6-float32")},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(store->Lookup(c.key).has_value()) << c.what;
  }
  EXPECT_TRUE(store->Lookup(Key("conv3x3", SimV100(), 1, "w2-n6-r6-float32")).has_value());
}

TEST_F(ProfileStoreTest, KeepsBatchSizesApart) {
  auto store = PopulatedMemoryStore();
  store->Store(Key("conv3x3", SimV100(), 1), Ok(1.0));
  store->Store(Key("conv3x3", SimV100(), 16), Ok(9.0));

  EXPECT_DOUBLE_EQ(store->Lookup(Key("conv3x3", SimV100(), 1))->median_ms, 1.0);
  EXPECT_DOUBLE_EQ(store->Lookup(Key("conv3x3", SimV100(), 16))->median_ms, 9.0);
}

TEST_F(ProfileStoreTest, StoresFailedMeasurementsWithTheirError) {
  auto store = PopulatedMemoryStore();
  const MeasureError errors[] = {MeasureError::kOutOfMemory, MeasureError::kUnsupported,
                                 MeasureError::kBackendFailure, MeasureError::kTimeout};
  int batch = 1;
  for (MeasureError error : errors) {
    MeasureResult failed;
    failed.error = error;
    failed.error_message = "failure #" + std::to_string(batch);
    store->Store(Key("conv3x3", SimV100(), batch), failed);

    std::optional<MeasureResult> found = store->Lookup(Key("conv3x3", SimV100(), batch));
    ASSERT_TRUE(found.has_value());
    EXPECT_FALSE(found->ok());
    EXPECT_EQ(found->error, error);
    EXPECT_EQ(found->error_message, failed.error_message);
    ++batch;
  }
  EXPECT_EQ(store->GetStats().failed_measurements, 4);
}

TEST_F(ProfileStoreTest, AFailureCanBeReplacedByASuccess) {
  auto store = PopulatedMemoryStore();
  MeasureResult failed;
  failed.error = MeasureError::kTimeout;
  failed.error_message = "timed out";
  store->Store(Key("conv3x3", SimV100()), failed);
  store->Store(Key("conv3x3", SimV100()), Ok(3.0));

  std::optional<MeasureResult> found = store->Lookup(Key("conv3x3", SimV100()));
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->ok());
  EXPECT_EQ(found->error_message, "");
  EXPECT_EQ(store->GetStats().failed_measurements, 0);
}

TEST_F(ProfileStoreTest, RefusesToStoreForAStageOrDeviceNotUpserted) {
  auto store = PopulatedMemoryStore();
  try {
    store->Store(Key("never-upserted", SimV100()), Ok(1.0));
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("never-upserted"));
    EXPECT_THAT(e.what(), HasSubstr("UpsertStage"));
  }
  DeviceInfo unknown{"cuda", "A100", "cuda|A100", false};
  EXPECT_THROW(store->Store(Key("conv3x3", unknown), Ok(1.0)), Error);
}

TEST_F(ProfileStoreTest, SetsTheSchemaVersionInUserVersion) {
  ProfileStore::Open(DbPath().string());  // creates, then closes
  EXPECT_EQ(ReadHeaderField(DbPath(), kUserVersionOffset), static_cast<uint32_t>(kSchemaVersion));
  EXPECT_NE(ReadHeaderField(DbPath(), kApplicationIdOffset), 0u);
}

TEST_F(ProfileStoreTest, RefusesADbWrittenByANewerSchemaVersion) {
  ProfileStore::Open(DbPath().string());
  WriteHeaderField(DbPath(), kUserVersionOffset, static_cast<uint32_t>(kSchemaVersion + 1));
  try {
    ProfileStore::Open(DbPath().string());
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(DbPath().string()));
    EXPECT_THAT(e.what(), HasSubstr("version " + std::to_string(kSchemaVersion + 1)));
    EXPECT_THAT(e.what(), HasSubstr("newer"));
  }
}

// End-to-end figures of networks under schedules (the search's
// verification): keyed by network, device, batch and settings; replaced,
// not duplicated; listed per model; failures kept with their kind.
TEST_F(ProfileStoreTest, StoresLooksUpAndListsEndToEndFigures) {
  auto store = ProfileStore::Open(DbPath().string());
  NetworkRunRow row;
  row.key = {"graph|stages:P[1,];|seed:1", "cpu|fp", 1, "w2-n1-r10-float32"};
  row.model = "squeezenet";
  row.schedule = "ios";
  row.stages = 18;
  row.predicted_ms = 25.0;
  row.result = Ok(29.5);
  store->StoreNetworkRun(row);
  std::optional<NetworkRunRow> got = store->LookupNetworkRun(row.key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->result.median_ms, 29.5);
  EXPECT_EQ(got->predicted_ms, 25.0);
  EXPECT_EQ(got->schedule, "ios");
  EXPECT_EQ(got->stages, 18);
  EXPECT_FALSE(got->measured_at.empty());
  std::vector<NetworkRunKey> others(4, row.key);
  others[0].network_key += "x";
  others[1].device_fingerprint = "cpu|other";
  others[2].batch_size = 16;
  others[3].settings_key = "w0-n1-r1-float32";
  for (const NetworkRunKey& other : others) {
    EXPECT_FALSE(store->LookupNetworkRun(other).has_value())
        << other.device_fingerprint << " " << other.batch_size << " " << other.settings_key;
  }
  row.result = Ok(27.0);
  store->StoreNetworkRun(row);
  NetworkRunRow failed = row;
  failed.key.batch_size = 64;
  failed.schedule = "greedy";
  failed.predicted_ms = NAN;
  failed.result = MeasureResult{};
  failed.result.error = MeasureError::kOutOfMemory;
  failed.result.error_message = "does not fit";
  store->StoreNetworkRun(failed);
  const std::vector<NetworkRunRow> rows = store->NetworkRuns("squeezenet");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(store->LookupNetworkRun(row.key)->result.median_ms, 27.0);
  const NetworkRunRow& oom = rows[0].schedule == "greedy" ? rows[0] : rows[1];
  EXPECT_EQ(oom.result.error, MeasureError::kOutOfMemory);
  EXPECT_EQ(oom.result.error_message, "does not fit");
  EXPECT_TRUE(std::isnan(oom.predicted_ms));
  EXPECT_TRUE(store->NetworkRuns("resnet50").empty());
  EXPECT_EQ(store->NetworkRuns("").size(), 2u);
}

TEST_F(ProfileStoreTest, RefusesAFileThatIsNotAnSQLiteDb) {
  const fs::path text = dir_ / "notes.txt";
  std::ofstream(text) << "this is not a database, just a long enough line of text to fill "
                         "the first hundred bytes of the file where SQLite looks for its "
                         "header string and page size.\n";
  try {
    ProfileStore::Open(text.string());
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(text.string()));
    EXPECT_THAT(e.what(), HasSubstr("not an ios-farm profiling DB"));
  }
  // The file is left as it was.
  EXPECT_FALSE(fs::exists(dir_ / "notes.txt-wal"));
}

TEST_F(ProfileStoreTest, RefusesAnSQLiteDbOfAnotherApplication) {
  ProfileStore::Open(DbPath().string());
  WriteHeaderField(DbPath(), kApplicationIdOffset, 0x12345678);
  try {
    ProfileStore::Open(DbPath().string());
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(DbPath().string()));
    EXPECT_THAT(e.what(), HasSubstr("another application"));
  }
}

TEST_F(ProfileStoreTest, NamesThePathWhenTheFileCannotBeOpened) {
  const fs::path missing_dir = dir_ / "no" / "such" / "dir" / "profile.db";
  try {
    ProfileStore::Open(missing_dir.string());
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing_dir.string()));
  }
}

TEST_F(ProfileStoreTest, KeepsDataAcrossReopening) {
  {
    auto store = ProfileStore::Open(DbPath().string());
    store->UpsertDevice(SimV100());
    store->UpsertStage("conv3x3", "conv 3x3");
    store->Store(Key("conv3x3", SimV100(), 4), Ok(0.5));
  }
  auto store = ProfileStore::Open(DbPath().string());
  std::optional<MeasureResult> found = store->Lookup(Key("conv3x3", SimV100(), 4));
  ASSERT_TRUE(found.has_value());
  EXPECT_DOUBLE_EQ(found->median_ms, 0.5);
  ASSERT_EQ(store->Devices().size(), 1u);
  EXPECT_TRUE(store->Devices()[0].simulated);
}

TEST_F(ProfileStoreTest, StoreIsVisibleToAnotherConnectionAtOnce) {
  auto writer = ProfileStore::Open(DbPath().string());
  auto reader = ProfileStore::Open(DbPath().string());
  writer->UpsertDevice(SimV100());
  writer->UpsertStage("conv3x3", "conv 3x3");
  writer->Store(Key("conv3x3", SimV100()), Ok(0.75));

  std::optional<MeasureResult> found = reader->Lookup(Key("conv3x3", SimV100()));
  ASSERT_TRUE(found.has_value());
  EXPECT_DOUBLE_EQ(found->median_ms, 0.75);
}

TEST_F(ProfileStoreTest, AReaderCanOpenAndReadWhileTheWriterIsInATransaction) {
  auto writer = ProfileStore::Open(DbPath().string());
  writer->UpsertDevice(SimV100());
  writer->UpsertStage("conv3x3", "conv 3x3");
  writer->Store(Key("conv3x3", SimV100()), Ok(1.0));
  writer->RunInTransaction([&] {
    writer->Store(Key("conv3x3", SimV100()), Ok(2.0));  // not committed yet
    auto reader = ProfileStore::Open(DbPath().string());
    EXPECT_DOUBLE_EQ(reader->Lookup(Key("conv3x3", SimV100()))->median_ms, 1.0);
    EXPECT_EQ(reader->Devices().size(), 1u);
  });
  auto reader = ProfileStore::Open(DbPath().string());
  EXPECT_DOUBLE_EQ(reader->Lookup(Key("conv3x3", SimV100()))->median_ms, 2.0);
}

TEST_F(ProfileStoreTest, UsesWriteAheadLoggingForFiles) {
  auto store = ProfileStore::Open(DbPath().string());
  store->UpsertDevice(SimV100());
  EXPECT_TRUE(fs::exists(dir_ / "profile.db-wal"));
}

TEST_F(ProfileStoreTest, MeasurementsOfAModelListOnlyItsStages) {
  auto store = PopulatedMemoryStore();
  store->UpsertStage("shared", "used by both");
  store->LinkModelStageKeys("resnet", {"conv3x3", "shared"});
  store->LinkModelStageKeys("inception", {"conv1x1", "shared"});
  store->LinkModelStageKeys("resnet", {"conv3x3"});  // linking twice is harmless
  for (const char* stage : {"conv3x3", "conv1x1", "shared"}) {
    store->Store(Key(stage, SimV100()), Ok(1.0));
  }

  std::vector<std::string> resnet_stages;
  for (const MeasurementRow& row : store->Measurements("resnet")) {
    resnet_stages.push_back(row.stage_key);
    EXPECT_EQ(row.device_name, "sim:v100");
    EXPECT_FALSE(row.measured_at.empty());
  }
  EXPECT_THAT(resnet_stages, ElementsAre("conv3x3", "shared"));
  EXPECT_EQ(store->Measurements("inception").size(), 2u);
  EXPECT_EQ(store->Measurements("").size(), 3u);
  EXPECT_TRUE(store->Measurements("vgg").empty());
  EXPECT_EQ(store->GetStats().models, 2);
}

TEST_F(ProfileStoreTest, MeasurementRowsCarryTheStageDescriptionAndKey) {
  auto store = PopulatedMemoryStore();
  store->Store(Key("conv1x1", RealH100(), 8, "w1-n2-r3-float16"), Ok(4.0));
  std::vector<MeasurementRow> rows = store->Measurements("");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].stage_key, "conv1x1");
  EXPECT_EQ(rows[0].stage_description, "conv 1x1 64->128");
  EXPECT_EQ(rows[0].device_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(rows[0].batch_size, 8);
  EXPECT_EQ(rows[0].settings_key, "w1-n2-r3-float16");
  EXPECT_DOUBLE_EQ(rows[0].result.median_ms, 4.0);
}

TEST_F(ProfileStoreTest, LinkingAStageNotYetUpsertedRegistersIt) {
  auto store = PopulatedMemoryStore();
  store->LinkModelStageKeys("resnet", {"late-stage"});
  store->UpsertStage("late-stage", "described later");
  store->Store(Key("late-stage", SimV100()), Ok(1.0));

  std::vector<MeasurementRow> rows = store->Measurements("resnet");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].stage_description, "described later");
}

TEST_F(ProfileStoreTest, LinksManyStagesInOneCall) {
  auto store = PopulatedMemoryStore();
  std::vector<std::string> keys;
  // Far past SQLite's old 999-variable limit; fewer under the sanitizers,
  // which make each upsert about 100x slower.
  const int count = ::ios::testing::kSanitized ? 2500 : 20000;
  for (int i = 0; i < count; ++i) keys.push_back("stage-" + std::to_string(i));
  store->RunInTransaction([&] {
    for (const std::string& key : keys) store->UpsertStage(key, "generated");
  });
  store->LinkModelStageKeys("big", keys);
  EXPECT_EQ(store->GetStats().stages, count + 2);
  EXPECT_EQ(store->GetStats().models, 1);
}

TEST_F(ProfileStoreTest, StoresManyResultsAddingTheStagesThatHaveNoRow) {
  auto store = PopulatedMemoryStore();
  const std::vector<std::string> keys = {"conv3x3", "new-stage"};
  std::vector<size_t> keys_asked;
  const std::vector<StageMeasurement> measurements = {{HashStageKey(keys[0]), Ok(1.0)},
                                                      {HashStageKey(keys[1]), Ok(2.0)}};
  store->StoreMeasurements(SimV100().fingerprint, 1, "w1-n1-r1-float32", measurements,
                           [&](size_t i) {
                             keys_asked.push_back(i);
                             return keys[i];
                           });
  EXPECT_THAT(keys_asked, ElementsAre(1u)) << "only a stage with no row needs its key";
  const std::optional<MeasureResult> found =
      store->Lookup(Key("new-stage", SimV100(), 1, "w1-n1-r1-float32"));
  ASSERT_TRUE(found.has_value());
  EXPECT_DOUBLE_EQ(found->median_ms, 2.0);
  EXPECT_EQ(store->Measurements("").size(), 2u);
  // A stage whose id belongs to another key's row is refused, and nothing
  // of the batch is kept.
  StageKeyHash forged = HashStageKey("conv1x1");
  ++forged.check;
  EXPECT_THROW(store->StoreMeasurements(SimV100().fingerprint, 1, "w1-n1-r1-float32",
                                        std::vector<StageMeasurement>{
                                            {HashStageKey("conv1x1"), Ok(3.0)}, {forged, Ok(4.0)}},
                                        [](size_t) { return std::string("forged"); }),
               Error);
  EXPECT_EQ(store->Measurements("").size(), 2u);
}

TEST_F(ProfileStoreTest, UpsertingADeviceAgainRefreshesItWithoutDuplicating) {
  auto store = ProfileStore::Open(":memory:");
  DeviceInfo device = SimV100();
  store->UpsertDevice(device);
  device.name = "sim:v100 (renamed)";
  store->UpsertDevice(device);

  std::vector<DeviceRow> devices = store->Devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].name, "sim:v100 (renamed)");
  EXPECT_EQ(devices[0].fingerprint, SimV100().fingerprint);
  EXPECT_EQ(devices[0].backend, "sim");
  EXPECT_TRUE(devices[0].simulated);
}

TEST_F(ProfileStoreTest, DevicesCountTheirMeasurements) {
  auto store = PopulatedMemoryStore();
  store->Store(Key("conv3x3", SimV100(), 1), Ok(1.0));
  store->Store(Key("conv3x3", SimV100(), 2), Ok(1.0));
  store->Store(Key("conv1x1", RealH100(), 1), Ok(1.0));

  std::vector<DeviceRow> devices = store->Devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].name, "sim:v100");
  EXPECT_EQ(devices[0].measurements, 2);
  EXPECT_TRUE(devices[0].simulated);
  EXPECT_EQ(devices[1].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(devices[1].measurements, 1);
  EXPECT_FALSE(devices[1].simulated);
}

TEST_F(ProfileStoreTest, RecordsSearchesAndListsThemInOrder) {
  auto store = PopulatedMemoryStore();
  SearchRecord first;
  first.model = "inception_v3";
  first.device_fingerprint = SimV100().fingerprint;
  first.batch_size = 1;
  first.settings_json = R"({"r":3,"s":8})";
  first.schedule_json = R"({"stages":[]})";
  first.latency_ms = 4.5;
  first.stages_measured = 120;
  first.stages_reused = 30;
  first.enumerate_s = 0.1;
  first.measure_s = 12.5;
  first.solve_s = 0.02;
  SearchRecord second = first;
  second.model = "squeezenet";
  second.batch_size = 16;
  second.started_at = "2024-01-02T03:04:05Z";

  const int64_t first_id = store->RecordSearch(first);
  const int64_t second_id = store->RecordSearch(second);
  EXPECT_LT(first_id, second_id);

  std::vector<SearchRecord> searches = store->Searches();
  ASSERT_EQ(searches.size(), 2u);
  EXPECT_EQ(searches[0].model, "inception_v3");
  EXPECT_EQ(searches[0].device_fingerprint, SimV100().fingerprint);
  EXPECT_EQ(searches[0].settings_json, first.settings_json);
  EXPECT_EQ(searches[0].schedule_json, first.schedule_json);
  EXPECT_DOUBLE_EQ(searches[0].latency_ms, 4.5);
  EXPECT_EQ(searches[0].stages_measured, 120);
  EXPECT_EQ(searches[0].stages_reused, 30);
  EXPECT_DOUBLE_EQ(searches[0].enumerate_s, 0.1);
  EXPECT_DOUBLE_EQ(searches[0].measure_s, 12.5);
  EXPECT_DOUBLE_EQ(searches[0].solve_s, 0.02);
  EXPECT_THAT(searches[0].started_at,
              ::testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z"));
  EXPECT_EQ(searches[1].model, "squeezenet");
  EXPECT_EQ(searches[1].batch_size, 16);
  EXPECT_EQ(searches[1].started_at, "2024-01-02T03:04:05Z");
  EXPECT_EQ(searches[0].id, first_id);
  EXPECT_EQ(searches[1].id, second_id);
}

TEST_F(ProfileStoreTest, ASearchKeepsItsReportExactly) {
  auto store = PopulatedMemoryStore();
  SearchRecord search;
  search.model = "nasnet";
  search.device_fingerprint = SimV100().fingerprint;
  // Long and repetitive like a real report input, with bytes a text column
  // would mangle (a NUL, invalid UTF-8).
  std::string report;
  for (int i = 0; i < 2000; ++i) report += "{\"stage\":" + std::to_string(i) + "},";
  report += std::string("\0\xff\xfe end", 8);
  search.report_json = report;
  const int64_t with_report = store->RecordSearch(search);
  search.report_json.clear();
  const int64_t without = store->RecordSearch(search);

  const std::vector<SearchRecord> searches = store->Searches();
  ASSERT_EQ(searches.size(), 2u);
  EXPECT_EQ(searches[0].id, with_report);
  EXPECT_EQ(searches[0].report_json, report);
  EXPECT_EQ(searches[1].id, without);
  EXPECT_TRUE(searches[1].report_json.empty());
}

TEST_F(ProfileStoreTest, StatsCountEverything) {
  auto store = PopulatedMemoryStore();
  EXPECT_EQ(store->GetStats().devices, 2);
  EXPECT_EQ(store->GetStats().stages, 2);
  EXPECT_EQ(store->GetStats().measurements, 0);

  store->Store(Key("conv3x3", SimV100()), Ok(1.0));
  MeasureResult oom;
  oom.error = MeasureError::kOutOfMemory;
  store->Store(Key("conv1x1", SimV100()), oom);
  store->LinkModelStageKeys("resnet", {"conv3x3"});
  SearchRecord search;
  search.model = "squeezenet";  // a model only seen in a search counts too
  search.device_fingerprint = SimV100().fingerprint;
  store->RecordSearch(search);

  Stats stats = store->GetStats();
  EXPECT_EQ(stats.devices, 2);
  EXPECT_EQ(stats.stages, 2);
  EXPECT_EQ(stats.measurements, 2);
  EXPECT_EQ(stats.failed_measurements, 1);
  EXPECT_EQ(stats.searches, 1);
  EXPECT_EQ(stats.models, 2);
}

TEST_F(ProfileStoreTest, ATransactionRollsBackWhenItsBodyThrows) {
  auto store = PopulatedMemoryStore();
  EXPECT_THROW(store->RunInTransaction([&] {
    store->Store(Key("conv3x3", SimV100()), Ok(1.0));
    throw std::runtime_error("abandon");
  }),
               std::runtime_error);
  EXPECT_FALSE(store->Lookup(Key("conv3x3", SimV100())).has_value());

  // The store is usable afterwards, and a committed body is kept.
  store->RunInTransaction([&] { store->Store(Key("conv3x3", SimV100()), Ok(2.0)); });
  EXPECT_TRUE(store->Lookup(Key("conv3x3", SimV100())).has_value());
}

TEST_F(ProfileStoreTest, ANestedTransactionRollsBackOnlyItsOwnWork) {
  auto store = PopulatedMemoryStore();
  store->RunInTransaction([&] {
    store->Store(Key("conv3x3", SimV100()), Ok(1.0));
    EXPECT_THROW(store->RunInTransaction([&] {
      store->Store(Key("conv1x1", SimV100()), Ok(1.0));
      throw std::runtime_error("inner");
    }),
                 std::runtime_error);
  });
  EXPECT_TRUE(store->Lookup(Key("conv3x3", SimV100())).has_value());
  EXPECT_FALSE(store->Lookup(Key("conv1x1", SimV100())).has_value());
}

}  // namespace
}  // namespace ios::db
