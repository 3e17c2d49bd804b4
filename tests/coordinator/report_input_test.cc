// The HTML report's input as a search fills it (coordinator/report_input.h),
// on the simulated V100 so that every figure is deterministic; and the text
// report's count of lazily skipped stages.
#include "coordinator/report_input.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/zoo.h"
#include "coordinator/multi_device.h"
#include "coordinator/report.h"
#include "db/profile_store.h"
#include "report/report.h"
#include "tests/coordinator/search_testing.h"

namespace ios::coordinator {
namespace {

using testing::CountingMeasurer;
using testing::DefaultOptions;

SearchOptions LazyOptions() {
  SearchOptions options = DefaultOptions();
  options.measure = MeasureMode::kLazy;  // so that some stages are skipped
  return options;
}

// How many stages of `stages` hold each operator.
std::vector<int> Coverage(const Graph& g, const std::vector<report::StageRow>& stages) {
  std::vector<int> seen(g.nodes.size(), 0);
  for (const report::StageRow& s : stages) {
    for (const auto& group : s.groups) {
      for (NodeId v : group) ++seen.at(static_cast<size_t>(v));
    }
  }
  return seen;
}

void ExpectEveryOperatorOnce(const Graph& g, const std::vector<report::StageRow>& stages,
                             const std::string& what) {
  const std::vector<int> seen = Coverage(g, stages);
  EXPECT_EQ(seen[0], 0) << what;
  for (size_t v = 1; v < seen.size(); ++v) EXPECT_EQ(seen[v], 1) << what << ": node " << v;
}

class ReportOfSearchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    graph_ = new Graph(BuildZooModel("squeezenet"));
    store_ = db::ProfileStore::Open(":memory:").release();
    CountingMeasurer measurer;
    outcome_ =
        new SearchOutcome(RunSearch(*graph_, "squeezenet", LazyOptions(), *store_, measurer));
  }
  static void TearDownTestSuite() {
    delete outcome_;
    delete store_;
    delete graph_;
  }
  static Graph* graph_;
  static db::ProfileStore* store_;
  static SearchOutcome* outcome_;
};
Graph* ReportOfSearchTest::graph_ = nullptr;
db::ProfileStore* ReportOfSearchTest::store_ = nullptr;
SearchOutcome* ReportOfSearchTest::outcome_ = nullptr;

TEST_F(ReportOfSearchTest, HasOneScheduleForTheReturnedAndEachBaselineEachCoveringEveryOperator) {
  const report::ReportInput in = ReportOfSearch(*graph_, *outcome_, outcome_->device, nullptr);
  ASSERT_FALSE(in.schedules.empty());
  EXPECT_TRUE(in.schedules[0].returned);
  EXPECT_EQ(in.schedules[0].name, outcome_->ReturnedName());
  std::set<std::string> names;
  int returned = 0;
  for (const report::ScheduleRow& s : in.schedules) {
    EXPECT_TRUE(names.insert(s.name).second) << "twice: " << s.name;
    returned += s.returned ? 1 : 0;
    ExpectEveryOperatorOnce(*graph_, s.stages, s.name);
    EXPECT_TRUE(std::isfinite(s.predicted_ms)) << s.name;
  }
  EXPECT_EQ(returned, 1);
  for (const char* name : {"ios", "sequential", "greedy"}) EXPECT_EQ(names.count(name), 1u) << name;
  ASSERT_TRUE(outcome_->verification.ran());
  for (const VerifiedSchedule& c : outcome_->verification.candidates) {
    EXPECT_EQ(names.count(c.name), 1u) << c.name;
  }
  // The simulator verifies every candidate: each has its end-to-end figure.
  for (const report::ScheduleRow& s : in.schedules) {
    ASSERT_TRUE(s.measured.has_value()) << s.name;
    EXPECT_TRUE(std::isfinite(s.measured->median_ms)) << s.name;
  }
  // The sequential schedule prices every operator alone.
  ASSERT_EQ(in.op_alone_ms.size(), graph_->nodes.size());
  for (size_t v = 1; v < in.op_alone_ms.size(); ++v) {
    EXPECT_GT(in.op_alone_ms[v], 0) << graph_->nodes[v].name;
  }
  const std::string page = report::RenderHtml(in);  // throws on an inconsistent input
  EXPECT_NE(page.find("Content-Security-Policy"), std::string::npos);
}

