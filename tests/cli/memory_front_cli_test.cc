// ios-coordinator --memory-front as a user runs it (coordinator/memory_front.h):
// the front's table, what --out writes, and the one-line refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/binaries.h"
#include "tests/testing/process.h"

namespace ios {
namespace {

using ::ios::testing::CliResult;
using ::ios::testing::kCoordinator;
using ::ios::testing::NonEmptyLines;
using ::ios::testing::ReadFile;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class MemoryFrontCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "cannot make a temp dir"; }
  // On the simulated V100: deterministic and fast.
  CliResult Coordinator(const std::string& args) const {
    CliResult result =
        ::ios::testing::RunBinary(dir_.path(), kCoordinator, args + " --device sim:v100 --db p.db");
    EXPECT_NE(result.exit_code, 124) << "timed out: " << args;
    return result;
  }
  std::filesystem::path Path(const std::string& name) const { return dir_.path() / name; }

 private:
  ::ios::testing::TempDir dir_{"ios_memory_front_cli"};
};

TEST_F(MemoryFrontCliTest, PrintsTheFrontWithProgressAndTheBaselines) {
  const CliResult r = Coordinator("--model darts_cell --memory-front 4 --no-verify");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("memory front of darts_cell (26 operators) on sim:v100 (SIMULATED"));
  EXPECT_THAT(r.out, HasSubstr("\n  least peak "));
  EXPECT_THAT(r.out, HasSubstr("\n  none "));
  EXPECT_THAT(r.out, HasSubstr("\n  sequential "));
  EXPECT_THAT(r.out, HasSubstr("at the sequential schedule's peak"));
  EXPECT_THAT(r.out, HasSubstr("all latencies above are simulated"));
  EXPECT_THAT(r.err, HasSubstr("memory front: search 1 of "));
  EXPECT_THAT(r.err, HasSubstr(": --objective memory\n"));
  EXPECT_FALSE(std::filesystem::exists(Path("s.json")));
}

TEST_F(MemoryFrontCliTest, OutWritesTheUnconstrainedScheduleOrTheOneAskedFor) {
  const CliResult free = Coordinator("--model darts_cell --memory-front 3 -q -o free.json");
  ASSERT_EQ(free.exit_code, 0) << free.err;
  EXPECT_THAT(free.out, HasSubstr("written to free.json: the unconstrained search's schedule"));
  EXPECT_FALSE(json::parse(ReadFile(Path("free.json")))["memory"].contains("budget_bytes"));
  const CliResult least =
      Coordinator("--model darts_cell --memory-front 3 -q --objective memory -o least.json");
  ASSERT_EQ(least.exit_code, 0) << least.err;
  EXPECT_THAT(least.out, HasSubstr("written to least.json: the least-peak search's"));
  EXPECT_EQ(json::parse(ReadFile(Path("least.json")))["memory"]["objective"], "memory");
  // --out - : the schedule owns stdout, the table goes to stderr.
  const CliResult dash = Coordinator("--model darts_cell --memory-front 2 -q -o -");
  ASSERT_EQ(dash.exit_code, 0) << dash.err;
  EXPECT_TRUE(json::accept(dash.out)) << dash.out;
  EXPECT_THAT(dash.err, HasSubstr("memory front of darts_cell"));
}

TEST_F(MemoryFrontCliTest, IsRefusedInOneLineWithEvaluateDevicesOrABadCount) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"--evaluate s.json --memory-front", "--memory-front is not used with --evaluate"},
      {"--model darts_cell --devices sim:v100x2 --memory-front",
       "--memory-front searches one device; it is not used with --devices"},
      {"--model darts_cell --memory-front 1", "--memory-front: Value 1 not in range 2 to 32"},
      {"--model darts_cell --memory-front 33", "not in range"},
  };
  for (const auto& c : cases) {
    const CliResult r = Coordinator(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_THAT(r.out, Not(HasSubstr("memory front of")));
  }
  // Usage errors cost nothing: the DB was never opened.
  EXPECT_FALSE(std::filesystem::exists(Path("p.db")));
  const CliResult one = Coordinator("--evaluate s.json --memory-front");
  EXPECT_EQ(NonEmptyLines(one.err).size(), 1u) << one.err;
  const CliResult devices = Coordinator("--model darts_cell --devices sim:v100x2 --memory-front 3");
  EXPECT_EQ(NonEmptyLines(devices.err).size(), 1u) << devices.err;
}

}  // namespace
}  // namespace ios
