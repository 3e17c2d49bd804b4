// Valid models too wide for an exact DP still get a schedule: the part over
// budget is cut (or scheduled greedily), one warning names it, the report
// and the schedule file say which parts are approximate, and the schedule
// is valid. Zoo models stay exact.
#include <gtest/gtest.h>

#include <algorithm>
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
using testing::SearchInMemory;
using testing::WideBlock;

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
  const SearchOutcome outcome = SearchInMemory(g, DefaultOptions());
  ExpectValidSchedule(g, outcome.ios);
  ASSERT_GT(Approximated(outcome.plan), 0);
  // One warning per part over budget, naming the block, the part and its
  // ends, and one per block cut by --max-part-size.
  std::set<std::pair<int, int>> over;
  for (const PartPlan& p : outcome.plan.parts) {
    if (p.schedule == PartSchedule::kSplit || p.schedule == PartSchedule::kGreedy) {
      over.emplace(p.block, p.part);
    }
  }
  std::vector<bool> cut;
  PartsOf(g, g.blocks[0], DefaultOptions().max_part_size, &cut);
  const size_t cut_blocks = std::count(cut.begin(), cut.end(), true) > 0 ? 1 : 0;
  ASSERT_EQ(outcome.plan.warnings.size(), over.size() + cut_blocks);
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
  const SearchOutcome outcome = SearchInMemory(g, options);
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
  const SearchOutcome outcome = SearchInMemory(g, options);
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
  const SearchOutcome outcome = SearchInMemory(g, options);
  EXPECT_EQ(outcome.plan.parts.front().schedule, PartSchedule::kExact);
  EXPECT_GT(Approximated(outcome.plan), 0);
  ASSERT_FALSE(outcome.plan.warnings.empty());
  EXPECT_NE(outcome.plan.warnings.back().find("the search's budget of 60 distinct stages"),
            std::string::npos)
      << outcome.plan.warnings.back();
  EXPECT_LT(outcome.plan.stage_count(), 158u);  // all of squeezenet's at r=3 s=8
  ExpectValidSchedule(g, outcome.ios);
}

// Each budget is named with its own number: a part over the transitions
// budget used to be blamed on "what is left of the search's budget".
TEST(SearchBudgetTest, TheWarningNamesTheBudgetThatWasExceeded) {
  const Graph g = WideBlock(10, 3);
  SearchOptions options = DefaultOptions();
  options.dp.max_transitions = 40;
  options.max_search_stages = 200'000;  // below --max-dp-stages: caps every part's
  const SearchOutcome outcome = SearchInMemory(g, options);
  ASSERT_FALSE(outcome.plan.warnings.empty());
  const std::string& warning = outcome.plan.warnings.front();
  EXPECT_NE(warning.find("transitions"), std::string::npos) << warning;
  EXPECT_NE(warning.find("(--max-dp-transitions 40)"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("search's budget"), std::string::npos) << warning;
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

// Three independent chains of 20 convolutions and a concat: 61 operators,
// cut by --max-part-size 50 into one chain and the rest. Each part is
// solved exactly, the block is not (it loses every stage that runs the
// first chain beside the others): it used to be reported exact and be
// slower than greedy.
Graph ThreeChains(int length = 20) {
  Graph g;
  g.name = "three_chains";
  Node input{"in", "", {}, {}, {16, 32, 32}};
  input.op.kind = OpKind::kInput;
  g.nodes.push_back(input);
  Block block;
  block.enter = 0;
  Node concat{"concat", "", {}, {}, {}};
  concat.op.kind = OpKind::kIdentity;
  for (int chain = 0; chain < 3; ++chain) {
    NodeId producer = 0;
    for (int i = 0; i < length; ++i) {
      Node conv{"b" + std::to_string(chain) + "_c" + std::to_string(i), "", {}, {}, {}};
      conv.op.kind = OpKind::kConv;
      conv.op.conv.out_channels = 16;
      conv.op.conv.kernel = {3, 3};
      conv.op.conv.stride = {1, 1};
      conv.op.conv.padding = {1, 1};
      conv.op.conv.act = Activation::kRelu;
      conv.inputs = {{{producer, 0, 16}}};
      producer = static_cast<NodeId>(g.nodes.size());
      block.inner.push_back(producer);
      g.nodes.push_back(conv);
    }
    concat.inputs.push_back({{producer, 0, 16}});
  }
  block.exit = static_cast<NodeId>(g.nodes.size());
  g.nodes.push_back(concat);
  g.blocks.push_back(block);
  InferShapes(g);
  return g;
}

TEST(SearchBudgetTest, ABlockCutByMaxPartSizeIsApproximateAndNeverSlowerThanGreedy) {
  const Graph g = ThreeChains();
  const SearchOutcome outcome = SearchInMemory(g, DefaultOptions());
  ExpectValidSchedule(g, outcome.ios);
  ASSERT_EQ(outcome.plan.parts.size(), 2u);
  for (const PartPlan& p : outcome.plan.parts) EXPECT_EQ(p.schedule, PartSchedule::kCut);
  ASSERT_EQ(outcome.plan.warnings.size(), 1u);
  const std::string& warning = outcome.plan.warnings[0];
  EXPECT_NE(warning.find("block 0 (61 operators, 'b0_c0' .. 'concat')"), std::string::npos)
      << warning;
  EXPECT_NE(warning.find("--max-part-size 50"), std::string::npos) << warning;
  EXPECT_NE(warning.find("approximate"), std::string::npos) << warning;
  EXPECT_LE(outcome.ios.latency_ms, outcome.greedy.latency_ms * (1 + 1e-12));
  const std::string report = FormatReport(g, outcome);
  EXPECT_NE(report.find("APPROXIMATE: "), std::string::npos) << report;
  const auto doc = nlohmann::json::parse(
      ScheduleToJson(g, outcome.ios, {g.name, outcome.device, 1, DefaultOptions(), {}, {}}));
  EXPECT_FALSE(doc.at("exact").get<bool>());
  for (const auto& part : doc.at("parts")) EXPECT_NE(part.at("dp"), "exact") << part;
}

// Parts a model declares are IOS's own decomposition, not a cut: still exact.
TEST(SearchBudgetTest, ExplicitPartsWithinMaxPartSizeStayExact) {
  Graph g = ThreeChains(5);
  Block& block = g.blocks[0];
  const std::vector<NodeId> ops = block.Operators();
  block.parts = {std::vector<NodeId>(ops.begin(), ops.begin() + 5),
                 std::vector<NodeId>(ops.begin() + 5, ops.end())};
  const SearchOutcome outcome = SearchInMemory(g, DefaultOptions());
  EXPECT_TRUE(outcome.plan.warnings.empty());
  EXPECT_EQ(Approximated(outcome.plan), 0);
  ExpectValidSchedule(g, outcome.ios);
}

TEST(SearchBudgetTest, NoZooModelIsCutByTheDefaultMaxPartSize) {
  for (const ZooEntry& model : ZooModels()) {
    const Graph g = BuildZooModel(model.name);
    for (const Block& block : g.blocks) {
      std::vector<bool> cut;
      PartsOf(g, block, DefaultOptions().max_part_size, &cut);
      EXPECT_EQ(std::count(cut.begin(), cut.end(), true), 0) << model.name;
    }
  }
}

TEST(SearchBudgetTest, ZooModelsStayExact) {
  for (const char* model : {"squeezenet", "inception_v3"}) {
    const Graph g = BuildZooModel(model);
    const SearchOutcome outcome = SearchInMemory(g, DefaultOptions());
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
