// Sharing measurements between farms: `ios-db export` of one DB, `ios-db
// import` into another, through the built binary. Only rows for the
// receiving device and settings come in unless --force; ours are kept;
// a malformed file is refused naming the row and field, before anything
// is written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/stage.h"
#include "common/zoo.h"
#include "db/profile_store.h"
#include "tests/db/profile_store_testing.h"
#include "tests/testing/binaries.h"
#include "tests/testing/process.h"

namespace ios::db {
namespace {

namespace fs = std::filesystem;
using ::ios::testing::CliResult;
using ::ios::testing::kIosDb;
using ::ios::testing::ReadFile;
using ::ios::testing::ShellQuote;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::kToolSettings;
using testing::kToolV100;
using testing::Ok;

const DeviceInfo kH100{"cuda", "NVIDIA H100 80GB HBM3", "cuda|H100|sm90", false};

// Three canonical stage keys (single operators of SqueezeNet): import
// refuses keys that do not parse.
const std::string& StageKey(int i) {
  static const std::vector<std::string> keys = [] {
    const Graph graph = BuildZooModel("squeezenet");
    StageKeyer keyer(graph);
    std::vector<std::string> out;
    for (NodeId id : {1, 2, 3}) out.push_back(keyer.Key(Stage{Strategy::kParallel, {{id}}}));
    return out;
  }();
  return keys[i];
}

class IosDbImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    // Theirs: three V100 rows (one a failure), one in other settings, one
    // H100 row.
    auto theirs = ProfileStore::Open(Path("theirs.db"));
    theirs->UpsertDevice(kToolV100);
    theirs->UpsertDevice(kH100);
    for (const char* name : {"a", "b", "c"}) {
      theirs->UpsertStage(StageKey(name[0] - 'a'), std::string("description of stage-") + name);
    }
    theirs->Store({StageKey(0), kToolV100.fingerprint, 1, kToolSettings}, Ok(0.5));
    theirs->Store({StageKey(1), kToolV100.fingerprint, 8, kToolSettings}, Ok(2.0));
    MeasureResult oom;
    oom.error = MeasureError::kOutOfMemory;
    oom.error_message = "needs 40 GiB";
    theirs->Store({StageKey(2), kToolV100.fingerprint, 1, kToolSettings}, oom);
    theirs->Store({StageKey(0), kToolV100.fingerprint, 1, "w1-n1-r1-float32"}, Ok(0.6));
    theirs->Store({StageKey(0), kH100.fingerprint, 1, kToolSettings}, Ok(0.1));
    // Ours: the V100, and our own measurement of stage-a, which is kept.
    auto ours = ProfileStore::Open(Path("ours.db"));
    ours->UpsertDevice(kToolV100);
    ours->UpsertStage(StageKey(0), "description of stage-a");
    ours->Store({StageKey(0), kToolV100.fingerprint, 1, kToolSettings}, Ok(0.45));
  }

  std::string Path(const std::string& name) const { return (dir_.path() / name).string(); }

  CliResult Run(const std::vector<std::string>& args) const {
    std::string quoted;
    for (const std::string& arg : args) quoted += " " + ShellQuote(arg);
    return ::ios::testing::RunBinary(dir_.path(), kIosDb, quoted, 60, 1 << 20);
  }

  void Export() const {
    const CliResult result = Run({"--db", Path("theirs.db"), "export", "--output", Path("x.json")});
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }

 private:
  ::ios::testing::TempDir dir_{"ios_db_import_test"};
};

