// Runs the built ios-db binary on a DB prepared through ProfileStore.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
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
using nlohmann::json;
using ::testing::HasSubstr;
using testing::Lines;
using ::testing::Not;
using ::testing::StartsWith;

constexpr size_t kMaxOutput = 16 << 20;  // bytes read from the binary at most
using ::ios::testing::kIosDb;

using ::ios::testing::CliResult;
using ::ios::testing::ReadFile;
using ::ios::testing::ShellQuote;

class IosDbCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern = (fs::temp_directory_path() / "ios_db_cli_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    PrepareDb(DbPath());
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static fs::path DbPath() { return dir_ / "profile.db"; }
  static fs::path Dir() { return dir_; }

  // Two devices (one simulated), three stages, four measurements (one
  // failed, with a message that needs CSV quoting), two models, one search.
  static void PrepareDb(const fs::path& path) {
    auto store = ProfileStore::Open(path.string());
    const DeviceInfo sim{"sim", "sim:v100", "sim:v100|sm70", true};
    const DeviceInfo real{"cuda", "NVIDIA H100 80GB HBM3", "cuda|H100|sm90", false};
    store->UpsertDevice(sim);
    store->UpsertDevice(real);
    store->UpsertStage("conv3x3-key", "conv 3x3, 64->64");
    store->UpsertStage("conv1x1-key", "conv 1x1 64->128");
    store->UpsertStage("merged-key", "merge of 2 convs");
    store->LinkModelStageKeys("resnet", {"conv3x3-key", "merged-key"});
    store->LinkModelStageKeys("squeezenet", {"conv1x1-key"});

    MeasureResult ok;
    ok.median_ms = 0.125;
    ok.spread_ms = 0.01;
    ok.samples = 36;
    store->Store({"conv3x3-key", sim.fingerprint, 1, "w2-n6-r6"}, ok);
    store->Store({"conv1x1-key", sim.fingerprint, 1, "w2-n6-r6"}, ok);
    store->Store({"conv3x3-key", real.fingerprint, 8, "w2-n6-r6"}, ok);
    MeasureResult oom;
    oom.error = MeasureError::kOutOfMemory;
    oom.error_message = "needs 3,2 GiB; cuDNN said \"no\"";
    store->Store({"merged-key", sim.fingerprint, 1, "w2-n6-r6"}, oom);

    SearchRecord search;
    search.model = "resnet";
    search.device_fingerprint = sim.fingerprint;
    search.batch_size = 1;
    search.settings_json = R"({"r":3,"s":8})";
    search.schedule_json = R"({"stages":[["a","b"]]})";
    search.latency_ms = 2.5;
    search.stages_measured = 3;
    search.stages_reused = 1;
    search.measure_s = 1.5;
    store->RecordSearch(search);
  }

  // Runs ios-db with `args` (each shell-quoted); stdout and stderr apart.
  static CliResult Run(const std::vector<std::string>& args) {
    std::string quoted;
    for (const std::string& arg : args) quoted += " " + ShellQuote(arg);
    return ::ios::testing::RunBinary(Dir(), kIosDb, quoted, 60, kMaxOutput);
  }

  static CliResult RunOnDb(const std::vector<std::string>& args) {
    std::vector<std::string> full = {"--db", DbPath().string()};
    full.insert(full.end(), args.begin(), args.end());
    return Run(full);
  }

  static json ParseJson(const CliResult& result) {
    EXPECT_EQ(result.exit_code, 0) << result.err;
    json parsed = json::parse(result.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded()) << result.out;
    EXPECT_TRUE(parsed.is_array()) << result.out;
    return parsed;
  }

  static inline fs::path dir_;  // the suite's temp dir
};

// --- devices ---------------------------------------------------------------

