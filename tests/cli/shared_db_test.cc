// Several ios-coordinator processes on one profiling DB file, as a farm
// runs them: all started together on a fresh file, and two large searches
// side by side. Every process must succeed and the DB must stay consistent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "db/profile_store.h"
#include "tests/testing/binaries.h"
#include "tests/testing/child.h"
#include "tests/testing/process.h"
#include "tests/testing/sanitizers.h"

namespace ios {
namespace {

using ::ios::testing::kCoordinator;

namespace fs = std::filesystem;
using ::ios::testing::ChildProcess;
using ::ios::testing::ReadFile;
using ::testing::HasSubstr;

constexpr auto kProcessTimeout = std::chrono::seconds(180);

// A search's report: the distinct stage count and the IOS latency text.
struct Report {
  long long distinct_stages = -1;
  std::string ios_latency;
};

Report ParseReport(const std::string& out) {
  Report report;
  std::smatch match;
  if (std::regex_search(out, match, std::regex("distinct stages ([0-9]+)"))) {
    report.distinct_stages = std::stoll(match[1].str());
  }
  if (std::regex_search(out, match, std::regex("(^|\n)ios +([0-9]+\\.[0-9]+) ms"))) {
    report.ios_latency = match[2].str();
  }
  return report;
}

// PRAGMA integrity_check's answer for the file at `path`.
std::string IntegrityCheck(const fs::path& path) {
  sqlite3* db = nullptr;
  std::string answer = "cannot open";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &statement, nullptr) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW) {
      answer = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return answer;
}

class SharedDbTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }
  fs::path Path(const std::string& name) const { return dir_.path() / name; }

  // Starts one ios-coordinator per entry of `args` at once, all on `db`,
  // waits for all, and returns their reports; each must exit 0.
  std::vector<Report> RunTogether(const std::vector<std::vector<std::string>>& args,
                                  const fs::path& db) {
    std::vector<std::unique_ptr<ChildProcess>> children;
    for (size_t i = 0; i < args.size(); ++i) {
      std::vector<std::string> argv = {kCoordinator, "--db",     db.string(), "-q",
                                       "--device",   "sim:v100", "--measure", "all"};
      argv.insert(argv.end(), args[i].begin(), args[i].end());
      children.push_back(std::make_unique<ChildProcess>(argv, OutFile(i), ErrFile(i)));
    }
    std::vector<Report> reports;
    for (size_t i = 0; i < children.size(); ++i) {
      EXPECT_TRUE(children[i]->started()) << "process " << i;
      const std::optional<int> code = children[i]->Wait(kProcessTimeout);
      EXPECT_EQ(code, 0) << "process " << i << " stderr:\n" << ReadFile(ErrFile(i));
      reports.push_back(ParseReport(ReadFile(OutFile(i))));
    }
    return reports;
  }

  fs::path OutFile(size_t i) const { return Path("out." + std::to_string(i)); }
  fs::path ErrFile(size_t i) const { return Path("err." + std::to_string(i)); }

 private:
  ::ios::testing::TempDir dir_{"shared_db_test"};
};

// Before: some died with `database is locked [PRAGMA journal_mode = WAL]` or
// the false `not an ios-farm profiling DB: ... application_id 0`.
TEST_F(SharedDbTest, TwelveCoordinatorsStartedTogetherOnAFreshDbAllSucceed) {
  constexpr int kProcesses = 12;
  const fs::path db = Path("fresh.db");
  const std::vector<Report> reports =
      RunTogether(std::vector<std::vector<std::string>>(kProcesses, {"--model", "squeezenet"}), db);
  ASSERT_EQ(reports.size(), size_t{kProcesses});
  for (const Report& report : reports) {
    EXPECT_GT(report.distinct_stages, 0);
    EXPECT_EQ(report.distinct_stages, reports[0].distinct_stages);
    EXPECT_EQ(report.ios_latency, reports[0].ios_latency);  // same answer from every process
  }
  EXPECT_EQ(IntegrityCheck(db), "ok");
  db::OpenOptions read_only;
  read_only.mode = db::OpenMode::kReadOnly;
  const db::Stats stats = db::ProfileStore::Open(db.string(), read_only)->GetStats();
  EXPECT_EQ(stats.searches, kProcesses);
  EXPECT_EQ(stats.devices, 1);
  EXPECT_EQ(stats.measurements, reports[0].distinct_stages);  // each stage stored once
  EXPECT_EQ(stats.failed_measurements, 0);
}

// Before (RandWire at full size): one of the pair died with `database is
// locked [BEGIN IMMEDIATE]` while the other held a long transaction. NASNet
// with s=3 keeps the test short: ~12,000 stages looked up, stored and linked
// by each process.
TEST_F(SharedDbTest, TwoLargeSearchesSideBySideBothSucceed) {
  const fs::path db = Path("pair.db");
  // Narrower under the sanitizers (1.6k stages instead of 12k: 50 s there).
  const std::vector<std::string> args =
      ::ios::testing::kSanitized
          ? std::vector<std::string>{"--model", "nasnet", "-r", "2", "-s", "2"}
          : std::vector<std::string>{"--model", "nasnet", "-s", "3"};
  const std::vector<Report> reports = RunTogether({args, args}, db);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_GT(reports[0].distinct_stages, 1000);
  EXPECT_EQ(reports[0].distinct_stages, reports[1].distinct_stages);
  EXPECT_EQ(reports[0].ios_latency, reports[1].ios_latency);
  EXPECT_EQ(IntegrityCheck(db), "ok");
  db::OpenOptions read_only;
  read_only.mode = db::OpenMode::kReadOnly;
  const db::Stats stats = db::ProfileStore::Open(db.string(), read_only)->GetStats();
  EXPECT_EQ(stats.searches, 2);
  EXPECT_EQ(stats.measurements, reports[0].distinct_stages);
  EXPECT_EQ(stats.failed_measurements, 0);
}

}  // namespace
}  // namespace ios
