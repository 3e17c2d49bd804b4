// Schema version 5 (each search keeps its report input, packed) over
// version 4: a version 4 file written by the previous build
// (tests/data/profile_v4.db) keeps every row of every table, and its
// searches gain their ids and a NULL report. Schema version 4 (each settings row names its
// StageProtocol, and the end-to-end figures of verified schedules get their table) over version 3:
// a version 3 file written by the previous build (tests/data/profile_v3.db) keeps every row, named
// isolated, and an executed search does not read them. Schema version 3 (a detail per measurement)
// over version 2 (compact stage keys): a version 2 file written by the previous build
// (tests/data/profile_v2.db: a tiny model on sim:v100, measured exhaustively, and on sim:k80 at
// batch 2) keeps every measurement and gains an empty detail. Version 2 over 1: a version 1 file
// written by the previous build (tests/data/profile_v1.db: a SqueezeNet
// search on sim:v100, 21 stored out-of-memory failures of a tiny model on
// sim:k80, one recorded search) is upgraded in place by a coordinator's
// open and keeps every measurement, key, description, model link, device
// and search; stage texts round-trip; hashes are stable; a colliding key is
// refused, not mixed.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "db/profile_store.h"
#include "db/schema.h"
#include "db/stage_text.h"
#include "tests/db/profile_store_testing.h"
#include "tests/testing/paths.h"
#include "tests/testing/process.h"

namespace ios::db {
namespace {

namespace fs = std::filesystem;
using testing::kUserVersionOffset;
using testing::ReadHeaderField;

// One v1 measurement as plain SQLite reads it.
struct V1Row {
  std::string key, description, fingerprint, settings, error, error_message, measured_at;
  int batch = 0;
  double median = 0, spread = 0;
  int64_t samples = 0;
};

std::string Column(sqlite3_stmt* statement, int column) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, column));
  return text == nullptr ? "" : text;
}

std::vector<V1Row> ReadV1(const fs::path& path, std::map<std::string, int>* links) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db,
                               "SELECT s.stage_key, s.description, d.fingerprint, m.settings_key, "
                               "m.error, m.error_message, m.measured_at, m.batch_size, "
                               "m.median_ms, m.spread_ms, m.samples FROM measurements m "
                               "JOIN stages s ON s.id = m.stage_id "
                               "JOIN devices d ON d.id = m.device_id",
                               -1, &statement, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  std::vector<V1Row> rows;
  while (sqlite3_step(statement) == SQLITE_ROW) {
    rows.push_back({Column(statement, 0), Column(statement, 1), Column(statement, 2),
                    Column(statement, 3), Column(statement, 4), Column(statement, 5),
                    Column(statement, 6), sqlite3_column_int(statement, 7),
                    sqlite3_column_double(statement, 8), sqlite3_column_double(statement, 9),
                    sqlite3_column_int64(statement, 10)});
  }
  sqlite3_finalize(statement);
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT model, count(*) FROM model_stages GROUP BY model", -1,
                               &statement, nullptr),
            SQLITE_OK);
  while (sqlite3_step(statement) == SQLITE_ROW) {
    (*links)[Column(statement, 0)] = sqlite3_column_int(statement, 1);
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return rows;
}

class ProfileStoreMigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    fs::copy_file(fs::path(IOS_TEST_DATA_DIR) / "profile_v1.db", path_);
  }

 private:
  ::ios::testing::TempDir dir_{"ios_migration_test"};  // first: path_ lives in it

 protected:
  fs::path path_ = dir_.path() / "old.db";
};

