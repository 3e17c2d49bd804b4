// ios-coordinator and ios-worker refusing a bad configuration the way a user
// meets it: one clear line on stderr and a usage exit code, never an abort
// or a misleading log line. Real binaries; every wait is bounded.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/binaries.h"
#include "tests/testing/child.h"
#include "tests/testing/process.h"

namespace ios {
namespace {

using ::ios::testing::kCoordinator;
using ::ios::testing::kKeygen;
using ::ios::testing::kWorker;
using ::ios::testing::NonEmptyLines;

namespace fs = std::filesystem;
using std::chrono_literals::operator""s;
using ::ios::testing::ChildProcess;
using ::ios::testing::CliResult;
using ::ios::testing::ReadFile;
using ::ios::testing::ShellQuote;
using ::ios::testing::WaitForText;
using ::testing::HasSubstr;
using ::testing::Not;

// A loopback TCP port nobody listens on (it was free a moment ago).
int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return ntohs(address.sin_port);
}

class FarmCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "no temp dir"; }
  fs::path Path(const std::string& name) const { return dir_.path() / name; }
  CliResult Run(const std::string& binary, const std::string& args) {
    CliResult result = ::ios::testing::RunBinary(dir_.path(), binary, args, 60);
    EXPECT_NE(result.exit_code, 124) << "timed out: " << binary << " " << args;
    return result;
  }
  // Expects `result` to be a refusal: `code`, stdout empty, exactly one
  // line on stderr that holds every one of `expected`.
  static void ExpectOneLineRefusal(const CliResult& result, int code,
                                   const std::vector<std::string>& expected,
                                   const std::string& what) {
    EXPECT_EQ(result.exit_code, code) << what << "\n" << result.err;
    EXPECT_EQ(result.out, "") << what;
    EXPECT_THAT(result.err, Not(HasSubstr("terminate"))) << what;
    const std::vector<std::string> lines = NonEmptyLines(result.err);
    ASSERT_EQ(lines.size(), 1u) << what << ":\n" << result.err;
    for (const std::string& text : expected) EXPECT_THAT(lines[0], HasSubstr(text)) << what;
  }
  ::ios::testing::TempDir dir_{"ios_farm_cli"};
};

// Issue 7 item 1 (it used to print "terminate called without an active
// exception" and exit 134).
TEST_F(FarmCliTest, CoordinatorWithAnUnusableDeviceSaysSoInOneLineAndExitsWithTwo) {
  const CliResult search =
      Run(kCoordinator, "--model squeezenet --db ok.db -q --out s.json --device sim:v100");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  // cuda is unusable wherever no GPU (or no driver) is: most machines, CI.
  const bool have_gpu = Run(kWorker, "--backend cuda --check-device").exit_code == 0;
  for (const std::string device : {"v100", "cuda", "cpu,threads=x", "sim", ""}) {
    if (device == "cuda" && have_gpu) continue;
    for (const std::string mode : {"--model squeezenet", "--evaluate s.json"}) {
      const std::string what = mode + " --device '" + device + "'";
      const CliResult r = Run(kCoordinator, mode + " --db x.db --device " + ShellQuote(device));
      ExpectOneLineRefusal(r, 2, {"ios-coordinator: error: --device"}, what);
      if (!device.empty()) {
        EXPECT_THAT(r.err, HasSubstr("'" + device + "'")) << what;
      }
    }
  }
  EXPECT_FALSE(fs::exists(Path("x.db"))) << "refused before the DB is created";
}

// Issue 7 item 9e (port 99999 used to bind another port, silently).
TEST_F(FarmCliTest, CoordinatorRefusesAnEndpointItCannotBind) {
  const struct {
    const char* endpoint;
    const char* expected;
  } cases[] = {
      {"tcp://127.0.0.1:99999", "port 99999 is out of range: ports go from 1 to 65535"},
      {"tcp://127.0.0.1:0", "port 0 is out of range"},
      {"tcp://127.0.0.1", "no port given"},
      {"tcp://127.0.0.1:55x", "port '55x' is not a number"},
      {"udp://127.0.0.1:5555", "unsupported transport"},
      {"127.0.0.1:5555", "unsupported transport"},
  };
  for (const auto& c : cases) {
    const CliResult r = Run(kCoordinator, "--model squeezenet --device sim:v100 --db x.db --bind " +
                                              ShellQuote(c.endpoint));
    ExpectOneLineRefusal(r, 2, {"--bind '" + std::string(c.endpoint) + "'", c.expected},
                         c.endpoint);
  }
}

