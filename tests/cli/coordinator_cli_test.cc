// Runs the built ios-coordinator (and ios-db) binaries the way a user does,
// in a fresh directory per test, and checks what they print and return.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/binaries.h"
#include "tests/testing/process.h"

namespace ios {
namespace {

using ::ios::testing::kCoordinator;
using ::ios::testing::kIosDb;
using ::ios::testing::NonEmptyLines;

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

using ::ios::testing::CliResult;
using ::ios::testing::ReadFile;
using ::ios::testing::ShellQuote;
using ::ios::testing::WriteFile;

// A file under tests/data.
std::string DataFile(const std::string& name) {
  return (fs::path(IOS_TEST_DATA_DIR) / name).string();
}

// First integer captured by `pattern` in `text`, or -1.
long long Number(const std::string& text, const std::string& pattern) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex(pattern))) return -1;
  return std::stoll(match[1].str());
}

class CoordinatorCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ios_coordinator_cli.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `binary args` in the test's directory; stdout and stderr apart.
  CliResult Run(const std::string& binary, const std::string& args) const {
    CliResult result = ::ios::testing::RunBinary(dir_, binary, args);
    EXPECT_NE(result.exit_code, 124) << "timed out: " << binary << " " << args;
    return result;
  }
  // On the simulated V100 unless the test names a device: deterministic and
  // fast, unlike the default (this machine's CPU).
  CliResult Coordinator(const std::string& args) const {
    const bool names_device = args.find("--device") != std::string::npos;
    return Run(kCoordinator, names_device ? args : args + " --device sim:v100");
  }

  fs::path Path(const std::string& name) const { return dir_ / name; }
  std::string Quoted(const std::string& name) const { return ShellQuote(Path(name).string()); }

  fs::path dir_;
};

// ------------------------------------------------------------------ search

TEST_F(CoordinatorCliTest, SearchOfSqueezenetReportsSimulatedSequentialGreedyAndIosLatencies) {
  const CliResult r = Coordinator("--model squeezenet --db profile.db -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("simulated"));
  for (const char* schedule : {"sequential", "greedy", "ios"}) {
    EXPECT_TRUE(std::regex_search(
        r.out, std::regex(std::string("(^|\n)") + schedule + " +[0-9]+\\.[0-9]+ ms")))
        << "no latency line for " << schedule << " in:\n"
        << r.out;
  }
  EXPECT_THAT(r.out, Not(HasSubstr("nothing measured")));
  EXPECT_GT(Number(r.out, "measured ([0-9]+), reused from DB"), 0) << r.out;
  EXPECT_TRUE(fs::exists(Path("profile.db")));
  EXPECT_THAT(r.err, Not(HasSubstr("error")));
}

TEST_F(CoordinatorCliTest, RerunOnTheSameDbMeasuresNothing) {
  const CliResult first = Coordinator("--model squeezenet --db profile.db -q");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const CliResult second = Coordinator("--model squeezenet --db profile.db -q");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("measured 0"));
  EXPECT_THAT(second.out, HasSubstr("nothing measured"));
  // Same answer from the DB as from the measurements.
  const std::string latency = "(^|\n)ios +([0-9]+\\.[0-9]+) ms";
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(first.out, a, std::regex(latency)));
  ASSERT_TRUE(std::regex_search(second.out, b, std::regex(latency)));
  EXPECT_EQ(a[2].str(), b[2].str());
}

TEST_F(CoordinatorCliTest, SearchOfAnIosJsonModelFileWorks) {
  const CliResult r = Coordinator("--model " + ShellQuote(DataFile("tiny_model.json")) +
                                  " --db profile.db -q --out tiny_schedule.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tiny"));
  const json doc = json::parse(ReadFile(Path("tiny_schedule.json")));
  EXPECT_EQ(doc.at("model"), "tiny");
}