TEST_F(IosDbCliTest, DevicesTableAlignsColumnsAndMarksSimulatedDevices) {
  CliResult result = RunOnDb({"devices"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 4u) << result.out;  // header, rule, two devices
  EXPECT_THAT(lines[0], StartsWith("name"));
  EXPECT_THAT(lines[1], StartsWith("----"));
  EXPECT_THAT(lines[2], HasSubstr("sim:v100"));
  EXPECT_THAT(lines[2], HasSubstr("simulated"));
  EXPECT_THAT(lines[3], HasSubstr("NVIDIA H100"));
  EXPECT_THAT(lines[3], Not(HasSubstr("simulated")));
  // Aligned: the backend column starts at the same offset on every line.
  const size_t backend_at = lines[0].find("backend");
  EXPECT_EQ(lines[2].substr(backend_at, 3), "sim");
  EXPECT_EQ(lines[3].substr(backend_at, 4), "cuda");
}

TEST_F(IosDbCliTest, DevicesCsvHasAHeaderAndOneLinePerDevice) {
  CliResult result = RunOnDb({"--format", "csv", "devices"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 3u) << result.out;
  EXPECT_EQ(lines[0], "name,backend,simulated,measurements,fingerprint");
  EXPECT_EQ(lines[1], "sim:v100,sim,true,3,sim:v100|sm70");
  EXPECT_EQ(lines[2], "NVIDIA H100 80GB HBM3,cuda,false,1,cuda|H100|sm90");
}

TEST_F(IosDbCliTest, DevicesJsonIsAnArrayOfObjects) {
  json devices = ParseJson(RunOnDb({"--format", "json", "devices"}));
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0]["name"], "sim:v100");
  EXPECT_EQ(devices[0]["simulated"], true);
  EXPECT_EQ(devices[0]["measurements"], 3);
  EXPECT_EQ(devices[1]["simulated"], false);
  EXPECT_EQ(devices[1]["fingerprint"], "cuda|H100|sm90");
}

TEST_F(IosDbCliTest, FormatMayAlsoFollowTheCommand) {
  json devices = ParseJson(RunOnDb({"devices", "--format", "json"}));
  EXPECT_EQ(devices.size(), 2u);
}

// --- stats -----------------------------------------------------------------

TEST_F(IosDbCliTest, StatsTableListsEachCount) {
  CliResult result = RunOnDb({"stats"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, ::testing::MatchesRegex("(.|\n)*measurements +4\n(.|\n)*"));
  EXPECT_THAT(result.out, ::testing::MatchesRegex("(.|\n)*failed_measurements +1\n(.|\n)*"));
  EXPECT_THAT(result.out, ::testing::MatchesRegex("(.|\n)*simulated_devices +1\n(.|\n)*"));
}

TEST_F(IosDbCliTest, StatsCsvAndJsonAgree) {
  std::vector<std::string> lines = Lines(RunOnDb({"--format", "csv", "stats"}).out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "devices,simulated_devices,stages,measurements,failed_measurements,searches,models,"
            "network_runs");
  EXPECT_EQ(lines[1], "2,1,3,4,1,1,2,0");

  json stats = ParseJson(RunOnDb({"--format", "json", "stats"}));
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0]["devices"], 2);
  EXPECT_EQ(stats[0]["stages"], 3);
  EXPECT_EQ(stats[0]["measurements"], 4);
  EXPECT_EQ(stats[0]["failed_measurements"], 1);
  EXPECT_EQ(stats[0]["searches"], 1);
  EXPECT_EQ(stats[0]["models"], 2);
}

// --- searches --------------------------------------------------------------

