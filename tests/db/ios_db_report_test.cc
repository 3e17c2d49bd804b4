// `ios-db report`, through the built binary: a search recorded with its
// report input (schema 5) gives the page the search itself would have
// written; one recorded before (tests/data/profile_v4.db, upgraded) gives a
// partial page that says what is missing; and every way of naming a search
// or an output that cannot be is one line on stderr, with nothing written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/ios_json.h"
#include "db/profile_store.h"
#include "report/report.h"
#include "tests/db/profile_store_testing.h"
#include "tests/testing/binaries.h"
#include "tests/testing/paths.h"
#include "tests/testing/process.h"

namespace ios::db {
namespace {

namespace fs = std::filesystem;
using ::ios::testing::CliResult;
using ::ios::testing::kIosDb;
using ::ios::testing::ReadFile;
using ::ios::testing::ShellQuote;
using ::ios::testing::TempDir;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::kToolV100;
using ::testing::Not;
using ::testing::StartsWith;

// The page's data block (what its script draws from).
json PageData(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"data\">";
  const size_t begin = page.find(open);
  if (begin == std::string::npos) return nullptr;
  const size_t end = page.find("</script>", begin);
  const std::string text = page.substr(begin + open.size(), end - begin - open.size());
  return json::accept(text) ? json::parse(text) : json(nullptr);
}

// A report of the tiny model as a search would fill it: the returned
// schedule, a baseline with an end-to-end figure, the search's facts.
report::ReportInput TinyReport() {
  report::ReportInput input;
  input.tool = "ios-coordinator search";
  input.version = "0.0.test";
  input.generated_at = "2026-11-27T10:00:00Z";
  input.model = "tiny";
  input.device = kToolV100;
  input.graph = LoadIosJson(::ios::testing::TestData("tiny_model.json")).graph;
  for (const char* name : {"ios", "sequential"}) {
    report::ScheduleRow& schedule = input.schedules.emplace_back();
    schedule.name = name;
    schedule.returned = schedule.name == "ios";
    double total = 0;
    for (size_t b = 0; b < input.graph.blocks.size(); ++b) {
      for (NodeId v : input.graph.blocks[b].Operators()) {
        report::StageRow& stage = schedule.stages.emplace_back();
        stage.groups = {{v}};
        stage.block = static_cast<int>(b);
        stage.latency_ms = 0.25 + 0.125 * v + (schedule.returned ? 0 : 0.5);
        stage.source = report::Source::kStored;
        stage.measured_at = 1795800000 + v;
        total += stage.latency_ms;
      }
    }
    schedule.predicted_ms = total;
  }
  report::EndToEnd measured;
  measured.median_ms = 3.5;
  measured.samples = 10;
  measured.how = "verification";
  input.schedules[1].measured = measured;
  report::SearchFacts facts;
  facts.parts.push_back({0, 0, 0, 5, 2, "exact", false, 12, 30, 8, 9, 9, 0, 0, 0});
  facts.enumerate_s = 0.5;
  facts.measure_mode = "all";
  input.search = facts;
  return input;
}

// What ios-coordinator stores as the schedule JSON: here only the graph,
// the one member a search with a stored report is drawn from.
std::string ScheduleJsonOf(const Graph& graph) {
  return json{{"format", "ios-farm-schedule"}, {"graph", json::parse(ToIosJson(graph))}}.dump();
}

class IosDbReportTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return (dir_.path() / name).string(); }
  CliResult Run(const std::vector<std::string>& args) const {
    std::string quoted;
    for (const std::string& arg : args) quoted += " " + ShellQuote(arg);
    return ::ios::testing::RunBinary(dir_.path(), kIosDb, quoted);
  }
  // A DB holding `input` as search `model`'s recorded report; returns its id.
  int64_t Record(const std::string& db, const report::ReportInput& input, int batch = 1,
                 const std::string& report_json = "") {
    auto store = ProfileStore::Open(db);
    store->UpsertDevice(kToolV100);
    SearchRecord search;
    search.model = input.model;
    search.device_fingerprint = kToolV100.fingerprint;
    search.batch_size = batch;
    search.settings_json = R"({"returned":"ios"})";
    search.schedule_json = ScheduleJsonOf(input.graph);
    search.latency_ms = input.schedules.front().predicted_ms;
    search.report_json =
        report_json.empty() ? report::ToJson(input, /*with_graph=*/false) : report_json;
    return store->RecordSearch(search);
  }

  TempDir dir_{"ios_db_report_test"};
};