// Issue 11: an ONNX model is searched like any other; and blocks found
// automatically on a zoo model (--blocks auto) give a schedule no slower
// than the zoo's hand-made blocks (sim:v100 is deterministic).
TEST_F(CoordinatorCliTest, OnnxModelsAndAutomaticBlocksAreSearched) {
  const CliResult onnx = Coordinator("--model " + ShellQuote(DataFile("onnx/squeezenet1_1.onnx")) +
                                     " --db profile.db -q");
  ASSERT_EQ(onnx.exit_code, 0) << onnx.err;
  EXPECT_THAT(onnx.out, HasSubstr("model squeezenet1_1, 30 operators in 2 blocks"));
  const std::string latency = "(^|\n)ios +([0-9]+\\.[0-9]+) ms";
  const auto ios_ms = [&](const CliResult& r) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.out, m, std::regex(latency))) << r.out;
    return m.size() > 2 ? std::stod(m[2].str()) : -1.0;
  };
  const CliResult hand = Coordinator("--model squeezenet --db profile.db -q");
  const CliResult found = Coordinator("--model squeezenet --blocks auto --db profile.db -q");
  ASSERT_EQ(hand.exit_code, 0) << hand.err;
  ASSERT_EQ(found.exit_code, 0) << found.err;
  EXPECT_THAT(found.out, HasSubstr("50 operators in 3 blocks"));
  EXPECT_LE(ios_ms(found), ios_ms(hand));
  const CliResult bad = Coordinator("--model squeezenet --blocks some --db profile.db -q");
  EXPECT_EQ(bad.exit_code, 2);
}

TEST_F(CoordinatorCliTest, ParallelStrategyScheduleHasNoMergeStage) {
  const CliResult r =
      Coordinator("--model squeezenet --strategy parallel --db profile.db -q --out s.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(ReadFile(Path("s.json")));
  EXPECT_EQ(doc.at("settings").at("strategy"), "parallel");
  int stages = 0;
  for (const json& block : doc.at("blocks")) {
    for (const json& stage : block.at("stages")) {
      EXPECT_EQ(stage.at("strategy"), "parallel");
      ++stages;
    }
  }
  EXPECT_GT(stages, 0);
}

// ---------------------------------------------------- schedule file, evaluate

TEST_F(CoordinatorCliTest, OutWritesAScheduleThatEvaluateMeasuresOnlyWhereTheDbLacksIt) {
  const CliResult search = Coordinator("--model squeezenet --db profile.db -q --out s.json");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  EXPECT_THAT(search.out, HasSubstr("schedule written to s.json"));
  const json doc = json::parse(ReadFile(Path("s.json")));
  EXPECT_EQ(doc.at("format"), "ios-farm-schedule");
  EXPECT_EQ(doc.at("batch_size"), 1);
  EXPECT_TRUE(doc.at("device").at("simulated").get<bool>());
  // The DB's search record holds the same schedule, without the file's
  // indentation (one CSV line: the indented text would span hundreds).
  const CliResult searches = Run(kIosDb, "--db profile.db --format json searches");
  ASSERT_EQ(searches.exit_code, 0) << searches.err;
  EXPECT_EQ(json::parse(searches.out).at(0).at("schedule"), doc);
  const CliResult csv = Run(kIosDb, "--db profile.db --format csv searches");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 2) << csv.out.substr(0, 400);

  // Batch 4 is new to the DB: every distinct stage of the schedule is measured.
  const CliResult batch4 = Coordinator("--evaluate s.json --batch 4 --db profile.db -q");
  ASSERT_EQ(batch4.exit_code, 0) << batch4.err;
  const long long distinct = Number(batch4.out, "([0-9]+) distinct stages");
  EXPECT_GT(distinct, 0) << batch4.out;
  EXPECT_EQ(Number(batch4.out, "stages measured ([0-9]+)"), distinct) << batch4.out;
  EXPECT_THAT(batch4.out, HasSubstr("simulated"));

  // Now both batch 4 and batch 1 (from the search) are in the DB.
  const CliResult again = Coordinator("--evaluate s.json --batch 4 --db profile.db -q");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Number(again.out, "stages measured ([0-9]+)"), 0) << again.out;
  EXPECT_EQ(Number(again.out, "reused from DB ([0-9]+)"), distinct) << again.out;

  const CliResult batch1 = Coordinator("--evaluate s.json --batch 1 --db profile.db -q");
  ASSERT_EQ(batch1.exit_code, 0) << batch1.err;
  EXPECT_EQ(Number(batch1.out, "stages measured ([0-9]+)"), 0) << batch1.out;
  // The priced latency at batch 1 is the searched one.
  std::smatch searched, priced;
  ASSERT_TRUE(
      std::regex_search(search.out, searched, std::regex("(^|\n)ios +([0-9]+\\.[0-9]+) ms")));
  ASSERT_TRUE(std::regex_search(batch1.out, priced, std::regex("batch 1: ([0-9]+\\.[0-9]+) ms")));
  EXPECT_EQ(searched[2].str(), priced[1].str());
}

