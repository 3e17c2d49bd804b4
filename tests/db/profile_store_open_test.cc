// Open modes: kCreate makes and converts files; kReadOnly and kReadWrite
// (ios-db) never create a schema nor change the journal mode, and refuse
// what is not a current ios-farm DB.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "db/profile_store.h"
#include "tests/db/profile_store_testing.h"
#include "tests/testing/process.h"

namespace ios::db {
namespace {

namespace fs = std::filesystem;
using ::ios::testing::ReadFile;
using ::testing::HasSubstr;
using testing::Key;
using testing::kUserVersionOffset;
using testing::Ok;
using testing::SimV100;
using testing::WriteHeaderField;

// Header byte 18: 1 for a rollback journal, 2 for WAL.
constexpr size_t kWriteVersionOffset = 18;

OpenOptions Options(OpenMode mode) {
  OpenOptions options;
  options.mode = mode;
  return options;
}

// Runs `sql` on `path` through plain SQLite (another application's view).
void RunSql(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
}

std::string OpenError(const fs::path& path, OpenMode mode) {
  try {
    ProfileStore::Open(path.string(), Options(mode));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class ProfileStoreOpenTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }
  fs::path PathIn(const std::string& name) const { return dir_.path() / name; }

  // An ios-farm DB with one measurement, as a coordinator leaves it.
  fs::path CoordinatorDb() const {
    const fs::path path = PathIn("farm.db");
    auto store = ProfileStore::Open(path.string());
    store->UpsertDevice(SimV100());
    store->UpsertStage("conv", "conv");
    store->Store(Key("conv", SimV100()), Ok(1.5));
    return path;
  }

 private:
  ::ios::testing::TempDir dir_{"profile_store_open_test"};
};

TEST_F(ProfileStoreOpenTest, ReadOnlyReadsWhatACoordinatorStored) {
  const fs::path path = CoordinatorDb();
  auto store = ProfileStore::Open(path.string(), Options(OpenMode::kReadOnly));
  ASSERT_TRUE(store->Lookup(Key("conv", SimV100())).has_value());
  EXPECT_EQ(store->GetStats().measurements, 1);
  EXPECT_THROW(store->UpsertStage("other", "other"), Error);  // refused by SQLite
}

TEST_F(ProfileStoreOpenTest, ReadOnlyAndReadWriteRefuseAMissingFileAndCreateNothing) {
  const fs::path missing = PathIn("missing.db");
  for (OpenMode mode : {OpenMode::kReadOnly, OpenMode::kReadWrite}) {
    EXPECT_EQ(OpenError(missing, mode), "no profiling DB at " + missing.string());
  }
  EXPECT_TRUE(fs::is_empty(PathIn("")));
}

// Before: a blank SQLite file got our schema and WAL mode from a mere read.
TEST_F(ProfileStoreOpenTest, ReadOnlyAndReadWriteLeaveABlankSqliteFileAlone) {
  const fs::path blank = PathIn("blank.db");
  RunSql(blank, "CREATE TABLE t(x); DROP TABLE t;");
  const std::string before = ReadFile(blank);
  ASSERT_EQ(before[kWriteVersionOffset], 1);
  for (OpenMode mode : {OpenMode::kReadOnly, OpenMode::kReadWrite}) {
    const std::string error = OpenError(blank, mode);
    EXPECT_THAT(error, HasSubstr(blank.string()));
    EXPECT_THAT(error, HasSubstr("not an ios-farm profiling DB"));
    EXPECT_THAT(error, HasSubstr("without the ios-farm schema"));
  }
  EXPECT_EQ(ReadFile(blank), before);
  EXPECT_FALSE(fs::exists(PathIn("blank.db-wal")));
}

TEST_F(ProfileStoreOpenTest, ReadOnlyLeavesTheJournalModeOfOurDbAsItIs) {
  const fs::path path = CoordinatorDb();
  RunSql(path, "PRAGMA journal_mode = DELETE");
  ASSERT_EQ(ReadFile(path)[kWriteVersionOffset], 1);
  auto store = ProfileStore::Open(path.string(), Options(OpenMode::kReadOnly));
  EXPECT_EQ(store->GetStats().measurements, 1);
  store.reset();
  EXPECT_EQ(ReadFile(path)[kWriteVersionOffset], 1);
}

TEST_F(ProfileStoreOpenTest, CreateMakesANewFileOurs) {
  const fs::path path = PathIn("new.db");
  ProfileStore::Open(path.string());
  EXPECT_EQ(ReadFile(path)[kWriteVersionOffset], 2);  // WAL
}

TEST_F(ProfileStoreOpenTest, EveryModeRefusesANewerSchemaVersion) {
  const fs::path path = CoordinatorDb();
  WriteHeaderField(path, kUserVersionOffset, 7);
  for (OpenMode mode : {OpenMode::kCreate, OpenMode::kReadOnly, OpenMode::kReadWrite}) {
    const std::string error = OpenError(path, mode);
    EXPECT_THAT(error, HasSubstr("schema version 7, newer than the version this build supports"));
    EXPECT_THAT(error, HasSubstr(path.string()));
  }
}

TEST_F(ProfileStoreOpenTest, ReadOnlyRefusesAnotherApplicationsDb) {
  const fs::path path = PathIn("other.db");
  RunSql(path, "CREATE TABLE notes(text); PRAGMA application_id = 42;");
  EXPECT_THAT(OpenError(path, OpenMode::kReadOnly), HasSubstr("another application"));
}

TEST_F(ProfileStoreOpenTest, ReadWriteRefusesAReadOnlyFileAtOnce) {
  const fs::path path = CoordinatorDb();
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  if (access(path.c_str(), W_OK) == 0) GTEST_SKIP() << "running as root: files stay writable";
  for (OpenMode mode : {OpenMode::kCreate, OpenMode::kReadWrite}) {
    EXPECT_THAT(OpenError(path, mode), HasSubstr("the file is read-only"));
  }
}

}  // namespace
}  // namespace ios::db