TEST_F(IosDbReportTest, AStoredSearchGivesThePageItsSearchWouldHaveWritten) {
  const report::ReportInput input = TinyReport();
  const int64_t id = Record(Path("p.db"), input);
  const CliResult result =
      Run({"--db", Path("p.db"), "report", "--search", std::to_string(id), "--output", "r.html"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("search " + std::to_string(id)));
  EXPECT_THAT(result.out, HasSubstr("r.html"));
  const std::string page = ReadFile(Path("r.html"));
  EXPECT_THAT(page, HasSubstr("<meta http-equiv=\"Content-Security-Policy\""));
  EXPECT_EQ(page, report::RenderHtml(input)) << "the stored input, the graph beside it";
  EXPECT_THAT(page, Not(HasSubstr("recorded before schema 5")));
  const json data = PageData(page);
  ASSERT_TRUE(data.is_object()) << "no data block in the page";
  ASSERT_EQ(data["schedules"].size(), input.schedules.size());
  for (size_t s = 0; s < input.schedules.size(); ++s) {
    EXPECT_EQ(data["schedules"][s]["name"], input.schedules[s].name);
    EXPECT_EQ(data["schedules"][s]["stages"].size(), input.schedules[s].stages.size());
    EXPECT_DOUBLE_EQ(data["schedules"][s]["predicted"].get<double>(),
                     input.schedules[s].predicted_ms);
  }
}

TEST_F(IosDbReportTest, AModelNamesItsLatestSearchNarrowedByBatchAndDevice) {
  report::ReportInput input = TinyReport();
  input.title = "first";
  Record(Path("p.db"), input);
  input.title = "second";
  const int64_t second = Record(Path("p.db"), input);
  input.title = "at batch 8";
  const int64_t at_batch_8 = Record(Path("p.db"), input, 8);
  // The ids `report --search` takes, as `searches` lists them.
  const CliResult listed = Run({"--db", Path("p.db"), "--format", "json", "searches"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  ASSERT_TRUE(json::accept(listed.out)) << listed.out;
  const json rows = json::parse(listed.out);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1]["id"], second);
  EXPECT_EQ(rows[2]["id"], at_batch_8);
  EXPECT_EQ(rows[2]["report"], true);

  const CliResult latest = Run({"--db", Path("p.db"), "report", "--model", "tiny", "-o", "a.html"});
  ASSERT_EQ(latest.exit_code, 0) << latest.err;
  EXPECT_THAT(ReadFile(Path("a.html")), HasSubstr("<title>at batch 8</title>"));
  EXPECT_THAT(latest.out, HasSubstr("search " + std::to_string(at_batch_8)));
  for (const std::string& device : {kToolV100.name, kToolV100.fingerprint}) {
    const CliResult narrowed = Run({"--db", Path("p.db"), "report", "--model", "tiny", "--batch",
                                    "1", "--device", device, "-o", "b.html"});
    ASSERT_EQ(narrowed.exit_code, 0) << narrowed.err;
    EXPECT_THAT(ReadFile(Path("b.html")), HasSubstr("<title>second</title>")) << device;
    EXPECT_THAT(narrowed.out, HasSubstr("search " + std::to_string(second)));
  }
}

// profile_v4.db holds two searches of the tiny model (sim:v100, then
// cpu,threads=1, whose verification returned "alternative 1") and the
// end-to-end figures their verifications stored.
TEST_F(IosDbReportTest, ASearchRecordedBeforeSchema5GivesAPartialPageThatSaysWhatIsMissing) {
  fs::copy_file(::ios::testing::TestData("profile_v4.db"), Path("v4.db"));
  std::vector<SearchRecord> searches = ProfileStore::Open(Path("v4.db"))->Searches();  // upgrades
  ASSERT_EQ(searches.size(), 2u);
  for (const SearchRecord& search : searches) {
    const std::string out = "s" + std::to_string(search.id) + ".html";
    const CliResult result =
        Run({"--db", Path("v4.db"), "report", "--search", std::to_string(search.id), "-o", out});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_THAT(result.out, HasSubstr("partial"));
    const std::string page = ReadFile(Path(out));
    EXPECT_THAT(page, HasSubstr("recorded before schema 5"));
    EXPECT_THAT(page, HasSubstr("sequential and greedy schedules&#39; stages (their totals: "));
    const json schedule = json::parse(search.schedule_json);
    const json settings = json::parse(search.settings_json);
    const json data = PageData(page);
    ASSERT_TRUE(data.is_object()) << "no data block in the page";
    ASSERT_EQ(data["schedules"].size(), 1u);
    const json& returned = data["schedules"][0];
    EXPECT_EQ(returned["name"], settings["returned"]);
    EXPECT_EQ(returned["returned"], true);
    EXPECT_DOUBLE_EQ(returned["predicted"].get<double>(), search.latency_ms);
    ASSERT_EQ(returned["stages"].size(), schedule["stage_count"].get<size_t>());
    for (const json& stage : returned["stages"]) {
      // [strategy, block, latency, source, measured_at, key id, error]
      EXPECT_EQ(stage[3], "stored");
      EXPECT_GT(stage[4].get<int64_t>(), 0) << "its measurement's time, looked up by key";
      EXPECT_FALSE(stage[5].get<std::string>().empty());
    }
    // The verification's figure of the returned schedule, from the DB.
    ASSERT_TRUE(returned["measured"].is_object()) << search.id;
    EXPECT_EQ(returned["measured"]["from_db"], true);
    EXPECT_GT(returned["measured"]["median"].get<double>(), 0);
  }
}

TEST_F(IosDbReportTest, ASearchTheDbDoesNotHoldIsOneLineAndExitCode2) {
  Record(Path("p.db"), TinyReport());
  const CliResult id = Run({"--db", Path("p.db"), "report", "--search", "99", "-o", "r.html"});
  EXPECT_EQ(id.exit_code, 2);
  EXPECT_EQ(id.err, "ios-db: no search with id 99 in " + Path("p.db") + " (see ios-db searches)\n");
  const CliResult model = Run({"--db", Path("p.db"), "report", "--model", "tiny", "--batch", "4",
                               "--device", "sim:k80", "-o", "r.html"});
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_EQ(model.err, "ios-db: no search of model 'tiny' at batch 4 on device 'sim:k80' in " +
                           Path("p.db") + " (see ios-db searches)\n");
  EXPECT_FALSE(fs::exists(Path("r.html")));
  const CliResult neither = Run({"--db", Path("p.db"), "report", "-o", "r.html"});
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_THAT(neither.err, HasSubstr("--search ID or --model M"));
}

TEST_F(IosDbReportTest, AnOutputThatCannotBeWrittenIsRefusedBeforeTheDbIsRead) {
  fs::create_directory(Path("folder"));
  // No DB at all: the output is checked first.
  const CliResult folder =
      Run({"--db", Path("none.db"), "report", "--search", "1", "-o", Path("folder")});
  EXPECT_EQ(folder.exit_code, 2);
  EXPECT_EQ(folder.err, "ios-db: report --output " + Path("folder") +
                            ": cannot write the report there: it is a directory\n");
  const std::string missing = Path("no/such/dir/r.html");
  const CliResult absent = Run({"--db", Path("none.db"), "report", "--search", "1", "-o", missing});
  EXPECT_EQ(absent.exit_code, 2);
  EXPECT_THAT(absent.err, StartsWith("ios-db: report --output " + missing + ": cannot write"));
  EXPECT_EQ(std::count(absent.err.begin(), absent.err.end(), '\n'), 1);
}

TEST_F(IosDbReportTest, AStoredReportThatDoesNotParseNamesItsSearchAndLeavesTheOutputAlone) {
  // A report of the right format whose schedules are not a list.
  json stored = json::parse(report::ToJson(TinyReport(), /*with_graph=*/false));
  stored["schedules"] = 3;
  const int64_t id = Record(Path("p.db"), TinyReport(), 1, stored.dump());
  ASSERT_TRUE(::ios::testing::WriteFile(Path("r.html"), "kept"));
  const CliResult result =
      Run({"--db", Path("p.db"), "report", "--search", std::to_string(id), "-o", "r.html"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              StartsWith("ios-db: search " + std::to_string(id) + "'s stored report: schedules"));
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1);
  EXPECT_EQ(ReadFile(Path("r.html")), "kept");
}

TEST_F(IosDbReportTest, ADamagedReportBlobNamesItsSearch) {
  const int64_t id = Record(Path("p.db"), TinyReport());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(Path("p.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE searches SET report = X'02FFFF00'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const CliResult result =
      Run({"--db", Path("p.db"), "report", "--search", std::to_string(id), "-o", "r.html"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, StartsWith("ios-db: search " + std::to_string(id) +
                                     ": its stored report: long text: a packed long text is "
                                     "damaged"));
  EXPECT_FALSE(fs::exists(Path("r.html")));
}

}  // namespace
}  // namespace ios::db