TEST_F(CoordinatorCliTest, OutDashWritesTheScheduleToStdout) {
  const CliResult r = Coordinator("--model squeezenet --db profile.db -q --out -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);  // nothing but the JSON on stdout
  EXPECT_EQ(doc.at("format"), "ios-farm-schedule");
}

TEST_F(CoordinatorCliTest, NoBaselinesLeavesTheBaselineRowsOut) {
  const CliResult r = Coordinator("--model squeezenet --db profile.db -q --no-baselines");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::regex_search(r.out, std::regex("(^|\n)(sequential|greedy) ")))
      << r.out;  // was "sequential failed" / "greedy failed"
  EXPECT_THAT(r.out, Not(HasSubstr("failed\n")));
  EXPECT_TRUE(std::regex_search(r.out, std::regex("(^|\n)ios +[0-9]+\\.[0-9]+ ms"))) << r.out;
}

// Before: --out to a path that cannot be written failed after the whole
// search (exit 1), leaving a DB behind.
TEST_F(CoordinatorCliTest, OutToAPathThatCannotBeWrittenFailsBeforeAnyWork) {
  fs::create_directory(Path("a_directory"));
  for (const std::string out : {"no_such_dir/s.json", "a_directory"}) {
    const CliResult r = Coordinator("--model squeezenet --db profile.db -q --out " + out);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("--out " + out + ": cannot write the schedule there"));
    EXPECT_EQ(NonEmptyLines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(fs::exists(Path("profile.db"))) << "nothing may happen before the check";
  }
  EXPECT_FALSE(fs::exists(Path("no_such_dir")));
}

