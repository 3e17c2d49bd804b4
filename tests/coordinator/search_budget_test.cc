// Valid models too wide for an exact DP still get a schedule: the part over
// budget is cut (or scheduled greedily), one warning names it, the report
// and the schedule file say which parts are approximate, and the schedule
// is valid. Zoo models stay exact.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "common/ios_json.h"
#include "common/zoo.h"
#include "coordinator/report.h"
#include "coordinator/schedule_json.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "tests/coordinator/search_testing.h"
#include "tests/coordinator/wide_models.h"
#include "tests/testing/paths.h"

namespace ios::coordinator {
namespace {

using testing::CountingMeasurer;
using testing::DefaultOptions;
using testing::ExpectValidSchedule;
using testing::WideBlock;

SearchOutcome Search(const Graph& g, const SearchOptions& options) {
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  return RunSearch(g, g.name, options, *store, measurer);
}

int Approximated(const SearchPlan& plan) {
  int count = 0;
  for (const PartPlan& p : plan.parts) count += p.schedule != PartSchedule::kExact;
  return count;
}

struct WideCase {
  int width, depth;
};

class WideBlockSearchTest : public ::testing::TestWithParam<WideCase> {};

TEST_P(WideBlockSearchTest, FinishesWithAValidApproximateScheduleAndOneWarningPerPart) {
  const Graph g = WideBlock(GetParam().width, GetParam().depth);
  const SearchOutcome outcome = Search(g, DefaultOptions());
  ExpectValidSchedule(g, outcome.ios);
  ASSERT_GT(Approximated(outcome.plan), 0);
  // One warning per part over budget, naming the block, the part and its ends.
  std::set<std::pair<int, int>> over;
  for (const PartPlan& p : outcome.plan.parts) {
    if (p.schedule != PartSchedule::kExact) over.emplace(p.block, p.part);
  }
  ASSERT_EQ(outcome.plan.warnings.size(), over.size());
  const std::string& first = outcome.plan.warnings.front();
  EXPECT_NE(first.find("block 0 part 0 ("), std::string::npos) << first;
  EXPECT_NE(first.find("DP budget exceeded"), std::string::npos) << first;
  EXPECT_NE(first.find("approximate"), std::string::npos) << first;
  EXPECT_NE(first.find("'l0_c0'"), std::string::npos) << first;
  // Never slower than greedy: the greedy schedule of each cut part competes.
  EXPECT_LE(outcome.ios.latency_ms, outcome.greedy.latency_ms * (1 + 1e-12));
  // The report's dp column and the schedule file say what was approximated.
  const std::string report = FormatReport(g, outcome);
  EXPECT_NE(report.find("APPROXIMATE: "), std::string::npos) << report;
  EXPECT_TRUE(report.find("  split") != std::string::npos ||
              report.find("  greedy") != std::string::npos)
      << report;
  const auto doc = nlohmann::json::parse(
      ScheduleToJson(g, outcome.ios, {g.name, outcome.device, 1, DefaultOptions(), {}, {}}));
  EXPECT_FALSE(doc.at("exact").get<bool>());
  EXPECT_NE(doc.at("parts").at(0).at("dp"), "exact");
}

INSTANTIATE_TEST_SUITE_P(Budget, WideBlockSearchTest,
                         ::testing::Values(WideCase{16, 1}, WideCase{24, 1}, WideCase{40, 1},
                                           WideCase{64, 1}, WideCase{16, 2}),
                         [](const auto& param_info) {
                           return "width" + std::to_string(param_info.param.width) + "_depth" +
                                  std::to_string(param_info.param.depth);
                         });

TEST(SearchBudgetTest, AtTheSplitDepthLimitThePartIsScheduledGreedily) {
  const Graph g = WideBlock(12, 2);
  SearchOptions options = DefaultOptions();
  options.dp.max_states = 4;
  options.max_split_depth = 0;
  const SearchOutcome outcome = Search(g, options);
  ASSERT_EQ(outcome.plan.parts.size(), 1u);
  EXPECT_EQ(outcome.plan.parts[0].schedule, PartSchedule::kGreedy);
  ASSERT_EQ(outcome.plan.warnings.size(), 1u);
  EXPECT_NE(outcome.plan.warnings[0].find("approximate: greedy"), std::string::npos)
      << outcome.plan.warnings[0];
  ExpectValidSchedule(g, outcome.ios);
  EXPECT_EQ(outcome.ios.latency_ms, outcome.greedy.latency_ms);
}

TEST(SearchBudgetTest, TinyBudgetsMixSplitAndGreedyPiecesAndStayValid) {
  const Graph g = WideBlock(10, 3);
  SearchOptions options = DefaultOptions();
  options.dp.max_transitions = 40;
  options.max_split_depth = 2;
  const SearchOutcome outcome = Search(g, options);
  bool split = false, greedy = false;
  for (const PartPlan& p : outcome.plan.parts) {
    split = split || p.schedule == PartSchedule::kSplit;
    greedy = greedy || (p.schedule == PartSchedule::kGreedy && !p.alternative);
    EXPECT_LE(p.space.transition_count(), p.schedule == PartSchedule::kSplit ? 40 : 1 << 20);
  }
  EXPECT_TRUE(split);
  EXPECT_TRUE(greedy);
  ExpectValidSchedule(g, outcome.ios);
}

TEST(SearchBudgetTest, WhenTheSearchStageBudgetRunsOutLaterPartsAreApproximated) {
  const Graph g = BuildZooModel("squeezenet");
  SearchOptions options = DefaultOptions();
  options.max_search_stages = 60;
  const SearchOutcome outcome = Search(g, options);
  EXPECT_EQ(outcome.plan.parts.front().schedule, PartSchedule::kExact);
  EXPECT_GT(Approximated(outcome.plan), 0);
  ASSERT_FALSE(outcome.plan.warnings.empty());
  EXPECT_NE(outcome.plan.warnings.back().find("the search's budget of 60 distinct stages"),
            std::string::npos)
      << outcome.plan.warnings.back();
  EXPECT_LT(outcome.plan.stage_count(), 158u);  // all of squeezenet's at r=3 s=8
  ExpectValidSchedule(g, outcome.ios);
}

// 65 operators make two parts before any budget; when greedy over the
// whole block beats the approximated parts, the block uses it.
TEST(SearchBudgetTest, ABlockWithAnApproximatedPartFallsBackToItsGreedyBaselineWhenFaster) {
  const Graph g = WideBlock(64);
  const SearchPlan plan = PlanSearch(g, DefaultOptions());
  ASSERT_GT(Approximated(plan), 0);
  std::vector<double> latency(plan.stage_count(), 1.0);
  for (const auto& [stage, id] : plan.greedy.at(0)) latency[id] = 0.001;
  const Schedule schedule = SolveSchedule(plan, latency, g.blocks.size());
  ASSERT_EQ(schedule.parts.size(), 1u);
  EXPECT_EQ(schedule.parts[0].part, -1);
  EXPECT_TRUE(schedule.parts[0].alternative);
  EXPECT_EQ(schedule.parts[0].operators, 65);
  EXPECT_EQ(schedule.blocks[0].size(), plan.greedy[0].size());
  EXPECT_DOUBLE_EQ(schedule.latency_ms, 0.001 * static_cast<double>(plan.greedy[0].size()));
  ExpectValidSchedule(g, schedule);
}

TEST(SearchBudgetTest, ZooModelsStayExact) {
  for (const char* model : {"squeezenet", "inception_v3"}) {
    const Graph g = BuildZooModel(model);
    const SearchOutcome outcome = Search(g, DefaultOptions());
    EXPECT_TRUE(outcome.plan.warnings.empty()) << model;
    EXPECT_EQ(Approximated(outcome.plan), 0) << model;
    for (const PartSummary& p : outcome.ios.parts) EXPECT_EQ(p.schedule, PartSchedule::kExact);
    EXPECT_EQ(FormatReport(g, outcome).find("APPROXIMATE"), std::string::npos) << model;
  }
}

// The IOS reference's own export of NASNet has no cell parts: one block of
// 373 operators, over budget in most of its parts.
TEST(SearchBudgetTest, ReferenceNasnetWithoutCellPartsGetsAValidSchedule) {
  const std::string path = ::ios::testing::SharedFixture("ios-reference/models/nasnet.json");
  IOS_REQUIRE_FIXTURE(path);
  const Graph g = LoadIosJson(path).graph;
  SearchOptions options = DefaultOptions();
  // Smaller budgets than the defaults keep the test fast; the defaults are
  // measured in docs/benchmarks.md.
  options.dp.max_transitions = 200'000;
  options.dp.max_stages = 20'000;
  const SearchPlan plan = PlanSearch(g, options);
  EXPECT_GT(Approximated(plan), 0);
  EXPECT_FALSE(plan.warnings.empty());
  // Made-up latencies: a valid schedule needs none measured.
  std::vector<double> latency(plan.stage_count());
  for (size_t i = 0; i < latency.size(); ++i) latency[i] = 0.01 + (i * 7919 % 1000) * 1e-3;
  const Schedule schedule = SolveSchedule(plan, latency, g.blocks.size());
  ExpectValidSchedule(g, schedule);
}

}  // namespace
}  // namespace ios::coordinator