TEST_F(ProfileStoreMigrationTest, AVersionOneFileKeepsEveryMeasurementAfterTheUpgrade) {
  ASSERT_EQ(ReadHeaderField(path_, kUserVersionOffset), 1u) << "the test data is version 1";
  std::map<std::string, int> links;
  const std::vector<V1Row> before = ReadV1(path_, &links);
  ASSERT_EQ(before.size(), 179u);
  const uintmax_t old_size = fs::file_size(path_);

  // ios-db refuses the old file until a coordinator has opened it.
  OpenOptions read_only;
  read_only.mode = OpenMode::kReadOnly;
  try {
    ProfileStore::Open(path_.string(), read_only);
    ADD_FAILURE() << "a version 1 file opened read-only";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("upgrade it to version " + std::to_string(kSchemaVersion)),
              std::string::npos)
        << e.what();
  }

  auto store = ProfileStore::Open(path_.string());
  int failures = 0;
  for (const V1Row& row : before) {
    const auto stored = store->Lookup({row.key, row.fingerprint, row.batch, row.settings});
    ASSERT_TRUE(stored.has_value()) << row.key;
    EXPECT_EQ(stored->median_ms, row.median);
    EXPECT_EQ(stored->spread_ms, row.spread);
    EXPECT_EQ(stored->samples, row.samples);
    EXPECT_EQ(stored->error_message, row.error_message);
    EXPECT_EQ(stored->ok(), row.error.empty());
    if (!row.error.empty()) {
      EXPECT_EQ(ToString(stored->error), row.error);
      ++failures;
    }
  }
  EXPECT_EQ(failures, 21);
  // Keys, descriptions and times read back as they were.
  std::map<std::string, std::tuple<std::string, std::string>> listed;
  for (const MeasurementRow& row : store->Measurements("")) {
    listed[row.stage_key + "|" + std::to_string(row.batch_size)] = {row.stage_description,
                                                                    row.measured_at};
  }
  ASSERT_EQ(listed.size(), before.size());
  for (const V1Row& row : before) {
    const auto it = listed.find(row.key + "|" + std::to_string(row.batch));
    ASSERT_NE(it, listed.end()) << row.key;
    EXPECT_EQ(std::get<0>(it->second), row.description);
    EXPECT_EQ(std::get<1>(it->second), row.measured_at);
  }
  // Model links, devices, the search.
  ASSERT_FALSE(links.empty());
  for (const auto& [model, count] : links) {
    EXPECT_EQ(static_cast<int>(store->Measurements(model).size()), count) << model;
  }
  const Stats stats = store->GetStats();
  EXPECT_EQ(stats.devices, 2);
  EXPECT_EQ(stats.measurements, 179);
  EXPECT_EQ(stats.failed_measurements, 21);
  EXPECT_EQ(stats.searches, 1);
  // The space of the old keys is given back; closing checkpoints the WAL
  // into the file, whose header then says the current version (1 -> 2 -> 3 -> 4).
  store.reset();
  EXPECT_EQ(ReadHeaderField(path_, kUserVersionOffset), static_cast<uint32_t>(kSchemaVersion));
  EXPECT_LT(fs::file_size(path_), old_size);
  // Opening again changes nothing.
  auto again = ProfileStore::Open(path_.string());
  EXPECT_EQ(again->GetStats().measurements, 179);
}

TEST(StageTextTest, KeysAndDescriptionsRoundTripAndShrink) {
  const std::string key =
      "v1;parallel;in=256x35x35,;g=conv(o48,k1x1,s1x1,p0x0,d1x1,g1,b1,relu)<X0[0:256]+|>;"
      "g=conv(o64,k1x1,s1x1,p0x0,d1x1,g1,b1,relu)<X0[0:256]+|>conv(o96,k3x3,s1x1,p1x1,d1x1,g1,"
      "b1,relu)<L0[0:64]+|>conv(o96,k3x3,s1x1,p1x1,d1x1,g1,b1,relu)<L1[0:96]+|>;"
      "g=pool(avg,k3x3,s1x1,p1x1)<X0[0:256]+|>";
  const std::string description =
      "parallel conv1x1/1x1 p0x0 48 relu || conv1x1/1x1 p0x0 64 relu -> conv3x3/1x1 p1x1 96 "
      "relu -> conv3x3/1x1 p1x1 96 relu || avgpool3x3/1x1 p1x1 on 256x35x35";
  const std::string packed = PackStageText({key, description});
  EXPECT_LT(packed.size() * 3, key.size() + description.size());
  const StageText back = UnpackStageText(packed);
  EXPECT_EQ(back.key, key);
  EXPECT_EQ(back.description, description);
  EXPECT_EQ(PackStageText({key, description}), packed) << "deterministic";
  // Searches store no description: it is derived from the key on read.
  const std::string without = PackStageText({key, ""});
  EXPECT_LT(without.size(), packed.size());
  EXPECT_EQ(UnpackStageText(without).description, description);
  EXPECT_EQ(UnpackStageText(PackStageText({"made-up key", ""})).description, "");
  const StageText empty = UnpackStageText(PackStageText({"", ""}));
  EXPECT_EQ(empty.key, "");
  EXPECT_THROW(UnpackStageText(""), Error);
  EXPECT_THROW(UnpackStageText(std::string("\x01garbage", 8)), Error);
  EXPECT_THROW(UnpackStageText(std::string("\x07", 1)), Error);
}

