// The pieces of measuring through a child ios-worker: finding the binary,
// reaching a bound endpoint from this host, checking a device in a child,
// and a child that is stopped and reaped when its owner goes.
#include "coordinator/worker_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "common/error.h"
#include "tests/testing/binaries.h"

namespace ios::coordinator {
namespace {

TEST(WorkerProcessTest, FindsTheWorkerInTheBuildTreeOrBesideTheExecutable) {
  // The coordinator lives in <build>/coordinator/, the worker in <build>/worker/.
  EXPECT_EQ(FindWorkerBinary(::ios::testing::kCoordinator), ::ios::testing::kWorker);
  // Beside itself (an installed or packed layout).
  EXPECT_EQ(FindWorkerBinary(::ios::testing::kWorker), ::ios::testing::kWorker);
  EXPECT_EQ(FindWorkerBinary("/no/such/ios-coordinator"), "");
}

TEST(WorkerProcessTest, AWildcardBindIsReachedOnLoopback) {
  EXPECT_EQ(LoopbackTo("tcp://*:5555"), "tcp://127.0.0.1:5555");
  EXPECT_EQ(LoopbackTo("tcp://0.0.0.0:41000"), "tcp://127.0.0.1:41000");
  EXPECT_EQ(LoopbackTo("tcp://10.1.2.3:5555"), "tcp://10.1.2.3:5555");
}

TEST(WorkerProcessTest, CheckingADeviceGivesTheWorkersOwnReason) {
  EXPECT_EQ(CheckDeviceInWorker(::ios::testing::kWorker, "sim:v100"), "");
  const std::string problem = CheckDeviceInWorker(::ios::testing::kWorker, "sim:nope");
  EXPECT_NE(problem.find("unknown simulated GPU 'nope'"), std::string::npos) << problem;
  EXPECT_NE(CheckDeviceInWorker("/no/such/ios-worker", "sim:v100"), "");
}

TEST(WorkerProcessTest, AChildIsStoppedAndReapedWhenItsOwnerGoes) {
  pid_t pid = -1;
  {
    WorkerProcess child("/bin/sleep", {"30"});
    pid = child.pid();
    ASSERT_GT(pid, 0);
    EXPECT_FALSE(child.Exited().has_value());
  }
  // Reaped: no such process any more (not even a zombie of ours).
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  WorkerProcess quick("/bin/true", {});
  for (int i = 0; i < 200 && !quick.Exited(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(quick.Exited().has_value());
  EXPECT_EQ(*quick.Exited(), 0);
  EXPECT_THROW(WorkerProcess("/no/such/binary", {}), Error);
}

}  // namespace
}  // namespace ios::coordinator
