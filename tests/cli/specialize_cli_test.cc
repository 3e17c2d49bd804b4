// ios-coordinator --specialize as a user runs it (coordinator/specialize.h):
// the matrix alone on stdout in each format, a second run that measures
// nothing, the HTML report's heat map, and the one-line refusals of lists
// where they do not apply.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/testing/binaries.h"
#include "tests/testing/process.h"
#include "tests/testing/sanitizers.h"

namespace ios {
namespace {

using ::ios::testing::CliResult;
using ::ios::testing::kCoordinator;
using ::ios::testing::kIosDb;
using ::ios::testing::NonEmptyLines;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string TinyModel() {
  return (std::filesystem::path(IOS_TEST_DATA_DIR) / "tiny_model.json").string();
}

class SpecializeCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "cannot make a temp dir"; }
  CliResult Coordinator(const std::string& args) const {
    CliResult result = ::ios::testing::RunBinary(dir_.path(), kCoordinator, args + " --db p.db");
    EXPECT_NE(result.exit_code, 124) << "timed out: " << args;
    return result;
  }
  std::filesystem::path Path(const std::string& name) const { return dir_.path() / name; }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  ::ios::testing::TempDir dir_{"ios_specialize_cli"};
};

constexpr const char* kSimMatrix =
    "--model squeezenet --specialize --batch 1,8 --device sim:v100 --device sim:k80";

TEST_F(SpecializeCliTest, PrintsTheMatrixAloneOnStdoutAndASecondRunMeasuresNothing) {
  const CliResult first = Coordinator(kSimMatrix);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, StartsWith("specialization matrix of squeezenet: rows = the schedule "
                                    "optimised for, columns = where it runs"));
  EXPECT_THAT(first.out, HasSubstr("Table 3 is the transpose"));
  EXPECT_THAT(first.out, HasSubstr("SIMULATED latencies on sim:v100, sim:k80"));
  EXPECT_THAT(first.out, HasSubstr("\nbatch 8, sim:k80 ("));
  EXPECT_GE(std::count(first.out.begin(), first.out.end(), '*'), 4) << first.out;
  EXPECT_THAT(first.out, Not(HasSubstr("specialize: search")));
  EXPECT_THAT(first.err, HasSubstr("specialize: search 4 of 4: batch 8 on sim:k80"));
  EXPECT_THAT(first.err, HasSubstr("on sim:k80, SIMULATED latencies"));

  const CliResult second = Coordinator(std::string(kSimMatrix) + " -q --format json");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  ASSERT_TRUE(json::accept(second.out)) << second.out;
  const json doc = json::parse(second.out);
  EXPECT_EQ(doc["stages_measured"], 0);
  EXPECT_EQ(doc["runs_measured"], 0);
  ASSERT_EQ(doc["settings"].size(), 4u);
  EXPECT_EQ(doc["settings"][3]["device"], "sim:k80");
  EXPECT_EQ(doc["settings"][3]["batch"], 8);
  ASSERT_EQ(doc["cells"].size(), 4u);
  for (size_t j = 0; j < 4; ++j) {
    // The diagonal is the best of its column on the simulator.
    EXPECT_DOUBLE_EQ(doc["normalised"][j][j].get<double>(), 1.0) << j;
    EXPECT_EQ(doc["cells"][0][j]["source"], "db");
  }

  const CliResult csv = Coordinator(std::string(kSimMatrix) + " -q --format csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const auto lines = NonEmptyLines(csv.out);
  ASSERT_EQ(lines.size(), 17u) << csv.out;
  EXPECT_EQ(lines[0],
            "optimised_batch,optimised_device,run_batch,run_device,predicted_ms,measured_ms,ratio,"
            "source");
  EXPECT_THAT(lines[16], StartsWith("8,sim:k80,8,sim:k80,"));
  EXPECT_THAT(lines[16], HasSubstr(",1.000000,db"));
}

TEST_F(SpecializeCliTest, DrawsTheMatrixAsAHeatMapInTheReportAndRecordsEachSearch) {
  const CliResult r = Coordinator(
      "--model squeezenet --specialize --batch 1,8 --device sim:v100 -q --format json "
      "--report m.html");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // stdout stays the matrix alone: the report is announced on stderr.
  EXPECT_TRUE(json::accept(r.out)) << r.out;
  EXPECT_THAT(r.err, HasSubstr("report written to m.html"));

  const std::string page = Read("m.html");
  ASSERT_FALSE(page.empty()) << "m.html was not written";
  const std::string open = "<script type=\"application/json\" id=\"data\">";
  const size_t begin = page.find(open);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = page.find("</script>", begin);
  ASSERT_NE(end, std::string::npos);
  const std::string blob = page.substr(begin + open.size(), end - begin - open.size());
  ASSERT_TRUE(json::accept(blob)) << "the data blob is not JSON";
  const json data = json::parse(blob);
  // One schedule per setting, each drawn at its own setting.
  ASSERT_EQ(data["schedules"].size(), 2u);
  EXPECT_EQ(data["schedules"][1]["name"], "optimised for batch 8 on sim:v100");
  EXPECT_EQ(data["schedules"][0]["returned"], true);
  EXPECT_EQ(data["simulated"], true);
  // The heat map: settings^2 cells, the diagonal marked.
  ASSERT_NE(page.find("id=\"matrix-table\""), std::string::npos);
  size_t cells = 0;
  for (size_t at = page.find("<td data-r="); at != std::string::npos;
       at = page.find("<td data-r=", at + 1)) {
    ++cells;
  }
  EXPECT_EQ(cells, 4u);
  EXPECT_THAT(page, HasSubstr("Table 3 is the transpose"));

  // Each search is a search of the DB like a plain one.
  const CliResult searches =
      ::ios::testing::RunBinary(Path(""), kIosDb, "searches --db p.db --format json");
  ASSERT_EQ(searches.exit_code, 0) << searches.err;
  ASSERT_TRUE(json::accept(searches.out));
  const json recorded = json::parse(searches.out);
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_EQ(recorded[0]["batch_size"], 1);
  EXPECT_EQ(recorded[1]["batch_size"], 8);
  // With its report input, for `ios-db report`.
  EXPECT_EQ(recorded[1]["report"], true);
}