TEST_F(CoordinatorCliTest, OutCheckLeavesNoFileWhenTheSearchFails) {
  const CliResult r = Coordinator("--model no_such_model --db profile.db -q --out s.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(fs::exists(Path("s.json")));
}

// Before: started_at held the time the search ended.
TEST_F(CoordinatorCliTest, SearchesRecordWhenTheSearchStarted) {
  // 21 stages measured one after another at 70 ms each: the measurements
  // span more than a second, so the end is a later second than the first
  // measurement. Times are whole UTC seconds from one clock.
  const CliResult r = Coordinator("--model " + ShellQuote(DataFile("tiny_model.json")) +
                                  " --db profile.db -q --local-workers 1 --sim-delay-ms 70");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CliResult searches = Run(kIosDb, "--db profile.db --format json searches");
  const CliResult measurements = Run(kIosDb, "--db profile.db --format json measurements");
  ASSERT_EQ(searches.exit_code, 0) << searches.err;
  ASSERT_EQ(measurements.exit_code, 0) << measurements.err;
  const json search = json::parse(searches.out).at(0);
  std::string first_measured = "9999", last_measured;
  for (const json& row : json::parse(measurements.out)) {
    first_measured = std::min(first_measured, row.at("measured_at").get<std::string>());
    last_measured = std::max(last_measured, row.at("measured_at").get<std::string>());
  }
  ASSERT_LT(first_measured, last_measured) << "precondition: measuring took over a second";
  EXPECT_LE(search.at("started_at").get<std::string>(), first_measured);
}

// Before: --evaluate read any path to the end (/dev/zero without bound; a
// FIFO blocked) and CLI11's check answered a directory with "File is
// actually a directory". Now the model loader's checks (ReadJsonInputFile)
// refuse them before reading, in one line naming the option and the file.
TEST_F(CoordinatorCliTest, EvaluateRefusesWhatIsNotARegularFileInOneLine) {
  fs::create_directory(Path("a_directory"));
  ASSERT_EQ(mkfifo(Path("a_fifo").c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Path("a_directory").string(),
       "not a regular file (a directory); a schedule file must be a regular file"},
      {Path("a_fifo").string(),
       "not a regular file (a FIFO); a schedule file must be a regular file"},
      {"/dev/zero",
       "not a regular file (a character device); a schedule file must be a regular file"},
      {Path("absent.json").string(), "cannot open file: not found"},
  };
  for (const auto& [file, reason] : cases) {
    // A bound of 30 s, not 120: before the fix the FIFO blocked for good.
    const CliResult r = ::ios::testing::RunBinary(
        dir_, kCoordinator,
        "--evaluate " + ShellQuote(file) + " --db profile.db -q --device sim:v100", 30);
    EXPECT_EQ(r.exit_code, 1) << file << ": " << r.err;
    EXPECT_EQ(r.err, "ios-coordinator: error: --evaluate " + file + ": " + reason + "\n") << file;
  }
}

// Before: --evaluate s.json --out ev.json returned 0 and wrote nothing, and
// --model or the search options were ignored without a word.
TEST_F(CoordinatorCliTest, EvaluateRefusesTheOptionsItDoesNotUse) {
  const CliResult search = Coordinator("--model " + ShellQuote(DataFile("tiny_model.json")) +
                                       " --db profile.db -q --out s.json");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--out ev.json", "--out"},
      {"--out /nonexistent/x.json", "--out"},
      {"--model squeezenet", "--model"},
      {"-r 2", "-r"},
      {"-s 2", "-s"},
      {"--strategy merge", "--strategy"},
      {"--no-pruning", "--no-pruning"},
      {"--max-dp-states 100", "--max-dp-states"},
      {"--max-search-stages 100", "--max-search-stages"},
      {"--no-baselines", "--no-baselines"},
      {"--measure all", "--measure"},
      {"--sub-stage-bounds", "--sub-stage-bounds"},
      {"--bound-margin 5", "--bound-margin"},
  };
  for (const auto& [option, name] : cases) {
    const CliResult r = Coordinator("--evaluate s.json --db profile.db -q " + option);
    EXPECT_EQ(r.exit_code, 2) << option << ": " << r.err;
    EXPECT_EQ(r.err, "ios-coordinator: error: " + name + " is not used with --evaluate\n");
    EXPECT_EQ(r.out, "");
  }
  EXPECT_FALSE(fs::exists(Path("ev.json")));
  // What --evaluate does use is still accepted.
  const CliResult ok = Coordinator("--evaluate s.json --db profile.db -q --batch 2 --repeat 3");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// Before: --bind '' was taken for no --bind at all, while --device '' was
// refused.
TEST_F(CoordinatorCliTest, AnEmptyBindIsRefusedLikeAnEmptyDevice) {
  const CliResult r = Coordinator("--model squeezenet --db profile.db -q --bind ''");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--bind is empty"));
  EXPECT_EQ(NonEmptyLines(r.err).size(), 1u) << r.err;
  EXPECT_FALSE(fs::exists(Path("profile.db")));
}

// Before: "SQLite error in sqlite3_open_v2 at .../db/sqlite_util.cc:37 ...
// (code 14)".
TEST_F(CoordinatorCliTest, ADirectoryGivenAsTheDbIsNamedAsSuch) {
  fs::create_directory(Path("a_directory"));
  const CliResult r = Coordinator("--model squeezenet -q --db a_directory");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err,
            "ios-coordinator: error: a_directory: is a directory, not a profiling DB file\n");
}

// ------------------------------------------------------------------ errors

struct ErrorCase {
  std::string label, args, fragment;
};
void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.label; }

// Scripts tell a bad command line (2) from a failure while working (1).
TEST_F(CoordinatorCliTest, ABadCommandLineExitsWithTwo) {
  for (const char* args :
       {"--model squeezenet -r 0 --db profile.db", "--bogus-option",
        "--model squeezenet --strategy bogus --db profile.db", "--db profile.db"}) {
    EXPECT_EQ(Coordinator(args).exit_code, 2) << args;
  }
  EXPECT_EQ(Coordinator("--help").exit_code, 0);
  EXPECT_EQ(Coordinator("--model no_such_model --db profile.db").exit_code, 1);
}