TEST_F(ReportOfSearchTest, PartRowsAreThePlansPartsAndSkippedStagesAreCountedApart) {
  const report::ReportInput in = ReportOfSearch(*graph_, *outcome_, outcome_->device, nullptr);
  ASSERT_TRUE(in.search.has_value());
  const report::SearchFacts& facts = *in.search;
  const SearchPlan& plan = outcome_->plan;
  ASSERT_EQ(facts.parts.size(), plan.parts.size());
  int64_t skipped = 0;
  for (size_t i = 0; i < plan.parts.size(); ++i) {
    const report::PartRow& row = facts.parts[i];
    const PartPlan& part = plan.parts[i];
    EXPECT_EQ(row.block, part.block);
    EXPECT_EQ(row.part, part.part);
    EXPECT_EQ(row.piece, part.piece);
    EXPECT_EQ(row.operators, part.space.operator_count());
    EXPECT_EQ(row.dp, ToString(part.schedule));
    EXPECT_EQ(row.measured + row.stored + row.skipped + row.earlier, row.stages) << i;
    // A fresh DB: nothing was read from it.
    EXPECT_EQ(row.stored, 0) << i;
    skipped += row.skipped;
  }
  const int64_t table_skipped =
      std::count(outcome_->table.skipped.begin(), outcome_->table.skipped.end(), true);
  EXPECT_GT(table_skipped, 0) << "a lazy search of squeezenet skips stages";
  EXPECT_EQ(facts.skipped, table_skipped);
  EXPECT_EQ(skipped, table_skipped);
  EXPECT_EQ(facts.measured, outcome_->table.stats.measured);
  EXPECT_EQ(facts.distinct_stages, static_cast<int64_t>(plan.stage_count()));
  EXPECT_EQ(facts.measure_mode, "lazy");
  // Every stage of the returned schedule was priced: the optimum is measured.
  for (const report::StageRow& s : in.schedules[0].stages) {
    EXPECT_EQ(s.source, report::Source::kMeasuredNow);
    EXPECT_FALSE(s.key_id.empty());
  }
}

// The text report used to count a skipped stage as read from the DB.
TEST_F(ReportOfSearchTest, TextReportCountsSkippedStagesApartFromTheDb) {
  std::istringstream text(FormatReport(*graph_, *outcome_));
  std::string line;
  std::vector<std::string> header;
  int rows = 0;
  int64_t skipped = 0;
  while (std::getline(text, line)) {
    std::istringstream words(line);
    std::vector<std::string> cells;
    for (std::string w; words >> w;) cells.push_back(w);
    if (!cells.empty() && cells[0] == "block" && cells.size() > 2) {
      header = cells;
      continue;
    }
    if (header.empty() || cells.size() < header.size()) continue;
    if (!std::all_of(cells[0].begin(), cells[0].end(), ::isdigit)) break;
    const auto column = [&](const std::string& name) {
      const auto at = std::find(header.begin(), header.end(), name);
      EXPECT_NE(at, header.end()) << name;
      return at == header.end() ? std::string() : cells[static_cast<size_t>(at - header.begin())];
    };
    EXPECT_EQ(column("from-db"), "0") << line;  // a fresh DB
    skipped += std::stoll(column("skipped"));
    ++rows;
  }
  EXPECT_EQ(rows, static_cast<int>(outcome_->plan.parts.size()));
  EXPECT_EQ(skipped,
            std::count(outcome_->table.skipped.begin(), outcome_->table.skipped.end(), true));
}

TEST_F(ReportOfSearchTest, AnEvaluationShowsTheBaselinesOnlyWhenTheDbPricesThemAlone) {
  const SearchOptions options = LazyOptions();
  const EvaluationFacts facts{"ios.json",       outcome_->ios,    outcome_->plan,
                              outcome_->table,  outcome_->device, options.batch_size,
                              options.settings, nullptr};
  const report::ReportInput in = ReportOfEvaluation(*graph_, facts, *store_);
  ASSERT_EQ(in.schedules.size(), 3u);
  EXPECT_EQ(in.schedules[0].name, "ios.json");
  EXPECT_TRUE(in.schedules[0].returned);
  // The search stored every baseline stage: the same prices, the same peaks.
  EXPECT_EQ(in.schedules[1].name, "sequential");
  EXPECT_NEAR(in.schedules[1].predicted_ms, outcome_->sequential.latency_ms, 1e-9);
  EXPECT_EQ(in.schedules[1].peak_bytes, outcome_->sequential.peak_bytes);
  EXPECT_EQ(in.schedules[2].name, "greedy");
  EXPECT_NEAR(in.schedules[2].predicted_ms, outcome_->greedy.latency_ms, 1e-9);
  for (const report::ScheduleRow& s : in.schedules)
    ExpectEveryOperatorOnce(*graph_, s.stages, s.name);
  EXPECT_NO_THROW(report::RenderHtml(in));

  auto empty = db::ProfileStore::Open(":memory:");
  const report::ReportInput alone = ReportOfEvaluation(*graph_, facts, *empty);
  ASSERT_EQ(alone.schedules.size(), 1u);
  ASSERT_FALSE(alone.notes.empty());
  EXPECT_NE(alone.notes.back().find("sequential and greedy: not shown"), std::string::npos)
      << alone.notes.back();
}

