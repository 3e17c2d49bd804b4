// `ios-db runs`: the end-to-end figures the search's verification stores
// (network_runs, schema 4), listed through the built binary like the
// measurements and searches are; and `ios-db forget` dropping them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "db/profile_store.h"
#include "tests/db/profile_store_testing.h"
#include "tests/testing/binaries.h"
#include "tests/testing/process.h"

namespace ios::db {
namespace {

namespace fs = std::filesystem;
using ::ios::testing::CliResult;
using ::ios::testing::kIosDb;
using ::ios::testing::ShellQuote;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::kToolV100;
using testing::Lines;
using ::testing::Not;
using ::testing::StartsWith;

// Never registered as a device: its runs show the fingerprint as the name.
constexpr const char* kUnknownFingerprint = "cuda|H100|sm90";

class IosDbRunsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern = (fs::temp_directory_path() / "ios_db_runs_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    PrepareDb();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Two figures: Inception V3 under greedy failed (unpriced, on a device
  // the DB has no row for), then SqueezeNet under the IOS schedule ran at
  // 1.25x its prediction on the simulated V100. Stored in that order, so
  // that they list in it whether or not the clock ticked between them.
  static void PrepareDb() {
    auto store = ProfileStore::Open((dir_ / "runs.db").string());
    store->UpsertDevice(kToolV100);
    NetworkRunRow failed;
    failed.key = {"inception-greedy", kUnknownFingerprint, 16, "w2-n1-r10-max30-spread5%-float32"};
    failed.model = "inception_v3";
    failed.schedule = "greedy";
    failed.stages = 40;
    failed.predicted_ms = NAN;
    failed.result.error = MeasureError::kOutOfMemory;
    failed.result.error_message = "needs 3,2 GiB";
    store->StoreNetworkRun(failed);
    NetworkRunRow ok;
    ok.key = {"squeezenet-ios", kToolV100.fingerprint, 1, "w0-n1-r1-float32"};
    ok.model = "squeezenet";
    ok.schedule = "ios";
    ok.stages = 18;
    ok.predicted_ms = 2.0;
    ok.result.median_ms = 2.5;
    ok.result.spread_ms = 0.125;
    ok.result.samples = 10;
    store->StoreNetworkRun(ok);
    ProfileStore::Open((dir_ / "empty.db").string());
  }

  static CliResult Run(const std::string& db, const std::vector<std::string>& args) {
    std::string quoted = " --db " + ShellQuote((dir_ / db).string());
    for (const std::string& arg : args) quoted += " " + ShellQuote(arg);
    return ::ios::testing::RunBinary(dir_, kIosDb, quoted, 60);
  }

  static json ParseJson(const CliResult& result) {
    EXPECT_EQ(result.exit_code, 0) << result.err;
    json parsed = json::parse(result.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(parsed.is_array()) << result.out;
    return parsed;
  }

  // A copy of runs.db named `name`, with one good measurement on the
  // simulated V100 beside its figures, for a test that writes.
  static std::string WritableCopy(const std::string& name) {
    fs::copy_file(dir_ / "runs.db", dir_ / name, fs::copy_options::overwrite_existing);
    auto store = ProfileStore::Open((dir_ / name).string());
    store->UpsertStage("conv", "conv");
    MeasureResult ok;
    ok.median_ms = 1;
    ok.samples = 36;
    store->Store({"conv", kToolV100.fingerprint, 1, "w2-n6-r6-float32"}, ok);
    return name;
  }

  static json RunsOf(const std::string& db) {
    return ParseJson(Run(db, {"--format", "json", "runs"}));
  }
  static int64_t MeasurementsOf(const std::string& db) {
    return ParseJson(Run(db, {"--format", "json", "stats"}))[0]["measurements"].get<int64_t>();
  }

  static inline fs::path dir_;
};

TEST_F(IosDbRunsTest, TableShowsBothRunsWithRatioAndFailure) {
  const CliResult result = Run("runs.db", {"runs"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 4u) << result.out;  // header, rule, two runs
  EXPECT_THAT(lines[0], StartsWith("measured_at"));
  for (const char* column :
       {"model", "schedule", "device", "batch_size", "settings", "stages", "predicted_ms",
        "median_ms", "spread_ms", "samples", "meas_pred", "status", "error_message"}) {
    EXPECT_THAT(lines[0], HasSubstr(column));
  }
  // The fingerprint and detail are left to csv and json.
  EXPECT_THAT(lines[0], Not(HasSubstr("device_fingerprint")));
  EXPECT_THAT(lines[2], HasSubstr("inception_v3"));
  EXPECT_THAT(lines[2], HasSubstr(kUnknownFingerprint));
  EXPECT_THAT(lines[2], HasSubstr("out_of_memory"));
  EXPECT_THAT(lines[2], HasSubstr("needs 3,2 GiB"));
  EXPECT_THAT(lines[3], HasSubstr("squeezenet"));
  EXPECT_THAT(lines[3], HasSubstr("sim:v100"));
  EXPECT_THAT(lines[3], HasSubstr("simulated"));
  EXPECT_THAT(lines[3], HasSubstr("2.5000"));
  EXPECT_THAT(lines[3], HasSubstr("1.2500"));  // measured over predicted
  // A failed, unpriced run has no latency, spread or ratio: "-", never 0.
  const size_t median_at = lines[0].find("median_ms");
  EXPECT_EQ(lines[2].substr(median_at, 9), "        -");
}

TEST_F(IosDbRunsTest, CsvHasEveryColumnAndQuotesTheMessage) {
  const CliResult result = Run("runs.db", {"--format", "csv", "runs"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 3u) << result.out;
  EXPECT_EQ(lines[0],
            "measured_at,model,schedule,device,simulated,batch_size,settings,stages,predicted_ms,"
            "median_ms,spread_ms,samples,meas_pred,status,error_message,detail,"
            "device_fingerprint");
  EXPECT_THAT(lines[1], HasSubstr(",inception_v3,greedy,cuda|H100|sm90,false,16,"
                                  "w2-n1-r10-max30-spread5%-float32,40,,,,0,,out_of_memory,"
                                  "\"needs 3,2 GiB\",,cuda|H100|sm90"));
  EXPECT_THAT(lines[2], HasSubstr(",squeezenet,ios,sim:v100,true,1,w0-n1-r1-float32,18,2.0,2.5,"
                                  "0.125,10,1.25,ok,,,sim:v100|sm70"));
}

TEST_F(IosDbRunsTest, JsonKeepsNumbersAndNullsApart) {
  const json rows = ParseJson(Run("runs.db", {"--format", "json", "runs"}));
  ASSERT_EQ(rows.size(), 2u);
  const json& failed = rows[0];
  EXPECT_EQ(failed["model"], "inception_v3");
  EXPECT_EQ(failed["device"], kUnknownFingerprint);
  EXPECT_EQ(failed["simulated"], false);
  EXPECT_EQ(failed["batch_size"], 16);
  EXPECT_TRUE(failed["predicted_ms"].is_null());
  EXPECT_TRUE(failed["median_ms"].is_null());
  EXPECT_TRUE(failed["meas_pred"].is_null());
  EXPECT_EQ(failed["status"], "out_of_memory");
  EXPECT_EQ(failed["error_message"], "needs 3,2 GiB");
  const json& ok = rows[1];
  EXPECT_EQ(ok["model"], "squeezenet");
  EXPECT_EQ(ok["schedule"], "ios");
  EXPECT_EQ(ok["device"], "sim:v100");
  EXPECT_EQ(ok["device_fingerprint"], "sim:v100|sm70");
  EXPECT_EQ(ok["simulated"], true);
  EXPECT_EQ(ok["settings"], "w0-n1-r1-float32");
  EXPECT_EQ(ok["stages"], 18);
  EXPECT_EQ(ok["predicted_ms"], 2.0);
  EXPECT_EQ(ok["median_ms"], 2.5);
  EXPECT_EQ(ok["spread_ms"], 0.125);
  EXPECT_EQ(ok["samples"], 10);
  EXPECT_EQ(ok["meas_pred"], 1.25);
  EXPECT_EQ(ok["status"], "ok");
  EXPECT_TRUE(ok["error_message"].is_null());
  EXPECT_THAT(ok["measured_at"].get<std::string>(), ::testing::MatchesRegex("20..-..-..T.*Z"));
}

TEST_F(IosDbRunsTest, ModelNarrowsTheRows) {
  const json rows =
      ParseJson(Run("runs.db", {"runs", "--model", "squeezenet", "--format", "json"}));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["model"], "squeezenet");
  EXPECT_TRUE(ParseJson(Run("runs.db", {"--format", "json", "runs", "--model", "vgg"})).empty());
}

TEST_F(IosDbRunsTest, AnEmptyDbSaysItHasNone) {
  const CliResult table = Run("empty.db", {"runs"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("(none)"));
  EXPECT_TRUE(ParseJson(Run("empty.db", {"--format", "json", "runs"})).empty());
  EXPECT_EQ(Lines(Run("empty.db", {"--format", "csv", "runs"}).out).size(), 1u);  // the header
}

TEST_F(IosDbRunsTest, StatsCountsTheRunsAndHelpNamesTheCommand) {
  const json stats = ParseJson(Run("runs.db", {"--format", "json", "stats"}));
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0]["network_runs"], 2);
  EXPECT_EQ(ParseJson(Run("empty.db", {"--format", "json", "stats"}))[0]["network_runs"], 0);
  const CliResult help = ::ios::testing::RunBinary(dir_, kIosDb, " --help", 60);
  EXPECT_THAT(help.out, HasSubstr("runs"));
  EXPECT_THAT(help.out, HasSubstr("End-to-end figures"));
}

TEST_F(IosDbRunsTest, ForgettingADevicesMeasurementsDropsItsEndToEndFiguresToo) {
  const std::string db = WritableCopy("forget-device.db");
  const CliResult result = Run(db, {"forget", "--measurements", "--device", "sim:v100"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out,
              HasSubstr("dropped 1 measurements and 1 end-to-end figures of device sim:v100"));
  EXPECT_EQ(MeasurementsOf(db), 0);
  const json runs = RunsOf(db);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["model"], "inception_v3");  // another device's
}

TEST_F(IosDbRunsTest, ForgettingFailuresDropsFailedFiguresAndKeepsGoodOnes) {
  const std::string db = WritableCopy("forget-failures.db");
  const CliResult result = Run(db, {"forget", "--failures", "--kind", "out_of_memory"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("dropped 0 failed measurements and 1 failed end-to-end "
                                    "figures (out_of_memory) from"));
  const json runs = RunsOf(db);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["status"], "ok");
  EXPECT_EQ(MeasurementsOf(db), 1);
}

TEST_F(IosDbRunsTest, RunsOnlyAndKeepRunsChooseOneTable) {
  const std::string db = WritableCopy("forget-tables.db");
  const CliResult runs_only = Run(db, {"forget", "--measurements", "--all", "--runs-only"});
  ASSERT_EQ(runs_only.exit_code, 0) << runs_only.err;
  EXPECT_THAT(runs_only.out, HasSubstr("dropped 2 end-to-end figures from"));
  EXPECT_TRUE(RunsOf(db).empty());
  EXPECT_EQ(MeasurementsOf(db), 1);
  const CliResult keep_runs = Run(db, {"forget", "--measurements", "--all", "--keep-runs"});
  ASSERT_EQ(keep_runs.exit_code, 0) << keep_runs.err;
  EXPECT_THAT(keep_runs.out, HasSubstr("dropped 1 measurements from"));
  EXPECT_EQ(MeasurementsOf(db), 0);
  const CliResult both = Run(db, {"forget", "--failures", "--runs-only", "--keep-runs"});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_THAT(both.err, HasSubstr("--runs-only"));
}

TEST_F(IosDbRunsTest, ADeviceOrModelOnlyFiguresNameCanBeForgotten) {
  // The H100's figure has no devices row, and no search recorded
  // inception_v3: only network_runs knows either.
  const std::string db = WritableCopy("forget-figures-only.db");
  const CliResult device = Run(db, {"forget", "--failures", "--device", kUnknownFingerprint});
  ASSERT_EQ(device.exit_code, 0) << device.err;
  EXPECT_THAT(device.out, HasSubstr("and 1 failed end-to-end figures of device"));
  const CliResult model = Run(db, {"forget", "--measurements", "--model", "squeezenet"});
  ASSERT_EQ(model.exit_code, 0) << model.err;
  EXPECT_THAT(model.out, HasSubstr("dropped 0 measurements and 1 end-to-end figures of model "
                                   "squeezenet"));
  EXPECT_TRUE(RunsOf(db).empty());
  const CliResult unknown = Run(db, {"forget", "--failures", "--model", "vgg"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("no model named 'vgg'"));
}

}  // namespace
}  // namespace ios::db