TEST_F(IosDbCliTest, SearchesInEveryFormat) {
  CliResult table = RunOnDb({"searches"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  ASSERT_EQ(Lines(table.out).size(), 3u) << table.out;
  EXPECT_THAT(Lines(table.out)[2], HasSubstr("resnet"));
  EXPECT_THAT(Lines(table.out)[2], HasSubstr("simulated"));
  EXPECT_THAT(Lines(table.out)[2], HasSubstr("2.5000"));

  std::vector<std::string> csv = Lines(RunOnDb({"--format", "csv", "searches"}).out);
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_THAT(csv[0], StartsWith("id,started_at,model,device,simulated,batch_size,latency_ms"));
  EXPECT_THAT(csv[1], HasSubstr(",resnet,sim:v100,true,1,2.5,3,1,"));
  EXPECT_THAT(csv[1], HasSubstr(R"("{""r"":3,""s"":8}")"));

  json searches = ParseJson(RunOnDb({"--format", "json", "searches"}));
  ASSERT_EQ(searches.size(), 1u);
  EXPECT_EQ(searches[0]["model"], "resnet");
  EXPECT_EQ(searches[0]["simulated"], true);
  EXPECT_EQ(searches[0]["settings"]["r"], 3);
  EXPECT_EQ(searches[0]["schedule"]["stages"][0][1], "b");
  EXPECT_EQ(searches[0]["latency_ms"], 2.5);
}

// --- measurements ----------------------------------------------------------

TEST_F(IosDbCliTest, MeasurementsTableShowsErrorsAndSimulatedDevices) {
  CliResult result = RunOnDb({"measurements"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 6u) << result.out;
  EXPECT_THAT(lines[0], HasSubstr("median_ms"));
  EXPECT_THAT(result.out, HasSubstr("out_of_memory"));
  int simulated_rows = 0;
  for (size_t i = 2; i < lines.size(); ++i) {
    simulated_rows += lines[i].find("simulated") != std::string::npos;
  }
  EXPECT_EQ(simulated_rows, 3);
}

TEST_F(IosDbCliTest, MeasurementsOfAModelInJson) {
  json rows = ParseJson(RunOnDb({"--format", "json", "measurements", "--model", "resnet"}));
  ASSERT_EQ(rows.size(), 3u);  // conv3x3 on two devices, the failed merge
  for (const json& row : rows) {
    EXPECT_NE(row["stage_key"], "conv1x1-key") << row.dump();
  }
  json failed;
  for (const json& row : rows) {
    if (row["stage_key"] == "merged-key") failed = row;
  }
  ASSERT_FALSE(failed.is_null());
  EXPECT_EQ(failed["status"], "out_of_memory");
  EXPECT_EQ(failed["error_message"], "needs 3,2 GiB; cuDNN said \"no\"");
  EXPECT_EQ(failed["simulated"], true);
}

TEST_F(IosDbCliTest, MeasurementsCsvQuotesFieldsThatNeedIt) {
  CliResult result = RunOnDb({"--format", "csv", "measurements", "--model", "resnet"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr(R"("needs 3,2 GiB; cuDNN said ""no""")"));
  EXPECT_THAT(result.out, HasSubstr(R"("conv 3x3, 64->64")"));
  EXPECT_EQ(Lines(result.out).size(), 4u);
}

TEST_F(IosDbCliTest, MeasurementsLimitShowsAtMostNRows) {
  json rows = ParseJson(RunOnDb({"--format", "json", "measurements", "--limit", "2"}));
  EXPECT_EQ(rows.size(), 2u);
  CliResult table = RunOnDb({"measurements", "--limit", "1"});
  EXPECT_EQ(Lines(table.out).size(), 3u);
  EXPECT_THAT(table.err, HasSubstr("showing 1 of 4"));
}

TEST_F(IosDbCliTest, MeasurementsOfAnUnknownModelAreEmpty) {
  json rows = ParseJson(RunOnDb({"--format", "json", "measurements", "--model", "vgg"}));
  EXPECT_TRUE(rows.empty());
  CliResult table = RunOnDb({"measurements", "--model", "vgg"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_THAT(table.out, HasSubstr("(none)"));
}

// --- export ----------------------------------------------------------------

TEST_F(IosDbCliTest, ExportPicksCsvOrJsonFromTheFileName) {
  const fs::path csv = Dir() / "all.csv";
  CliResult result = RunOnDb({"export", "--output", csv.string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("exported 4 measurements"));
  std::vector<std::string> lines = Lines(ReadFile(csv));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_THAT(lines[0], HasSubstr("stage_key"));

  const fs::path json_file = Dir() / "all.json";
  ASSERT_EQ(RunOnDb({"export", "--output", json_file.string()}).exit_code, 0);
  json rows = json::parse(ReadFile(json_file));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_TRUE(rows[0].contains("stage_key"));
  EXPECT_TRUE(rows[0].contains("median_ms"));
}

TEST_F(IosDbCliTest, ExportFollowsAnExplicitFormat) {
  const fs::path out = Dir() / "all.txt";
  ASSERT_EQ(RunOnDb({"--format", "json", "export", "--output", out.string()}).exit_code, 0);
  EXPECT_EQ(json::parse(ReadFile(out)).size(), 4u);
}

TEST_F(IosDbCliTest, ExportRefusesATableOrAnUnknownExtension) {
  CliResult table =
      RunOnDb({"--format", "table", "export", "--output", (Dir() / "x.csv").string()});
  EXPECT_EQ(table.exit_code, 1);
  EXPECT_THAT(table.err, HasSubstr("csv or json"));

  CliResult unknown = RunOnDb({"export", "--output", (Dir() / "x.dat").string()});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("x.dat"));
  EXPECT_FALSE(fs::exists(Dir() / "x.dat"));
}

// --- untrusted text --------------------------------------------------------

// Before: a table printed model names, stage descriptions, device names and
// error messages raw, so a model named "m\e[31m\nodel" wrote a real escape
// sequence and a forged line. Tables escape them now; CSV quotes a line
// break and JSON escapes it, both keeping the exact text.
TEST_F(IosDbCliTest, TablesEscapeControlCharactersInNamesAndMessages) {
  const fs::path path = Dir() / "hostile.db";
  const std::string name = "m\x1b[31m\nodel";
  {
    auto store = ProfileStore::Open(path.string());
    const DeviceInfo device{"sim", "gpu\x1b]0;x\x07\nfake", "fp-hostile", true};
    store->UpsertDevice(device);
    store->UpsertStage("k", "conv\x1b[2J\nrow");
    store->LinkModelStageKeys(name, {"k"});
    MeasureResult failed;
    failed.error = MeasureError::kOutOfMemory;
    failed.error_message = "oom\x1b[1m\nforged";
    store->Store({"k", device.fingerprint, 1, "w2-n6-r6"}, failed);
    SearchRecord search;
    search.model = name;
    search.device_fingerprint = device.fingerprint;
    search.batch_size = 1;
    search.settings_json = "{}";
    search.schedule_json = "{}";
    search.latency_ms = 1.0;
    store->RecordSearch(search);
  }
  const std::vector<std::pair<std::string, size_t>> tables = {
      {"searches", 3u}, {"devices", 3u}, {"measurements", 3u}};
  for (const auto& [command, lines] : tables) {
    CliResult result = Run({"--db", path.string(), command});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(result.out.find('\x1b'), std::string::npos) << command << ":\n" << result.out;
    EXPECT_EQ(result.out.find('\x07'), std::string::npos) << command << ":\n" << result.out;
    EXPECT_EQ(Lines(result.out).size(), lines) << command << ":\n" << result.out;
  }
  EXPECT_THAT(Run({"--db", path.string(), "searches"}).out, HasSubstr(R"(m\x1b[31m\nodel)"));
  EXPECT_THAT(Run({"--db", path.string(), "measurements"}).out, HasSubstr(R"(oom\x1b[1m\nforged)"));

  // CSV: the line break is inside a quoted field, the text exact.
  CliResult csv = Run({"--db", path.string(), "--format", "csv", "searches"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_THAT(csv.out, HasSubstr(",\"" + name + "\","));
  json rows = ParseJson(Run({"--db", path.string(), "--format", "json", "searches"}));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["model"], name);
}

// --- errors ----------------------------------------------------------------

TEST_F(IosDbCliTest, AMissingDbIsAnErrorAndIsNotCreated) {
  const fs::path missing = Dir() / "missing.db";
  for (const char* format : {"table", "csv", "json"}) {
    CliResult result = Run({"--db", missing.string(), "--format", format, "stats"});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err, "ios-db: no profiling DB at " + missing.string() + "\n");
  }
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(IosDbCliTest, AFileThatIsNotADbIsNamedInTheError) {
  const fs::path text = Dir() / "notes.txt";
  std::ofstream(text) << "just some notes, long enough to be read as a header by SQLite, "
                         "which wants one hundred bytes before it looks any further\n";
  CliResult result = Run({"--db", text.string(), "devices"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(text.string()));
  EXPECT_EQ(Lines(result.err).size(), 1u) << result.err;
}

TEST_F(IosDbCliTest, BadArgumentsGiveOneLineOnStderrAndExitCodeTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {"--db", DbPath().string(), "frobnicate"},
      {"--db", DbPath().string()},
      {"devices"},
      {"--db", DbPath().string(), "--format", "xml", "devices"},
      {"--db", DbPath().string(), "measurements", "--limit", "0"},
      {"--db", DbPath().string(), "measurements", "--limit", "many"},
      {"--db", DbPath().string(), "export"},
  };
  for (const auto& args : cases) {
    CliResult result = Run(args);
    std::string joined;
    for (const auto& arg : args) joined += arg + " ";
    EXPECT_EQ(result.exit_code, 2) << joined;
    EXPECT_EQ(result.out, "") << joined;
    EXPECT_EQ(Lines(result.err).size(), 1u) << joined << "\n" << result.err;
    EXPECT_THAT(result.err, StartsWith("ios-db: ")) << joined;
  }
}

TEST_F(IosDbCliTest, LimitZeroSaysWhatALimitMustBe) {
  CliResult result = RunOnDb({"measurements", "--limit", "0"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--limit"));
  EXPECT_THAT(result.err, HasSubstr("at least 1"));
  EXPECT_THAT(result.err, Not(HasSubstr("range")));  // was "not in range 0.000000 to 1797...
}

// --- only reads ------------------------------------------------------------

// Runs `sql` on `path` through plain SQLite, as another program would.
void RunSql(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// SQLite header byte 18: 1 for a rollback journal, 2 for WAL.
constexpr size_t kWriteVersionOffset = 18;

// Before: ios-db created the ios-farm schema in the blank file and switched
// it to WAL.
TEST_F(IosDbCliTest, ABlankSqliteFileIsRefusedAndLeftByteForByteAsItWas) {
  const fs::path blank = Dir() / "blank.db";
  RunSql(blank, "CREATE TABLE t(x); DROP TABLE t;");
  const std::string before = ReadFile(blank);
  CliResult result = Run({"--db", blank.string(), "stats"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_THAT(result.err, HasSubstr(blank.string() + " is not an ios-farm profiling DB"));
  EXPECT_EQ(Lines(result.err).size(), 1u) << result.err;
  EXPECT_EQ(ReadFile(blank), before);
  EXPECT_FALSE(fs::exists(Dir() / "blank.db-wal"));
}

TEST_F(IosDbCliTest, QueriesLeaveTheJournalModeAlone) {
  const fs::path copy = Dir() / "rollback.db";
  fs::copy_file(DbPath(), copy, fs::copy_options::overwrite_existing);
  RunSql(copy, "PRAGMA journal_mode = DELETE");
  ASSERT_EQ(ReadFile(copy)[kWriteVersionOffset], 1);
  const std::string before = ReadFile(copy);
  for (const char* command : {"stats", "devices", "searches", "measurements", "runs"}) {
    EXPECT_EQ(Run({"--db", copy.string(), command}).exit_code, 0) << command;
  }
  EXPECT_EQ(ReadFile(copy), before);
}

TEST_F(IosDbCliTest, ADbOfANewerSchemaVersionIsRefused) {
  const fs::path copy = Dir() / "newer.db";
  fs::copy_file(DbPath(), copy, fs::copy_options::overwrite_existing);
  RunSql(copy, "PRAGMA user_version = 9");
  CliResult result = Run({"--db", copy.string(), "stats"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("schema version 9, newer than the version this build"));
  EXPECT_EQ(Lines(result.err).size(), 1u) << result.err;
}

TEST_F(IosDbCliTest, ExportToDashWritesToStdout) {
  CliResult result = RunOnDb({"--format", "json", "export", "--output", "-"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(json::parse(result.out).size(), 4u);
  EXPECT_THAT(result.err, HasSubstr("exported 4 measurements to stdout"));
  EXPECT_FALSE(fs::exists(Dir() / "-"));

  CliResult csv = RunOnDb({"--format", "csv", "export", "-o", "-"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(Lines(csv.out).size(), 5u);

  CliResult no_format = RunOnDb({"export", "--output", "-"});
  EXPECT_EQ(no_format.exit_code, 1);
  EXPECT_THAT(no_format.err, HasSubstr("needs --format csv or --format json"));
  EXPECT_FALSE(fs::exists(Dir() / "-"));
}

// --- forget ----------------------------------------------------------------

class IosDbForgetTest : public IosDbCliTest {
 protected:
  // A copy of the suite's DB plus a timeout and a backend failure on the
  // simulated device: 6 measurements, 3 of them failed.
  void SetUp() override {
    copy_ = Dir() / "forget.db";
    fs::remove(copy_);
    PrepareDb(copy_);
    auto store = ProfileStore::Open(copy_.string());
    MeasureResult timeout;
    timeout.error = MeasureError::kTimeout;
    store->Store({"conv3x3-key", "sim:v100|sm70", 2, "w2-n6-r6"}, timeout);
    MeasureResult backend;
    backend.error = MeasureError::kBackendFailure;
    store->Store({"conv1x1-key", "sim:v100|sm70", 2, "w2-n6-r6"}, backend);
  }

  CliResult Forget(std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", copy_.string(), "forget"});
    return Run(args);
  }

  json Stats() {
    json stats = ParseJson(Run({"--db", copy_.string(), "--format", "json", "stats"}));
    return stats.empty() ? json() : stats[0];
  }

  fs::path copy_;
};

TEST_F(IosDbForgetTest, FailuresDropsEveryFailureAndSaysHowMany) {
  CliResult result = Forget({"--failures"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "dropped 3 failed measurements and 0 failed end-to-end figures from " +
                            copy_.string() + "\n");
  EXPECT_EQ(Stats()["failed_measurements"], 0);
  EXPECT_EQ(Stats()["measurements"], 3);
}

TEST_F(IosDbForgetTest, AKindAndADeviceNarrowTheFailures) {
  CliResult timeout = Forget({"--failures", "--kind", "timeout", "--device", "sim:v100"});
  ASSERT_EQ(timeout.exit_code, 0) << timeout.err;
  EXPECT_THAT(timeout.out, HasSubstr("end-to-end figures (timeout) of device sim:v100"));
  EXPECT_EQ(Stats()["failed_measurements"], 2);

  CliResult transient = Forget({"--failures", "--kind", "transient"});
  ASSERT_EQ(transient.exit_code, 0) << transient.err;
  EXPECT_THAT(transient.out, StartsWith("dropped 1 "));  // the backend failure
  EXPECT_EQ(Stats()["failed_measurements"], 1);          // out of memory stays

  CliResult other_device = Forget({"--failures", "--device", "cuda|H100|sm90"});
  EXPECT_THAT(other_device.out, StartsWith("dropped 0 "));
  EXPECT_EQ(Stats()["failed_measurements"], 1);
}

TEST_F(IosDbForgetTest, MeasurementsOfAModelGoGoodAndFailedAlike) {
  CliResult result = Forget({"--measurements", "--model", "resnet"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // resnet: conv3x3 on both devices at batch 1, its timeout at batch 2, the merge.
  EXPECT_THAT(result.out, StartsWith("dropped 4 measurements and 0 end-to-end figures of"));
  EXPECT_EQ(Stats()["measurements"], 2);
}

TEST_F(IosDbForgetTest, MeasurementsNeedAFilterOrAll) {
  CliResult refused = Forget({"--measurements"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(refused.out, "");
  EXPECT_THAT(refused.err, HasSubstr("--device or --model, or pass --all"));
  EXPECT_EQ(Lines(refused.err).size(), 1u);
  EXPECT_EQ(Stats()["measurements"], 6);

  CliResult all = Forget({"--measurements", "--all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, StartsWith("dropped 6 measurements"));
  EXPECT_EQ(Stats()["measurements"], 0);
  EXPECT_EQ(Stats()["stages"], 3);  // stages, devices and searches stay
  EXPECT_EQ(Stats()["searches"], 1);
}

TEST_F(IosDbForgetTest, RefusesUnclearRequestsAndChangesNothing) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "say what to drop"},
      {{"--measurements", "--kind", "timeout", "--all"}, "--kind narrows --failures"},
      {{"--failures", "--all", "--device", "sim:v100"}, "cannot be combined"},
      {{"--failures", "--kind", "slow"}, "--kind: slow not in"},
      {{"--failures", "--device", "tpu"}, "no device named or fingerprinted 'tpu'"},
      {{"--measurements", "--model", "nosuch"}, "no model named 'nosuch'"},
  };
  for (const auto& [args, fragment] : cases) {
    CliResult result = Forget(args);
    EXPECT_EQ(result.exit_code, fragment == "--kind: slow not in" ? 2 : 1) << fragment;
    EXPECT_THAT(result.err, HasSubstr(fragment));
    EXPECT_EQ(Lines(result.err).size(), 1u) << result.err;
  }
  EXPECT_EQ(Stats()["measurements"], 6);
}

TEST_F(IosDbForgetTest, AMissingDbIsNotCreated) {
  const fs::path missing = Dir() / "nothing-here.db";
  CliResult result = Run({"--db", missing.string(), "forget", "--failures"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "ios-db: no profiling DB at " + missing.string() + "\n");
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(IosDbCliTest, HelpDescribesTheCommands) {
  CliResult result = Run({"--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* command : {"devices", "stats", "searches", "measurements", "export", "forget"}) {
    EXPECT_THAT(result.out, HasSubstr(command));
  }
  CliResult sub = Run({"measurements", "--help"});
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_THAT(sub.out, HasSubstr("--model"));
  EXPECT_THAT(sub.out, HasSubstr("--limit"));
}

}  // namespace
}  // namespace ios::db