// The hashes are part of the file format: they must not change.
TEST(StageTextTest, HashesAreStableAndIndependent) {
  const StageKeyHash a = HashStageKey("v1;parallel;in=8x8x8,;g=id<X0[0:8]+|>");
  EXPECT_GE(a.id, 0);
  EXPECT_EQ(a, HashStageKey("v1;parallel;in=8x8x8,;g=id<X0[0:8]+|>"));
  EXPECT_NE(a.id, HashStageKey("v1;parallel;in=8x8x8,;g=id<X0[0:8]+|> ").id);
  EXPECT_NE(a.id, a.check);
  EXPECT_EQ(HashStageKey("").id, HashStageKey(std::string_view()).id);
  EXPECT_NE(HashStageKey("a").id, HashStageKey("b").id);
  EXPECT_NE(HashStageKey("abcdefgh").id, HashStageKey(std::string_view("abcdefgh\0", 9)).id)
      << "length counts";
}

// Golden values, computed by an independent implementation of the
// documented hash (Python, from the definition in common/stage_key_hash.cc): any
// change to the hash would orphan every stage row of every existing DB.
TEST(StageTextTest, HashesMatchTheFileFormat) {
  std::string long_text;
  for (int copy = 0; copy < 3; ++copy) {
    for (int byte = 0; byte < 256; ++byte) long_text += static_cast<char>(byte);
  }
  long_text += "xyz";  // 771 bytes: many words and a 3-byte tail
  const std::vector<std::pair<std::string, StageKeyHash>> golden = {
      {"", {2337764917401434399, 1081920835554008457}},
      {"a", {6621984371325459567, 1333263177643850961}},
      {"abcdefgh", {5373196010327828531, -2051790161086574781}},
      {"v1;parallel;in=8x8x8,;g=id<X0[0:8]+|>", {8771513530226676747, -4303435889495025678}},
      {long_text, {2064098225826363709, 2326326810560060977}},
  };
  for (const auto& [text, hash] : golden) {
    EXPECT_EQ(HashStageKey(text), hash) << "key of " << text.size() << " bytes";
  }
  // Two keys at once give each key's own hash, whichever is longer.
  for (size_t m = 0; m < 40; ++m) {
    for (size_t n : {size_t{0}, size_t{7}, size_t{8}, size_t{9}, size_t{33}, long_text.size()}) {
      const std::string_view a = std::string_view(long_text).substr(m, m);
      const std::string_view b = std::string_view(long_text).substr(1, n);
      StageKeyHash hash_a, hash_b;
      HashStageKeyPair(a, b, hash_a, hash_b);
      EXPECT_EQ(hash_a, HashStageKey(a)) << m << " and " << n << " bytes";
      EXPECT_EQ(hash_b, HashStageKey(b)) << m << " and " << n << " bytes";
    }
  }
}

