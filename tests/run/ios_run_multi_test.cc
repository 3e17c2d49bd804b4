// ios-run on a multi-device schedule file, the way a user runs it: the
// devices split this machine's cores, the output is checked against
// single-device sequential execution, and what cannot run is one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/zoo.h"
#include "coordinator/multi_schedule.h"
#include "tests/testing/binaries.h"
#include "tests/testing/multi_device.h"
#include "tests/testing/process.h"

namespace ios {
namespace {

namespace fs = std::filesystem;
using ::ios::testing::CliResult;
using ::ios::testing::kIosRun;
using ::ios::testing::ShellQuote;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// Two devices of one core each where this process has two cores; else two
// unpinned one-thread devices (the run is the same, only slower).
std::string TwoDevices() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool two = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 2;
  return two ? "cpux2" : "'cpu,threads=1;cpu,threads=1'";
}

class IosRunMultiTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }
  CliResult Run(const std::string& args) const {
    CliResult result = ::ios::testing::RunBinary(dir_.path(), kIosRun, args, 600);
    EXPECT_NE(result.exit_code, 124) << "timed out: " << args;
    return result;
  }
  static std::string TinyFile() {
    return ShellQuote((fs::path(IOS_TEST_DATA_DIR) / "tiny_model.multi.json").string());
  }
  static json ParseJson(const CliResult& r) {
    try {
      return json::parse(r.out);
    } catch (const json::exception& e) {
      ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out << "\n" << r.err;
      return json::object();
    }
  }

  ::ios::testing::TempDir dir_{"ios_run_multi_test"};
};

TEST_F(IosRunMultiTest, TinyModelOnTwoCpuDevicesEqualsSequentialAndTheNaiveReference) {
  const CliResult r = Run("--schedule " + TinyFile() + " --devices " + TwoDevices() +
                          " --check --format json --runs 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json out = ParseJson(r);
  EXPECT_EQ(out["execution"], "multi-device");
  ASSERT_EQ(out["devices"].size(), 2u) << out.dump(2);
  EXPECT_EQ(out["devices"][0]["operators"], 3);
  EXPECT_EQ(out["devices"][1]["copies_out"], 1);
  EXPECT_EQ(out["copies"], 1);
  EXPECT_EQ(out["copied_bytes"], 16 * 16 * 16 * 4);
  EXPECT_TRUE(out["check"]["against_sequential"]["passed"].get<bool>()) << out.dump(2);
  EXPECT_TRUE(out["check"]["against_reference"]["passed"].get<bool>()) << out.dump(2);
  EXPECT_GT(out["check"]["against_reference"]["max_abs_reference"].get<double>(), 0);
  EXPECT_EQ(out["measured_ms"]["runs"], 2);
}

TEST_F(IosRunMultiTest, SqueezenetWithAlternatingBranchesPassesCheckOnTwoCpuDevices) {
  const Graph g = BuildZooModel("squeezenet");
  coordinator::MultiDeviceSchedule q =
      coordinator::SingletonMultiSchedule(g, ::ios::testing::AlternateBranches(g, 2), 2);
  q.devices = {"cpu,threads=1", "cpu,threads=1"};
  coordinator::MultiScheduleInfo info;
  info.model = "squeezenet";
  ASSERT_TRUE(::ios::testing::WriteFile(dir_.path() / "squeezenet.multi.json",
                                        coordinator::MultiScheduleToJson(g, q, info)));
  const CliResult r = Run("--schedule squeezenet.multi.json --model squeezenet --devices " +
                          TwoDevices() + " --check --runs 1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ios-run: squeezenet on 2 devices"));
  EXPECT_THAT(r.out, HasSubstr("check: PASSED"));
  EXPECT_THAT(r.out, HasSubstr("through host staging buffers"));
}

TEST_F(IosRunMultiTest, TheCoordinatorsHiosScheduleOfInceptionPassesCheck) {
  // ios-coordinator plans on four simulated V100s (HIOS, the window and the
  // IOS DP inside devices); the same file then runs on four cpu devices.
  const CliResult plan = ::ios::testing::RunBinary(
      dir_.path(), ::ios::testing::kCoordinator,
      "--model inception_v3 --devices sim:v100x4 --force-devices --db p.db -q --out m.json", 600);
  ASSERT_EQ(plan.exit_code, 0) << plan.out << plan.err;
  const CliResult r =
      Run("--schedule m.json --devices "
          "'cpu,threads=1;cpu,threads=1;cpu,threads=1;cpu,threads=1' --check "
          "--runs 1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("check: PASSED"));
  EXPECT_THAT(r.out, Not(HasSubstr("copies between devices: 0,")));
}

TEST_F(IosRunMultiTest, WhatAMultiDeviceRunCannotDoIsOneLine) {
  const struct {
    std::string args, message;
  } cases[] = {
      {"--devices 'sim:v100x2'", "--devices: 'sim:v100': multi-device runs take cpu devices"},
      {"--devices 'cpu,threads=1'", "--devices: 1 devices for a schedule over 2"},
      {"--devices 'cpu;;cpu'", "--devices: item 1 '': empty"},
      {"--device cpu", "--device: a multi-device schedule runs on --devices"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const CliResult r = Run("--schedule " + TinyFile() + " " + c.args);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
  }
  const CliResult single = Run("--model squeezenet --schedule greedy --devices cpux2");
  EXPECT_EQ(single.exit_code, 1);
  EXPECT_THAT(single.err, HasSubstr("--devices needs a multi-device schedule file"));
}

}  // namespace
}  // namespace ios