TEST_F(FarmCliTest, WorkerRefusesAnEndpointItCannotConnectTo) {
  for (const char* endpoint : {"tcp://127.0.0.1:99999", "tcp://*:5555", "tcp://127.0.0.1:*",
                               "tcp://host", "ipc://", "http://host:80"}) {
    const CliResult r = Run(kWorker, std::string("--connect ") + ShellQuote(endpoint));
    ExpectOneLineRefusal(r, 2, {"ios-worker: error: --connect '" + std::string(endpoint) + "'"},
                         endpoint);
  }
}

// Issue 10: ios-worker --check-device opens the device and says what it is,
// or why not; without it, --connect is required.
TEST_F(FarmCliTest, WorkerChecksItsDeviceOrRequiresAnEndpoint) {
  const CliResult ok = Run(kWorker, "--backend sim:k80 --check-device");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("device: sim:k80 (simulated)"));
  EXPECT_THAT(ok.out, HasSubstr("fingerprint: sim-model-v1|gpu=k80"));
  const CliResult bad = Run(kWorker, "--backend cuda,math=fp16 --check-device");
  ExpectOneLineRefusal(bad, 2, {"ios-worker: error:", "math must be fp32 or tf32"}, "cuda math");
  const CliResult none = Run(kWorker, "--backend sim:v100");
  ExpectOneLineRefusal(none, 2, {"--connect is required"}, "no endpoint");
}

// Issue 10: a search can measure through a child ios-worker process (the
// way a cuda search without --bind runs, since the coordinator does not
// link CUDA); the child serves it and is gone when the search ends.
TEST_F(FarmCliTest, ASearchMeasuresThroughAChildWorkerProcess) {
  const CliResult r =
      Run(kCoordinator, "--model squeezenet --device sim:v100 --worker-process --db child.db");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("measuring through ios-worker process"));
  EXPECT_THAT(r.out, HasSubstr("local"));  // the workers table names the child
  EXPECT_THAT(r.out, HasSubstr("sim:v100"));
  // A device the child cannot open is refused before the search, in one line.
  const CliResult bad =
      Run(kCoordinator, "--model squeezenet --device cuda,math=fp16 --db child.db");
  ExpectOneLineRefusal(bad, 2,
                       {"--device 'cuda,math=fp16': the local ios-worker cannot measure on it",
                        "math must be fp32 or tf32"},
                       "cuda child");
}