// A key whose id is taken by another stage (forged here: the same row id,
// another check) is refused rather than given the other stage's results.
TEST(StageTextTest, ACollidingKeyIsRefusedNotMixed) {
  ::ios::testing::TempDir dir{"ios_collision_test"};
  const fs::path path = dir.path() / "c.db";
  const std::string key = "v1;parallel;in=8x8x8,;g=id<X0[0:8]+|>";
  {
    auto store = ProfileStore::Open(path.string());
    store->UpsertDevice(testing::SimV100());
    store->UpsertStage(key, "identity");
    store->Store(testing::Key(key, testing::SimV100()), testing::Ok(1.0));
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db, "UPDATE stages SET key_check = key_check + 1", nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = ProfileStore::Open(path.string());
  EXPECT_FALSE(store->Lookup(testing::Key(key, testing::SimV100())).has_value())
      << "a row of another key is not this key's result";
  try {
    store->UpsertStage(key, "identity");
    ADD_FAILURE() << "a colliding key was stored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("collides"), std::string::npos) << e.what();
  }
}

// Version 2 to 3: every measurement is kept as it was, with an empty
// detail; new measurements store theirs; ios-db refuses the file until a
// coordinator has upgraded it.
TEST(ProfileStoreV2MigrationTest, AVersionTwoFileKeepsEveryMeasurementAndGainsDetails) {
  ::ios::testing::TempDir dir("ios_migration_v2");
  const fs::path path = dir.path() / "v2.db";
  fs::copy_file(fs::path(IOS_TEST_DATA_DIR) / "profile_v2.db", path);
  ASSERT_EQ(ReadHeaderField(path, kUserVersionOffset), 2u);
  // The v2 rows as plain SQLite reads them.
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, std::tuple<double, double, int64_t>>
      before;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* statement = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT stage_id, device_id, batch_size, settings_id, median_ms, "
                                 "spread_ms, samples FROM measurements",
                                 -1, &statement, nullptr),
              SQLITE_OK);
    while (sqlite3_step(statement) == SQLITE_ROW) {
      before[{sqlite3_column_int64(statement, 0), sqlite3_column_int64(statement, 1),
              sqlite3_column_int64(statement, 2), sqlite3_column_int64(statement, 3)}] = {
          sqlite3_column_double(statement, 4), sqlite3_column_double(statement, 5),
          sqlite3_column_int64(statement, 6)};
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
  }
  ASSERT_EQ(before.size(), 39u);
  OpenOptions read_only;
  read_only.mode = OpenMode::kReadOnly;
  EXPECT_THROW(ProfileStore::Open(path.string(), read_only), Error);

  auto store = ProfileStore::Open(path.string());
  const std::vector<MeasurementRow> rows = store->Measurements("");
  ASSERT_EQ(rows.size(), before.size());
  for (const MeasurementRow& row : rows) {
    EXPECT_EQ(row.result.detail, "") << row.stage_key;
    const auto stored =
        store->Lookup({row.stage_key, row.device_fingerprint, row.batch_size, row.settings_key});
    ASSERT_TRUE(stored.has_value());
    EXPECT_EQ(stored->median_ms, row.result.median_ms);
  }
  // The same medians, bit for bit.
  std::vector<double> medians_before, medians_after;
  for (const auto& [key, value] : before) medians_before.push_back(std::get<0>(value));
  for (const MeasurementRow& row : rows) medians_after.push_back(row.result.median_ms);
  std::sort(medians_before.begin(), medians_before.end());
  std::sort(medians_after.begin(), medians_after.end());
  EXPECT_EQ(medians_after, medians_before);
  // A new measurement keeps its detail.
  MeasurementKey key{rows.front().stage_key, rows.front().device_fingerprint, 7,
                     rows.front().settings_key};
  MeasureResult result;
  result.median_ms = 1.25;
  result.samples = 36;
  result.detail = "cudnn conv algo 1/fma";
  store->Store(key, result);
  EXPECT_EQ(store->Lookup(key)->detail, "cudnn conv algo 1/fma");
  store.reset();
  EXPECT_EQ(ReadHeaderField(path, kUserVersionOffset), static_cast<uint32_t>(kSchemaVersion));
  EXPECT_NO_THROW(ProfileStore::Open(path.string(), read_only));
}

// Version 3 to 4 (tests/data/profile_v3.db, written by the previous build:
// a tiny model measured exhaustively on sim:v100 and on cpu,threads=1):
// every settings row is named isolated, every measurement stays readable
// and listed with its protocol, and a search measuring as executed, whose
// key differs, finds none of them; its own rows are stored as executed.
TEST(ProfileStoreV3MigrationTest, OldRowsStayReadableAsIsolatedAndUnusedByExecutedSearches) {
  ::ios::testing::TempDir dir("ios_migration_v3");
  const fs::path path = dir.path() / "v3.db";
  fs::copy_file(fs::path(IOS_TEST_DATA_DIR) / "profile_v3.db", path);
  ASSERT_EQ(ReadHeaderField(path, kUserVersionOffset), 3u);
  OpenOptions read_only;
  read_only.mode = OpenMode::kReadOnly;
  EXPECT_THROW(ProfileStore::Open(path.string(), read_only), Error);

  auto store = ProfileStore::Open(path.string());
  const std::vector<MeasurementRow> rows = store->Measurements("");
  ASSERT_EQ(rows.size(), 42u);
  std::map<std::string, int> by_backend;
  for (const MeasurementRow& row : rows) {
    EXPECT_EQ(row.protocol, "isolated") << row.settings_key;
    ++by_backend[row.device_backend];
    MeasureSettings executed = row.device_backend == "cpu"
                                   ? DefaultMeasureSettings(DeviceTiming::kHostLaunched)
                                   : DefaultMeasureSettings(DeviceTiming::kModelled);
    ASSERT_EQ(executed.Key() == row.settings_key, row.device_backend == "sim")
        << "the sim keeps its isolated key, a real device's default is executed";
    EXPECT_TRUE(
        store->Lookup({row.stage_key, row.device_fingerprint, row.batch_size, row.settings_key}));
    if (row.device_backend != "cpu") continue;
    for (const bool warm : {false, true}) {
      executed.warm_weights = warm;
      EXPECT_FALSE(
          store->Lookup({row.stage_key, row.device_fingerprint, row.batch_size, executed.Key()}));
    }
  }
  EXPECT_EQ(by_backend, (std::map<std::string, int>{{"cpu", 21}, {"sim", 21}}));
  // A new executed row names its protocol; the old isolated row of the
  // same stage is still there beside it.
  const MeasurementRow& old = *std::find_if(
      rows.begin(), rows.end(), [](const auto& row) { return row.device_backend == "cpu"; });
  const std::string executed_key = DefaultMeasureSettings(DeviceTiming::kHostLaunched).Key();
  store->Store({old.stage_key, old.device_fingerprint, old.batch_size, executed_key},
               testing::Ok(0.5));
  std::map<std::string, std::string> protocols;  // by settings key
  for (const MeasurementRow& row : store->Measurements("")) {
    if (row.stage_key == old.stage_key && row.device_fingerprint == old.device_fingerprint) {
      protocols[row.settings_key] = row.protocol;
    }
  }
  EXPECT_EQ(protocols, (std::map<std::string, std::string>{{old.settings_key, "isolated"},
                                                           {executed_key, "executed"}}));
  // And the end-to-end table is there.
  NetworkRunRow run;
  run.key = {"network-key", old.device_fingerprint, 1, "w2-n1-r10-float32"};
  run.model = "tiny";
  run.schedule = "ios";
  run.result = testing::Ok(2.5);
  store->StoreNetworkRun(run);
  EXPECT_EQ(store->LookupNetworkRun(run.key)->result.median_ms, 2.5);
  store.reset();
  EXPECT_EQ(ReadHeaderField(path, kUserVersionOffset), static_cast<uint32_t>(kSchemaVersion));
  EXPECT_NO_THROW(ProfileStore::Open(path.string(), read_only));
}

