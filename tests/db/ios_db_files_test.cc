// The files ios-db reads and creates, through the built binary (most from
// issue 21 bug 8): a DB that is a directory, a FIFO or a device, a DB in a read-only folder, and
// import's file (a device, a CSV export, keys that do not parse, nothing to
// import) and its DB (created when missing).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
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
using ::ios::testing::ShellQuote;
using ::ios::testing::WriteFile;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::kToolSettings;
using testing::kToolV100;

// A canonical stage key: SqueezeNet's first operator alone.
std::string RealStageKey() {
  const Graph graph = BuildZooModel("squeezenet");
  StageKeyer keyer(graph);
  return keyer.Key(Stage{Strategy::kParallel, {{1}}});
}

// One row as `ios-db --format json export` writes it.
json ExportRow(const std::string& stage_key) {
  return {{"device", kToolV100.name},
          {"device_fingerprint", kToolV100.fingerprint},
          {"backend", kToolV100.backend},
          {"simulated", true},
          {"stage_key", stage_key},
          {"stage", "a stage"},
          {"settings", kToolSettings},
          {"batch_size", 1},
          {"status", "ok"},
          {"median_ms", 0.5},
          {"spread_ms", 0.01},
          {"samples", 36},
          {"error_message", nullptr}};
}

class IosDbFilesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }
  std::string Path(const std::string& name) const { return (dir_.path() / name).string(); }
  const fs::path& dir_path() const { return dir_.path(); }
  CliResult Run(const std::vector<std::string>& args, const std::string& binary = kIosDb) const {
    std::string quoted;
    for (const std::string& arg : args) quoted += " " + ShellQuote(arg);
    return ::ios::testing::RunBinary(dir_.path(), binary, quoted, 60);
  }

 private:
  ::ios::testing::TempDir dir_{"ios_db_files_test"};
};

// ios-db said so itself before; now ProfileStore::Open does, for ios-db and
// ios-coordinator alike (which said "SQLite error in sqlite3_open_v2 at
// .../sqlite_util.cc:37 ...").
TEST_F(IosDbFilesTest, ADirectoryGivenAsTheDbIsNamedAsSuch) {
  const CliResult result = Run({"--db", dir_path().string(), "stats"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err,
            "ios-db: " + dir_path().string() + ": is a directory, not a profiling DB file\n");
  EXPECT_EQ(result.out, "");
}

TEST_F(IosDbFilesTest, AFifoOrADeviceGivenAsTheDbIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(Path("db.fifo").c_str(), 0600), 0);
  CliResult fifo = Run({"--db", Path("db.fifo"), "stats"});
  EXPECT_NE(fifo.exit_code, 124) << "blocked on the FIFO";
  EXPECT_EQ(fifo.exit_code, 1);
  EXPECT_THAT(fifo.err, HasSubstr("db.fifo: not a regular file (a FIFO)"));
  CliResult device = Run({"--db", "/dev/zero", "stats"});
  EXPECT_EQ(device.exit_code, 1);
  EXPECT_THAT(device.err, HasSubstr("/dev/zero: not a regular file (a character device)"));
}

// SQLite reads a WAL database through a -shm file it creates beside it; in a
// folder the user cannot write, the queries used to fail.
TEST_F(IosDbFilesTest, ADbInAReadOnlyFolderCanBeQueried) {
  const fs::path folder = Path("ro");
  fs::create_directory(folder);
  {
    auto store = ProfileStore::Open((folder / "p.db").string());
    store->UpsertDevice(kToolV100);
  }
  ASSERT_FALSE(fs::exists(folder / "p.db-wal")) << "closing folds the log into the file";
  fs::permissions(folder, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read |
                              fs::perms::others_exec);
  // root writes anywhere: run the query as nobody to see the folder as
  // read-only (nobody must be able to reach it).
  fs::permissions(dir_path(), fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add);
  std::vector<std::string> args = {"--db", (folder / "p.db").string(), "--format", "json",
                                   "devices"};
  std::string binary = kIosDb;
  if (::geteuid() == 0) {
    if (!fs::exists("/usr/bin/setpriv")) GTEST_SKIP() << "root without setpriv";
    args.insert(args.begin(), {"--reuid=65534", "--regid=65534", "--clear-groups", kIosDb});
    binary = "/usr/bin/setpriv";
  }
  const CliResult result = Run(args, binary);
  fs::permissions(folder, fs::perms::owner_all);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr(kToolV100.fingerprint));
  EXPECT_FALSE(fs::exists(folder / "p.db-shm"));
}

TEST_F(IosDbFilesTest, ImportCreatesAMissingDb) {
  ASSERT_TRUE(WriteFile(Path("x.json"), json::array({ExportRow(RealStageKey())}).dump()));
  const CliResult result = Run({"--db", Path("new.db"), "import", Path("x.json"), "--force"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("imported 1 of 1 measurements"));
  EXPECT_EQ(ProfileStore::Open(Path("new.db"))->GetStats().measurements, 1);
}

TEST_F(IosDbFilesTest, ImportOfADeviceOrADirectoryIsRefusedUnread) {
  for (const std::string& file : {std::string("/dev/zero"), Path("")}) {
    const CliResult result = Run({"--db", Path("new.db"), "import", file, "--force"});
    EXPECT_EQ(result.exit_code, 1) << file;
    EXPECT_THAT(result.err, HasSubstr(": not a regular file (a ")) << file;
    EXPECT_THAT(result.err, ::testing::Not(HasSubstr("bad_alloc"))) << file;
  }
  EXPECT_FALSE(fs::exists(Path("new.db"))) << "no DB is left behind";
}

TEST_F(IosDbFilesTest, ImportRefusesARowWhoseStageKeyDoesNotParseNamingTheRow) {
  json rows = json::array({ExportRow(RealStageKey()), ExportRow("conv3x3-key")});
  ASSERT_TRUE(WriteFile(Path("x.json"), rows.dump()));
  const CliResult result = Run({"--db", Path("new.db"), "import", Path("x.json"), "--force"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              HasSubstr("x.json: row 2: field 'stage_key': expected a canonical stage key ("));
  EXPECT_FALSE(fs::exists(Path("new.db")));
}

TEST_F(IosDbFilesTest, ImportingNothingIsAnErrorThatSaysWhy) {
  {
    auto store = ProfileStore::Open(Path("ours.db"));
    store->UpsertDevice(kToolV100);
  }
  ASSERT_TRUE(WriteFile(Path("empty.json"), "[]"));
  CliResult empty = Run({"--db", Path("ours.db"), "import", Path("empty.json"), "--force"});
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_THAT(empty.err, HasSubstr("empty.json holds no measurements"));
  // Every row for other settings: all refused.
  ASSERT_TRUE(WriteFile(Path("x.json"), json::array({ExportRow(RealStageKey())}).dump()));
  CliResult refused = Run({"--db", Path("ours.db"), "import", Path("x.json"), "--device",
                           "sim:v100", "--settings", "w1-n1-r1-float32"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.out, HasSubstr("refused 1: settings differ"));
  EXPECT_THAT(refused.err, HasSubstr("nothing imported from"));
  // The same rows again once imported: nothing new, and that is fine.
  ASSERT_EQ(Run({"--db", Path("ours.db"), "import", Path("x.json"), "--force"}).exit_code, 0);
  CliResult again = Run({"--db", Path("ours.db"), "import", Path("x.json"), "--force"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("1 already here"));
}

}  // namespace
}  // namespace ios::db