// The measured case (plain build only: under a sanitizer the cpu's
// timings are not the cpu's, and the sim test covers the code).
TEST_F(SpecializeCliTest, OnTheCpuMeasuresTheMatrixOnceAndThenReusesIt) {
  if (::ios::testing::kSanitized) GTEST_SKIP() << "timings under a sanitizer are not the cpu's";
  const std::string args = "--model " + TinyModel() +
                           " --specialize --batch 1,2 --device cpu,threads=1 -q --format json";
  const CliResult first = Coordinator(args);
  if (first.exit_code == 2 && first.err.find("--device 'cpu") != std::string::npos) {
    GTEST_SKIP() << "no cpu backend in this build: " << first.err;
  }
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(json::accept(first.out)) << first.out;
  const json one = json::parse(first.out);
  EXPECT_GT(one["stages_measured"].get<int>(), 0);
  EXPECT_GT(one["runs_measured"].get<int>(), 0);
  EXPECT_EQ(one["settings"][0]["simulated"], false);
  for (const auto& row : one["cells"]) {
    for (const auto& cell : row) {
      EXPECT_TRUE(cell["measured_ms"].is_number()) << cell.dump();
      EXPECT_TRUE(cell["predicted_ms"].is_number()) << cell.dump();
    }
  }
  const CliResult second = Coordinator(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  ASSERT_TRUE(json::accept(second.out)) << second.out;
  const json two = json::parse(second.out);
  EXPECT_EQ(two["stages_measured"], 0);
  EXPECT_EQ(two["runs_measured"], 0);
  for (size_t i = 0; i < 2; ++i) {
    for (size_t j = 0; j < 2; ++j) {
      // The first run's figures, from the DB.
      const json& was = one["cells"][i][j];
      const json& is = two["cells"][i][j];
      EXPECT_EQ(is["source"], "db") << is.dump();
      EXPECT_EQ(is["measured_ms"], was["measured_ms"]);
      EXPECT_EQ(is["predicted_ms"], was["predicted_ms"]);
    }
  }
}

TEST_F(SpecializeCliTest, RefusesListsWithoutSpecializeAndWhatItCannotCombineInOneLine) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"--model squeezenet --specialize --batch 1,x --device sim:v100",
       "--batch 1,x: 'x' is not a batch size (a whole number from 1 to 1048576)"},
      {"--model squeezenet --specialize --batch 1,,2 --device sim:v100", "'' is not a batch size"},
      {"--model squeezenet --specialize --batch 1,0 --device sim:v100",
       "--batch: Value 0 not in range 1 to 1048576"},
      {"--model squeezenet --specialize --batch 8,8 --device sim:v100",
       "--batch 8,8: batch size 8 is given twice"},
      {"--model squeezenet --batch 1,8 --device sim:v100",
       "--batch takes a list of batch sizes only with --specialize"},
      {"--model squeezenet --device sim:v100 --device sim:k80",
       "--device is given 2 times; several devices are compared only with --specialize"},
      {"--model squeezenet --device sim:v100 --format csv",
       "--format applies to --specialize only"},
      {"--model squeezenet --specialize --device sim:v100 --device sim:v100",
       "--device sim:v100 is given twice"},
      {"--model squeezenet --specialize --device sim:v100 --device sim:k80 --bind tcp://*:5555",
       "--bind serves one device"},
      {"--model squeezenet --specialize --device sim:v100 --out s.json",
       "--out is not used with --specialize"},
      {"--model squeezenet --specialize --devices sim:v100x2", "it is not used with --devices"},
      {"--evaluate s.json --specialize --device sim:v100",
       "--specialize is not used with --evaluate"},
      {"--model squeezenet --specialize --device sim:v100 --device sim:nope", "sim:nope"},
      {"--model squeezenet --specialize --device sim:v100 --report no/such/dir/m.html",
       "--report no/such/dir/m.html: cannot write the report there"},
  };
  for (const auto& c : cases) {
    const CliResult r = Coordinator(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_EQ(NonEmptyLines(r.err).size(), 1u) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
  // CLI11's own refusal (and its hint to --help).
  const CliResult xml =
      Coordinator("--model squeezenet --specialize --device sim:v100 --format xml");
  EXPECT_EQ(xml.exit_code, 2);
  EXPECT_THAT(xml.err, HasSubstr("--format: xml not in"));
  // Usage errors cost nothing: the DB was never opened.
  EXPECT_FALSE(std::filesystem::exists(Path("p.db")));
}

}  // namespace
}  // namespace ios