// Version 4 to 5 (tests/data/profile_v4.db, written by the previous build:
// the tiny model searched on sim:v100 and on cpu,threads=1, two searches,
// nine end-to-end figures): every row of every table stays, each search
// reads back with its id and no report, and a new search keeps its report.
std::map<std::string, int64_t> RowCounts(const fs::path& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  std::map<std::string, int64_t> counts;
  for (const char* table : {"devices", "stages", "settings", "measurements", "models",
                            "model_stages", "searches", "network_runs"}) {
    sqlite3_stmt* statement = nullptr;
    const std::string sql = std::string("SELECT count(*) FROM ") + table;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr), SQLITE_OK) << table;
    if (sqlite3_step(statement) == SQLITE_ROW) counts[table] = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return counts;
}

int64_t SearchesWithoutReport(const fs::path& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM searches WHERE report IS NULL", -1,
                               &statement, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  const int64_t count =
      sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : -1;
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return count;
}

TEST(ProfileStoreV4MigrationTest, EveryRowStaysAndOldSearchesGainIdsAndNoReport) {
  ::ios::testing::TempDir dir("ios_migration_v4");
  const fs::path path = dir.path() / "v4.db";
  fs::copy_file(fs::path(IOS_TEST_DATA_DIR) / "profile_v4.db", path);
  ASSERT_EQ(ReadHeaderField(path, kUserVersionOffset), 4u);
  const std::map<std::string, int64_t> before = RowCounts(path);
  ASSERT_EQ(before.at("searches"), 2);
  ASSERT_EQ(before.at("measurements"), 42);
  ASSERT_EQ(before.at("network_runs"), 9);
  OpenOptions read_only;
  read_only.mode = OpenMode::kReadOnly;
  EXPECT_THROW(ProfileStore::Open(path.string(), read_only), Error);

  auto store = ProfileStore::Open(path.string());
  const std::vector<SearchRecord> searches = store->Searches();
  ASSERT_EQ(searches.size(), 2u);
  for (size_t i = 0; i < searches.size(); ++i) {
    EXPECT_EQ(searches[i].id, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(searches[i].model, "tiny");
    EXPECT_TRUE(searches[i].report_json.empty());
    EXPECT_TRUE(nlohmann::json::accept(searches[i].schedule_json));
  }
  EXPECT_EQ(store->Measurements("tiny").size(), 42u);
  EXPECT_EQ(store->NetworkRuns("tiny").size(), 9u);
  store.reset();
  EXPECT_EQ(RowCounts(path), before);
  EXPECT_EQ(SearchesWithoutReport(path), 2);
  EXPECT_EQ(ReadHeaderField(path, kUserVersionOffset), static_cast<uint32_t>(kSchemaVersion));

  // A search recorded now keeps its report, packed.
  store = ProfileStore::Open(path.string(), read_only);
  store.reset();
  store = ProfileStore::Open(path.string());
  SearchRecord next = searches.back();
  next.report_json = R"({"schedules":[],"model":"tiny"})";
  const int64_t id = store->RecordSearch(next);
  EXPECT_EQ(id, 3);
  EXPECT_EQ(store->Searches().back().report_json, next.report_json);
  EXPECT_EQ(SearchesWithoutReport(path), 2);
}

}  // namespace
}  // namespace ios::db