class CoordinatorCliErrorTest : public CoordinatorCliTest,
                                public ::testing::WithParamInterface<ErrorCase> {};

TEST_P(CoordinatorCliErrorTest, FailsWithOneClearMessageAndNoCrash) {
  const ErrorCase& c = GetParam();
  WriteFile(Path("junk.db"), "this is not an SQLite database\n");
  const CliResult r = Coordinator(c.args);
  EXPECT_NE(r.exit_code, 0) << c.args;
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  EXPECT_THAT(r.err, HasSubstr(c.fragment));
  // One message (CLI11 adds a "Run with --help" hint line), no crash.
  const std::vector<std::string> lines = NonEmptyLines(r.err);
  EXPECT_GE(lines.size(), 1u);
  EXPECT_LE(lines.size(), 2u) << r.err;
  for (const char* crash : {"terminate called", "what():", "Aborted", "Segmentation", "core dumped",
                            "stack trace", "#0 "}) {
    EXPECT_THAT(r.err, Not(HasSubstr(crash)));
  }
  EXPECT_THAT(r.out, Not(HasSubstr("IOS schedule")));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CoordinatorCliErrorTest,
    ::testing::Values(
        ErrorCase{"unknown_model", "--model no_such_model --db profile.db",
                  "unknown model 'no_such_model'"},
        ErrorCase{"nonexistent_json_file", "--model missing_model.json --db profile.db",
                  "no such file"},
        ErrorCase{"malformed_json",
                  "--model " + ShellQuote(DataFile("malformed_model.json")) + " --db profile.db",
                  "not valid JSON"},
        ErrorCase{
            "invalid_node",
            "--model " + ShellQuote(DataFile("unknown_producer_model.json")) + " --db profile.db",
            "unknown producer 'nonexistent_node'"},
        ErrorCase{"r_zero", "--model squeezenet -r 0 --db profile.db", "-r: Value 0 not in range"},
        ErrorCase{"s_zero", "--model squeezenet -s 0 --db profile.db", "-s: Value 0 not in range"},
        ErrorCase{"batch_zero", "--model squeezenet --batch 0 --db profile.db",
                  "--batch: Value 0 not in range"},
        ErrorCase{"bogus_strategy", "--model squeezenet --strategy bogus --db profile.db",
                  "--strategy: bogus not in"},
        ErrorCase{"missing_model", "--db profile.db", "--model is required"},
        ErrorCase{"evaluate_a_model_file",
                  "--evaluate " + ShellQuote(DataFile("tiny_model.json")) + " --db profile.db",
                  "no stages to evaluate"},
        ErrorCase{"evaluate_a_missing_file", "--evaluate absent_schedule.json --db profile.db",
                  "absent_schedule.json"},
        ErrorCase{"unknown_device", "--model squeezenet --device sim:nope --db profile.db",
                  "unknown simulated GPU 'nope'"},
        ErrorCase{"db_is_not_a_db", "--model squeezenet --db junk.db",
                  "is not an ios-farm profiling DB"}),
    [](const auto& param_info) { return param_info.param.label; });

TEST(CoordinatorCliDataTest, TestDataFilesArePresent) {
  for (const char* name :
       {"tiny_model.json", "malformed_model.json", "unknown_producer_model.json"}) {
    EXPECT_TRUE(fs::exists(DataFile(name))) << DataFile(name);
  }
}

// --------------------------------------------------------- listing and help

TEST_F(CoordinatorCliTest, ListModelsNamesEveryZooModel) {
  const CliResult r = Coordinator("--list-models");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* model : {"inception_v3", "squeezenet", "nasnet", "randwire", "randwire_cifar10",
                            "randwire_cifar100", "darts_cell", "darts_imagenet"}) {
    EXPECT_TRUE(std::regex_search(r.out, std::regex(std::string("(^|\n)") + model + " ")))
        << model << " missing from:\n"
        << r.out;
  }
  EXPECT_EQ(NonEmptyLines(r.out).size(), 8u) << r.out;
  EXPECT_FALSE(fs::exists(Path("ios-farm.db"))) << "listing models must not create a DB";
}