TEST(ReportOfSearchMultiTest, TheMultiDeviceViewPlacesEveryOperatorOnItsDeviceOverTime) {
  const Graph g = BuildZooModel("inception_v3");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  SearchOptions options = DefaultOptions();
  options.verify.enabled = false;
  const SearchOutcome outcome = RunSearch(g, "inception_v3", options, *store, measurer);
  MultiDeviceOptions multi_options;
  multi_options.devices = 2;
  const MultiDeviceOutcome multi = ScheduleMultiDevice(g, multi_options, options, *store, measurer);
  ASSERT_EQ(multi.op_start_ms.size(), g.nodes.size());
  ASSERT_EQ(multi.transfer_link_ms.size(), multi.transfers.size());
  double end = 0;
  for (size_t v = 1; v < g.nodes.size(); ++v) {
    EXPECT_LT(multi.op_start_ms[v], multi.op_finish_ms[v]) << g.nodes[v].name;
    end = std::max(end, multi.op_finish_ms[v]);
  }
  EXPECT_NEAR(end, multi.predicted_ms, 1e-9 * multi.predicted_ms);

  const report::ReportInput in = ReportOfSearch(g, outcome, outcome.device, &multi);
  ASSERT_TRUE(in.multi.has_value());
  ASSERT_EQ(in.multi->devices.size(), 2u);
  EXPECT_EQ(in.multi->devices[1].name, "sim:v100#1") << "identical devices, told apart";
  std::vector<report::StageRow> all;
  for (const report::DeviceStages& d : in.multi->devices) {
    double previous_end = 0;
    for (const report::StageRow& s : d.stages) {
      // A device runs one stage at a time, in order.
      EXPECT_GE(s.start_ms, previous_end - 1e-9) << d.name;
      EXPECT_GT(s.latency_ms, 0) << d.name;
      previous_end = s.start_ms + s.latency_ms;
      all.push_back(s);
    }
  }
  ExpectEveryOperatorOnce(g, all, "multi");
  for (const report::TransferRow& t : in.multi->transfers) {
    EXPECT_LE(t.start_ms, t.finish_ms);
    EXPECT_GE(t.start_ms, 0);
  }
  EXPECT_NO_THROW(report::RenderHtml(in));

  // Kept on one device: its stages end to end, as the one-device schedule.
  MultiDeviceOutcome kept = multi;
  KeepOnOneDevice(g, outcome.Returned(), options.batch_size, kept);
  double clock = 0;
  for (const auto& block : outcome.Returned().blocks) {
    for (const ScheduledStage& s : block) {
      const size_t first = static_cast<size_t>(s.stage.groups[0][0]);
      EXPECT_NEAR(kept.op_start_ms[first], clock, 1e-9);
      clock += s.latency_ms;
    }
  }
  EXPECT_TRUE(kept.transfer_link_ms.empty());
}

TEST(LaneNamesTest, NamesStreamsThreadSharesAndModelledStreams) {
  const std::set<int> counts{1, 3};
  const report::LaneNames cuda = LaneNamesFor({"cuda", "H100", "cuda|x", false}, counts);
  EXPECT_EQ(cuda.by_count.at(1), std::vector<std::string>{"stream 0 (main)"});
  EXPECT_EQ(cuda.by_count.at(3), (std::vector<std::string>{"stream 1", "stream 2", "stream 3"}));
  // SplitCores: 4 threads over 3 lanes are 2, 1, 1, each on its own cores.
  const report::LaneNames cpu =
      LaneNamesFor({"cpu", "cpu:x", "cpu-v1|model=x|cores=4|threads=4|fp32", false}, counts);
  EXPECT_EQ(cpu.by_count.at(3)[0], "lane 0: 2 threads, own cores");
  EXPECT_EQ(cpu.by_count.at(3)[2], "lane 2: 1 thread, own cores");
  EXPECT_EQ(cpu.by_count.at(1)[0], "caller's thread, 4 threads");
  const report::LaneNames oversubscribed =
      LaneNamesFor({"cpu", "cpu:x", "cpu-v1|cores=2|threads=2|", false}, counts);
  EXPECT_EQ(oversubscribed.by_count.at(3)[1], "lane 1: 1 thread, cores shared");
  const report::LaneNames unknown = LaneNamesFor({"cpu", "cpu:x", "cpu", false}, counts);
  EXPECT_EQ(unknown.by_count.at(3)[1], "lane 1 (own thread)");
  const report::LaneNames sim = LaneNamesFor({"sim", "sim:v100", "sim:v100", true}, counts);
  EXPECT_EQ(sim.by_count.at(3)[2], "modelled stream 2");
}

}  // namespace
}  // namespace ios::coordinator