// Issue 10: a child worker that exits mid-search (as one whose GPU hit a
// sticky error does, so a fresh process takes over) is started again, the
// farm requeues what it held, and the search ends normally.
TEST_F(FarmCliTest, AChildWorkerThatDiesMidSearchIsRestartedAndTheSearchCompletes) {
  std::atomic<bool> finished{false};
  std::atomic<int> killed{0};
  std::thread killer([&] {
    const std::string marker = "measuring through ios-worker process ";
    while (!finished) {
      const std::string err = ReadFile(Path(".stderr.txt"));
      const size_t at = err.find(marker);
      if (at != std::string::npos && err.find(')', at) != std::string::npos) {
        const int pid = std::atoi(err.c_str() + at + marker.size());
        std::this_thread::sleep_for(std::chrono::milliseconds(500));  // mid-search
        if (pid > 0 && kill(pid, SIGKILL) == 0) killed = pid;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  // ~170 stages at 20 ms each: the kill lands well inside the search.
  const CliResult r = Run(kCoordinator,
                          "--model squeezenet --device sim:v100 --worker-process --sim-delay-ms 20 "
                          "--heartbeat-ms 200 --db restart.db");
  finished = true;
  killer.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_GT(killed.load(), 0) << "the child was not killed: " << r.err;
  EXPECT_THAT(r.err, HasSubstr("ios-worker process " + std::to_string(killed.load()) +
                               " exited with status 137; restarted as process"));
}

// Issue 7 item 9f: "signal 15: stopping" used to precede every configuration error.
TEST_F(FarmCliTest, WorkerConfigurationErrorIsTheOnlyThingItSays) {
  const CliResult backend = Run(kWorker, "--connect tcp://127.0.0.1:5555 --backend nope");
  ExpectOneLineRefusal(backend, 2, {"ios-worker: error: unknown backend 'nope'"}, "backend");
  EXPECT_THAT(backend.err, Not(HasSubstr("signal")));

  ASSERT_TRUE(::ios::testing::WriteFile(Path("broken.key"), "public-key = nonsense\n"));
  ASSERT_TRUE(::ios::testing::WriteFile(Path("server.pub"), "public-key = nonsense\n"));
  const CliResult key = Run(kWorker,
                            "--connect tcp://127.0.0.1:5555 --curve-key broken.key "
                            "--curve-server-key server.pub");
  ExpectOneLineRefusal(key, 1, {"ios-worker: error:", "broken.key"}, "key file");
  EXPECT_THAT(key.err, Not(HasSubstr("signal")));
}

// Before: a key file that does not exist was CLI11's ExistingFile refusal
// (exit 105, then 2), while docs/farm.md says a bad key file gives 1.
TEST_F(FarmCliTest, WorkerWithAMissingKeyFileSaysSoAndExitsWithOne) {
  ASSERT_TRUE(::ios::testing::WriteFile(Path("server.pub"), "public-key = nonsense\n"));
  const CliResult r = Run(kWorker,
                          "--connect tcp://127.0.0.1:5555 --curve-key nofile.key "
                          "--curve-server-key server.pub");
  ExpectOneLineRefusal(r, 1, {"ios-worker: error: key file nofile.key does not exist"},
                       "missing key");
}

// Issue 7 item 9f: a worker that never reached its coordinator says so
// (it used to say "coordinator silent for 3.0 s").
TEST_F(FarmCliTest, WorkerThatNeverReachedItsCoordinatorSaysSoAndStopsCleanly) {
  const int port = UnusedPort();
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  ChildProcess worker({kWorker, "--connect", endpoint, "--heartbeat-ms", "50", "--liveness", "1"},
                      Path("worker.log"));
  ASSERT_TRUE(worker.started());
  const auto log =
      WaitForText(Path("worker.log"), "no answer from coordinator at " + endpoint + " yet", 20s);
  EXPECT_TRUE(log.has_value()) << ReadFile(Path("worker.log"));
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(10s), 0);
  const std::string text = ReadFile(Path("worker.log"));
  EXPECT_THAT(text, Not(HasSubstr("silent for")));
  EXPECT_THAT(text, HasSubstr("signal 15: stopping")) << "a real signal is still reported";
}

// Issue 7 item 9d: the hint to start workers includes the CURVE flags.
TEST_F(FarmCliTest, HintToStartWorkersIncludesTheCurveFlags) {
  for (const char* name : {"coordinator", "worker1"}) {
    const CliResult r = Run(kKeygen, std::string(name) + " --dir keys");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  fs::create_directories(Path("allowed"));
  fs::copy_file(Path("keys/worker1.pub"), Path("allowed/worker1.pub"));
  const CliResult r =
      Run(kCoordinator,
          "--model squeezenet --device sim:v100 --db c.db --bind 'tcp://127.0.0.1:*' "
          "--wait-workers-s 1 -q "
          "--curve-secret-key keys/coordinator.key --curve-allow allowed");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, ::testing::ContainsRegex(
                         "start workers with: ios-worker --connect tcp://127\\.0\\.0\\.1:[0-9]+ "
                         "--backend sim:v100 --curve-server-key keys/coordinator\\.pub "
                         "--curve-key WORKER\\.key"))
      << r.err;
}

}  // namespace
}  // namespace ios