TEST_F(CoordinatorCliTest, HelpExitsZeroAndDescribesEveryOption) {
  const CliResult r = Coordinator("--help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* option :
       {"--model", "--batch", "--device", "--strategy", "--db", "--out", "--evaluate", "-r", "-s",
        "--devices", "--multi-gpu", "--window", "--streams", "--link"}) {
    EXPECT_THAT(r.out, HasSubstr(option));
  }
}

// ------------------------------------------------------------ --devices (HIOS)

TEST_F(CoordinatorCliTest, DevicesSchedulesOverSeveralDevicesAndWritesTheMultiDeviceFile) {
  // SqueezeNet is fast to plan (also under the sanitizers); --force-devices
  // writes HIOS's own schedule although one device's is faster there.
  const CliResult r = Coordinator(
      "--model squeezenet --devices sim:v100x4 --multi-gpu mr --force-devices --db p.db -q -o "
      "m.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("HIOS-MR on 4 devices, link nvlink"));
  EXPECT_THAT(r.out, HasSubstr("speed-up over one device's schedule"));
  EXPECT_THAT(r.out, HasSubstr("multi-device schedule written to m.json"));
  const json file = json::parse(ReadFile(Path("m.json")));
  EXPECT_EQ(file["format"], "ios-farm-multi/v1");
  EXPECT_EQ(file["devices"].size(), 4u);
  EXPECT_EQ(file["mapper"], "mr");
  EXPECT_TRUE(file["simulated"].get<bool>());
  EXPECT_FALSE(file["transfers"].empty()) << "HIOS's schedule spreads SqueezeNet's branches";
  // The device loads list every operator.
  long long operators = 0;
  for (long long d = 0; d < 4; ++d) {
    operators +=
        Number(r.out, "\n +" + std::to_string(d) + " +([0-9]+) +[0-9]+ +[0-9]+ +[0-9.]+\n");
  }
  EXPECT_EQ(operators, static_cast<long long>(file["device_of"].size()))
      << r.out;  // operators only
}

TEST_F(CoordinatorCliTest, DevicesWhereHiosLosesWritesTheOneDeviceSchedule) {
  // SqueezeNet's fire modules are too small for copies between devices.
  const CliResult r = Coordinator("--model squeezenet --devices sim:v100x2 --db p.db -q -o m.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("written: the one-device schedule on device 0"));
  const json file = json::parse(ReadFile(Path("m.json")));
  EXPECT_TRUE(file["transfers"].empty());
  EXPECT_TRUE(file["stages"][1].empty());
}

TEST_F(CoordinatorCliTest, DevicesRefusesMixedDevicesADisagreeingDeviceAndAnUnknownLink) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"--devices 'sim:v100;sim:k80'", "differs from 'sim:v100'"},
      {"--devices sim:v100x2 --device sim:k80",
       "--device sim:k80 and --devices sim:v100x2 disagree"},
      {"--devices sim:v100x2 --link fast", "expected nvlink, pcie, host, or GBPS:US"},
      {"--devices sim:v100x2 --multi-gpu best", "--multi-gpu"},
  };
  for (const auto& c : cases) {
    const CliResult r = Coordinator(std::string("--model squeezenet --db p.db -q ") + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
  }
  EXPECT_FALSE(fs::exists(Path("p.db"))) << "a usage error must not open the DB";
}

// ------------------------------------------------------------------- ios-db

TEST_F(CoordinatorCliTest, IosDbListsEverySearchTheCoordinatorRan) {
  ASSERT_EQ(Coordinator("--model squeezenet --db profile.db -q").exit_code, 0);
  ASSERT_EQ(Coordinator("--model squeezenet --batch 2 --db profile.db -q").exit_code, 0);
  const CliResult r = Run(kIosDb, "--db profile.db searches");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int rows = 0;
  for (const std::string& line : NonEmptyLines(r.out))
    rows += line.find("squeezenet") != std::string::npos;
  EXPECT_EQ(rows, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("sim:v100"));
  EXPECT_THAT(r.out, HasSubstr("simulated"));
}

}  // namespace
}  // namespace ios