TEST_F(IosDbImportTest, OnlyTheReceivingDeviceAndSettingsComeInAndOursAreKept) {
  Export();
  const CliResult result = Run({"--db", Path("ours.db"), "import", Path("x.json"), "--device",
                                "sim:v100", "--settings", kToolSettings});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("imported 2 of 5 measurements"));
  EXPECT_THAT(result.out, HasSubstr("1 already here (kept ours)"));
  EXPECT_THAT(result.out, HasSubstr("refused 1: device fingerprint differs (NVIDIA H100"));
  EXPECT_THAT(result.out, HasSubstr("refused 1: settings differ (w1-n1-r1-float32)"));

  auto ours = ProfileStore::Open(Path("ours.db"));
  EXPECT_EQ(ours->Lookup({StageKey(0), kToolV100.fingerprint, 1, kToolSettings})->median_ms, 0.45);
  const auto b = ours->Lookup({StageKey(1), kToolV100.fingerprint, 8, kToolSettings});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->median_ms, 2.0);
  EXPECT_EQ(b->samples, 36);
  const auto c = ours->Lookup({StageKey(2), kToolV100.fingerprint, 1, kToolSettings});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->error, MeasureError::kOutOfMemory);
  EXPECT_EQ(c->error_message, "needs 40 GiB");
  EXPECT_FALSE(ours->Lookup({StageKey(0), kH100.fingerprint, 1, kToolSettings}).has_value());
  EXPECT_FALSE(
      ours->Lookup({StageKey(0), kToolV100.fingerprint, 1, "w1-n1-r1-float32"}).has_value());
  // Descriptions come along.
  bool described = false;
  for (const MeasurementRow& row : ours->Measurements("")) {
    described = described || row.stage_description == "description of stage-b";
  }
  EXPECT_TRUE(described);
}

TEST_F(IosDbImportTest, ForceTakesEveryRowUnderItsOwnDeviceAndSettings) {
  Export();
  const CliResult result = Run({"--db", Path("ours.db"), "import", Path("x.json"), "--force"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("imported 4 of 5"));
  auto ours = ProfileStore::Open(Path("ours.db"));
  EXPECT_EQ(ours->Lookup({StageKey(0), kH100.fingerprint, 1, kToolSettings})->median_ms, 0.1);
  EXPECT_EQ(ours->Lookup({StageKey(0), kToolV100.fingerprint, 1, "w1-n1-r1-float32"})->median_ms,
            0.6);
  EXPECT_EQ(ours->Lookup({StageKey(0), kToolV100.fingerprint, 1, kToolSettings})->median_ms, 0.45);
  EXPECT_EQ(ours->GetStats().devices, 2);
}

TEST_F(IosDbImportTest, UnclearRequestsAndBadFilesAreRefusedBeforeAnythingIsWritten) {
  Export();
  const auto before = ProfileStore::Open(Path("ours.db"))->GetStats().measurements;
  // No receiving device and settings, and no --force.
  CliResult result = Run({"--db", Path("ours.db"), "import", Path("x.json")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("--device and --settings"));
  // A device this DB does not know, by name.
  result = Run({"--db", Path("ours.db"), "import", Path("x.json"), "--device", "sim:k80",
                "--settings", kToolSettings});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("no device named 'sim:k80'"));
  // A row with a field of the wrong type: file, row and field named.
  json rows = json::parse(ReadFile(Path("x.json")));
  rows[2]["median_ms"] = "fast";
  rows[2]["status"] = "ok";
  std::ofstream(Path("bad.json")) << rows.dump();
  result = Run({"--db", Path("ours.db"), "import", Path("bad.json"), "--force"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("bad.json: row 3: field 'median_ms': expected a number"));
  // Not JSON at all; a CSV export.
  ASSERT_EQ(Run({"--db", Path("theirs.db"), "export", "--output", Path("x.csv")}).exit_code, 0);
  result = Run({"--db", Path("ours.db"), "import", Path("x.csv"), "--force"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("x.csv: this looks like a CSV export; import takes the JSON "
                                    "export"));
  EXPECT_EQ(ProfileStore::Open(Path("ours.db"))->GetStats().measurements, before);
}

TEST_F(IosDbImportTest, ExportOfOneDeviceHasOnlyItsRows) {
  const CliResult result = Run(
      {"--db", Path("theirs.db"), "export", "--device", "sim:v100", "--output", Path("v100.json")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json rows = json::parse(ReadFile(Path("v100.json")));
  ASSERT_EQ(rows.size(), 4u);
  for (const json& row : rows) EXPECT_EQ(row["device_fingerprint"], kToolV100.fingerprint);
  EXPECT_EQ(
      Run({"--db", Path("theirs.db"), "export", "--device", "nope", "--output", Path("n.json")})
          .exit_code,
      1);
}

}  // namespace
}  // namespace ios::db
