// Issue 21 bug 8: what every tool shares on its command line (--version,
// exit code 2 for bad usage) and what a search says when it is interrupted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "tests/testing/binaries.h"
#include "tests/testing/child.h"
#include "tests/testing/process.h"

namespace ios {
namespace {

namespace fs = std::filesystem;
using ::ios::testing::ChildProcess;
using ::ios::testing::CliResult;
using ::ios::testing::ReadFile;
using ::testing::HasSubstr;
using ::testing::Not;

class ToolsCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }
  CliResult Run(const std::string& binary, const std::string& args) const {
    return ::ios::testing::RunBinary(dir_.path(), binary, args, 120);
  }
  fs::path Path(const std::string& name) const { return dir_.path() / name; }

 private:
  ::ios::testing::TempDir dir_{"tools_cli_test"};
};

TEST_F(ToolsCliTest, EveryToolAnswersVersionWithTheProjectVersion) {
  const struct {
    const char* binary;
    const char* name;
  } tools[] = {{::ios::testing::kCoordinator, "ios-coordinator"},
               {::ios::testing::kWorker, "ios-worker"},
               {::ios::testing::kIosRun, "ios-run"},
               {::ios::testing::kIosDb, "ios-db"}};
  for (const auto& tool : tools) {
    const CliResult r = Run(tool.binary, "--version");
    EXPECT_EQ(r.exit_code, 0) << tool.name << ": " << r.err;
    EXPECT_EQ(r.out, std::string(tool.name) + " " + IOS_FARM_VERSION + "\n");
    EXPECT_EQ(r.err, "") << tool.name;
  }
}

// The README: 2 for a bad command line in every tool, an unknown device
// included (ios-worker said 1).
TEST_F(ToolsCliTest, AnUnknownDeviceIsBadUsageForTheWorkerToo) {
  for (const std::string args :
       {"--backend nope --check-device", "--backend nope --connect tcp://127.0.0.1:5555"}) {
    const CliResult r = Run(::ios::testing::kWorker, args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr("unknown backend 'nope'")) << args;
  }
}

// Ctrl-C used to end a search with exit 130 and not a word about what the
// DB kept.
TEST_F(ToolsCliTest, AnInterruptedSearchSaysWhatTheDbKeptAndExits130) {
  const fs::path out = Path("out.txt"), err = Path("err.txt");
  ChildProcess search(
      {::ios::testing::kCoordinator, "--model", "squeezenet", "--device", "sim:v100",
       "--sim-delay-ms", "20", "--measure", "all", "--db", Path("kept.db").string()},
      out, err);
  ASSERT_TRUE(search.started());
  ASSERT_TRUE(::ios::testing::WaitForText(err, "measure [", std::chrono::seconds(60)))
      << ReadFile(err);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // some stages measured
  search.Signal(SIGINT);
  EXPECT_EQ(search.Wait(std::chrono::seconds(30)), 130) << ReadFile(err);
  const std::string said = ReadFile(err);
  std::smatch match;
  ASSERT_TRUE(std::regex_search(
      said, match,
      std::regex("ios-coordinator: interrupted; measurements kept in DB .*kept\\.db \\(at least "
                 "([0-9]+) stages measured in this run\\); rerunning the same command resumes\n")))
      << said;
  EXPECT_GT(std::stoll(match[1].str()), 0) << said;
}

// The progress line of a lazy search (the default) used to stop at, e.g.,
// 87% of the candidate stages without a word: lazy measurement skips the
// stages whose bounds rule them out. The last line ends at 100% or says why.
TEST_F(ToolsCliTest, TheLastProgressLineEndsAt100PercentOrSaysWhyItEndedEarly) {
  for (const std::string measure : {"lazy", "all"}) {
    const CliResult r =
        Run(::ios::testing::kCoordinator, "--model squeezenet --device sim:v100 --measure " +
                                              measure + " --db " + measure + ".db");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string last;
    for (size_t at = 0; (at = r.err.find("measure", at)) != std::string::npos; ++at) {
      if (at == 0 || r.err[at - 1] == '\n') last = r.err.substr(at, r.err.find('\n', at) - at);
    }
    ASSERT_FALSE(last.empty()) << r.err;
    if (measure == "lazy") {
      EXPECT_THAT(last, HasSubstr("measure (lazy): done after ")) << last;
      EXPECT_THAT(last, HasSubstr("cannot beat the schedule found")) << last;
      // No bar with a total the lazy search never means to reach.
      EXPECT_THAT(r.err, Not(HasSubstr("measure ["))) << r.err;
    } else {
      EXPECT_THAT(last, HasSubstr("100%")) << last;
    }
  }
}

}  // namespace
}  // namespace ios
