// --report FILE.html as a user gives it: ios-coordinator's search and
// --evaluate on the simulated V100 (deterministic, fast) and ios-run on the
// cpu; a path that cannot be written fails before any work.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/testing/binaries.h"
#include "tests/testing/process.h"

namespace ios {
namespace {

namespace fs = std::filesystem;
using ::ios::testing::CliResult;
using ::ios::testing::kCoordinator;
using ::ios::testing::kIosDb;
using ::ios::testing::kIosRun;
using ::ios::testing::ShellQuote;

constexpr const char* kSim = "--device sim:v100 --db t.db -q";

class ReportCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "report_cli_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliResult Run(const std::string& binary, const std::string& args) const {
    CliResult result = ::ios::testing::RunBinary(dir_, binary, args, 300);
    EXPECT_NE(result.exit_code, 124) << "timed out: " << binary << " " << args;
    return result;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(dir_ / name, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // The page is self-contained: its policy first, its data one JSON blob.
  void ExpectReport(const std::string& name) const {
    const std::string page = Read(name);
    ASSERT_FALSE(page.empty()) << name << " was not written";
    EXPECT_NE(page.find("<meta http-equiv=\"Content-Security-Policy\""), std::string::npos);
    const std::string open = "<script type=\"application/json\" id=\"data\">";
    const size_t begin = page.find(open);
    ASSERT_NE(begin, std::string::npos) << name;
    const size_t end = page.find("</script>", begin);
    ASSERT_NE(end, std::string::npos) << name;
    EXPECT_TRUE(nlohmann::json::accept(page.substr(begin + open.size(), end - begin - open.size())))
        << name << ": the data blob is not JSON";
  }
  static std::string TinyModel() {
    return ShellQuote((fs::path(IOS_TEST_DATA_DIR) / "tiny_model.json").string());
  }

  fs::path dir_;
};

TEST_F(ReportCliTest, ASearchAndAnEvaluationWriteTheirReports) {
  CliResult r = Run(kCoordinator, std::string("--model squeezenet ") + kSim +
                                      " --out s.json --report search.html");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("report written to search.html"), std::string::npos) << r.out;
  ExpectReport("search.html");

  r = Run(kCoordinator, std::string("--evaluate s.json ") + kSim + " --report evaluate.html");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("report written to evaluate.html"), std::string::npos) << r.out;
  ExpectReport("evaluate.html");
  // The search stored every baseline stage: the evaluation shows them too.
  EXPECT_NE(Read("evaluate.html").find("sequential and greedy: priced from the profiling DB alone"),
            std::string::npos);

  // The search kept its report input: ios-db draws the same page later,
  // whole (not the partial page of a search recorded before schema 5).
  r = Run(kIosDb, "--db t.db report --model squeezenet --output stored.html");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ExpectReport("stored.html");
  const std::string stored = Read("stored.html");
  EXPECT_EQ(stored.find("Partial report"), std::string::npos);
  EXPECT_NE(stored.find("ios-coordinator search"), std::string::npos);
  EXPECT_NE(stored.find("\"name\":\"sequential\""), std::string::npos);

  // With the schedule on stdout, the line goes to stderr.
  r = Run(kCoordinator, std::string("--model squeezenet ") + kSim + " --out - --report again.html");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("report written"), std::string::npos);
  EXPECT_NE(r.err.find("report written to again.html"), std::string::npos) << r.err;
  EXPECT_TRUE(nlohmann::json::accept(r.out)) << "stdout is the schedule alone";
}

TEST_F(ReportCliTest, AMultiDeviceSearchWritesItsReport) {
  const CliResult r = Run(kCoordinator,
                          "--model squeezenet --devices sim:v100x2 --force-devices "
                          "--db t.db -q --out multi.json --report multi.html");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ExpectReport("multi.html");
  EXPECT_NE(Read("multi.html").find("\"multi\":{"), std::string::npos);
  // Its file holds no stage times: ios-run says where its report is instead.
  const CliResult run = Run(kIosRun, "--schedule multi.json --devices cpux2 --report run.html");
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("reported by its search"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(dir_ / "run.html"));
}

TEST_F(ReportCliTest, AReportPathThatCannotBeWrittenFailsBeforeAnyMeasuring) {
  const CliResult r =
      Run(kCoordinator, std::string("--model squeezenet ") + kSim + " --report no/such/dir/r.html");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--report no/such/dir/r.html"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "t.db")) << "the DB was opened: work began";
  EXPECT_EQ(Run(kCoordinator, std::string("--model squeezenet ") + kSim + " --report .").exit_code,
            2);
  const CliResult run =
      Run(kIosRun,
          "--model " + TinyModel() + " --device cpu,threads=1 --db t.db --report no/such/r.html");
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("--report no/such/r.html"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(dir_ / "t.db"));
}

TEST_F(ReportCliTest, TheMemoryFrontRefusesAReportInOneLine) {
  const CliResult r = Run(kCoordinator, std::string("--model squeezenet ") + kSim +
                                            " --memory-front 3 --report f.html");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--report is not used with --memory-front"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "t.db"));
}

TEST_F(ReportCliTest, IosRunWritesItsReportAndNamesItInJson) {
  const CliResult r = Run(kIosRun, "--model " + TinyModel() +
                                       " --schedule greedy --device cpu,threads=1 --runs 2 "
                                       "--db t.db --format json --report run.html");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_TRUE(nlohmann::json::accept(r.out)) << r.out;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out.at("report"), "run.html");
  ExpectReport("run.html");
  // Without the prediction the stages are unpriced, and the page says so.
  const CliResult plain = Run(kIosRun, "--model " + TinyModel() +
                                           " --schedule greedy --device cpu,threads=1 --runs 2 "
                                           "--no-predict --report plain.html");
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  EXPECT_NE(plain.out.find("report written to plain.html"), std::string::npos) << plain.out;
  ExpectReport("plain.html");
  EXPECT_NE(Read("plain.html").find("--no-predict"), std::string::npos);
}

}  // namespace
}  // namespace ios
