// Several processes on one profiling DB file: opening a fresh file at once,
// writers that wait for each other within the busy budget, and the error
// when the budget runs out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "db/profile_store.h"
#include "tests/db/profile_store_testing.h"
#include "tests/testing/process.h"

namespace ios::db {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::Key;
using testing::Ok;
using testing::SimV100;

// Forks `processes` children that each open `path`, register a device and a
// stage and store one measurement of their own; returns how many failed
// (their errors go to stderr).
int OpenAndWriteInChildren(const fs::path& path, int processes) {
  std::vector<pid_t> children;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        auto store = ProfileStore::Open(path.string());
        store->UpsertDevice(SimV100());
        const std::string stage = "stage-" + std::to_string(i);
        store->UpsertStage(stage, stage);
        store->Store(Key(stage, SimV100()), Ok(1.0 + i));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());
        code = 1;
      }
      _exit(code);  // no gtest teardown in the child
    }
    if (pid > 0) children.push_back(pid);
  }
  int failed = processes - static_cast<int>(children.size());
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed;
}

OpenOptions Options(OpenMode mode, std::chrono::milliseconds busy_budget = kDefaultBusyBudget) {
  OpenOptions options;
  options.mode = mode;
  options.busy_budget = busy_budget;
  return options;
}

class ProfileStoreSharingTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }
  fs::path PathIn(const std::string& name) const { return dir_.path() / name; }

 private:
  ::ios::testing::TempDir dir_{"profile_store_sharing_test"};
};

// Before: some of the processes died with `database is locked [PRAGMA
// journal_mode = WAL]` or the false `not an ios-farm profiling DB ...
// application_id 0` (one process read the header before another's schema
// commit and the schema after it).
TEST_F(ProfileStoreSharingTest, ManyProcessesOpeningOneFreshFileAtOnceAllSucceed) {
  constexpr int kRounds = 16, kProcesses = 16;
  for (int round = 0; round < kRounds; ++round) {
    const fs::path path = PathIn("fresh-" + std::to_string(round) + ".db");
    ASSERT_EQ(OpenAndWriteInChildren(path, kProcesses), 0) << "round " << round;
    auto store = ProfileStore::Open(path.string(), Options(OpenMode::kReadOnly));
    const Stats stats = store->GetStats();
    EXPECT_EQ(stats.devices, 1);
    EXPECT_EQ(stats.stages, kProcesses);
    EXPECT_EQ(stats.measurements, kProcesses);
  }
}

TEST_F(ProfileStoreSharingTest, AWriterWaitsForAnotherProcesssTransactionInsteadOfFailing) {
  const std::string path = PathIn("shared.db").string();
  auto holder = ProfileStore::Open(path);
  holder->UpsertDevice(SimV100());
  holder->UpsertStage("conv", "conv");
  std::promise<void> started;
  std::future<void> waiter;
  holder->RunInTransaction([&] {
    holder->Store(Key("conv", SimV100()), Ok(1.0));
    // The other connection blocks on the write lock this transaction holds
    // until it commits.
    waiter = std::async(std::launch::async, [&] {
      auto other = ProfileStore::Open(path);
      started.set_value();
      other->Store(Key("conv", SimV100()), Ok(2.0));
    });
    started.get_future().wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  ASSERT_NO_THROW(waiter.get());
  EXPECT_DOUBLE_EQ(holder->Lookup(Key("conv", SimV100()))->median_ms, 2.0);
}

TEST_F(ProfileStoreSharingTest, AWriterGivesUpAfterTheBusyBudgetWithAMessageThatSaysSo) {
  const std::string path = PathIn("shared.db").string();
  auto holder = ProfileStore::Open(path);
  holder->UpsertDevice(SimV100());
  holder->UpsertStage("conv", "conv");
  auto impatient =
      ProfileStore::Open(path, Options(OpenMode::kCreate, std::chrono::milliseconds(100)));
  holder->RunInTransaction([&] {
    holder->Store(Key("conv", SimV100()), Ok(1.0));
    try {
      impatient->Store(Key("conv", SimV100()), Ok(2.0));
      ADD_FAILURE() << "expected ios::Error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(path));
      EXPECT_THAT(e.what(), HasSubstr("busy budget (100 ms)"));
      EXPECT_THAT(e.what(), HasSubstr("storing a measurement"));
    }
  });
  // Nothing was left half done: the budget-limited store works again.
  impatient->Store(Key("conv", SimV100()), Ok(3.0));
  EXPECT_DOUBLE_EQ(holder->Lookup(Key("conv", SimV100()))->median_ms, 3.0);
}

TEST_F(ProfileStoreSharingTest, OpeningAnInitialisedDbNeverWaitsForAWriter) {
  const std::string path = PathIn("shared.db").string();
  auto writer = ProfileStore::Open(path);
  writer->UpsertDevice(SimV100());
  writer->RunInTransaction([&] {
    writer->UpsertStage("conv", "conv");
    // Same thread: a wait for the writer's lock could never end.
    auto reader =
        ProfileStore::Open(path, Options(OpenMode::kCreate, std::chrono::milliseconds(100)));
    EXPECT_EQ(reader->Devices().size(), 1u);
  });
}

// The search's look-up of every stage runs in one read transaction: it must
// neither keep another coordinator from committing (a RandWire look-up takes
// seconds) nor see that coordinator's commits half way through.
TEST_F(ProfileStoreSharingTest, AReadTransactionNeitherBlocksAWriterNorSeesItsCommits) {
  const std::string path = PathIn("shared.db").string();
  auto reader = ProfileStore::Open(path);
  reader->UpsertDevice(SimV100());
  reader->UpsertStage("conv", "conv");
  auto writer =
      ProfileStore::Open(path, Options(OpenMode::kCreate, std::chrono::milliseconds(100)));
  reader->RunInReadTransaction([&] {
    EXPECT_FALSE(reader->Lookup(Key("conv", SimV100())).has_value());
    ASSERT_NO_THROW(writer->Store(Key("conv", SimV100()), Ok(2.0)));
    EXPECT_FALSE(reader->Lookup(Key("conv", SimV100())).has_value()) << "one snapshot";
  });
  EXPECT_DOUBLE_EQ(reader->Lookup(Key("conv", SimV100()))->median_ms, 2.0);
}

}  // namespace
}  // namespace ios::db
