// The three search phases end to end: enumerate, measure (on the simulated
// V100, into a real SQLite profile store), solve. Schedule files are in
// schedule_json_test.cc.
#include "coordinator/search.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/stage_key.h"
#include "common/zoo.h"
#include "coordinator/measurer.h"
#include "coordinator/schedule_json.h"
#include "db/profile_store.h"
#include "devices/sim/sim_backend.h"
#include "tests/coordinator/search_testing.h"
#include "tests/testing/paths.h"
#include "tests/testing/sanitizers.h"

namespace ios::coordinator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CountingMeasurer;
using testing::DefaultOptions;
using testing::ExpectValidSchedule;
using testing::NodeName;
using testing::PlanKeys;
using testing::StagesOf;
using testing::TempDirTest;

double SumOfStageLatencies(const Schedule& schedule) {
  double sum = 0;
  for (const auto& block : schedule.blocks) {
    for (const ScheduledStage& s : block) sum += s.latency_ms;
  }
  return sum;
}

int CountMergeStages(const Schedule& schedule) {
  int merges = 0;
  for (const auto& block : schedule.blocks) {
    for (const ScheduledStage& s : block) {
      merges += s.stage.strategy == Strategy::kMerge && s.stage.OperatorCount() > 1;
    }
  }
  return merges;
}

db::MeasurementKey KeyFor(const std::string& stage_key, const Measurer& measurer, int batch,
                          const SearchOptions& options) {
  return {stage_key, measurer.Device().fingerprint, batch, options.settings.Key()};
}

// ----------------------------------------------------- search of squeezenet

TEST(SearchTest, SqueezenetScheduleCoversEveryOperatorOnceAndIsNoSlowerThanSequential) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  const SearchOutcome outcome = RunSearch(g, "squeezenet", DefaultOptions(), *store, measurer);

  ExpectValidSchedule(g, outcome.ios);
  ExpectValidSchedule(g, outcome.sequential);
  ExpectValidSchedule(g, outcome.greedy);
  EXPECT_TRUE(outcome.device.simulated);
  EXPECT_TRUE(std::isfinite(outcome.ios.latency_ms));
  EXPECT_GT(outcome.ios.latency_ms, 0);
  EXPECT_LE(outcome.ios.latency_ms, outcome.sequential.latency_ms * (1 + 1e-12));
  EXPECT_LT(outcome.ios.latency_ms, outcome.sequential.latency_ms)
      << "squeezenet's fire modules leave room for concurrency";
  // Greedy stages may be wider than s, so IOS need not beat it; report it.
  RecordProperty("ios_ms", std::to_string(outcome.ios.latency_ms));
  RecordProperty("greedy_ms", std::to_string(outcome.greedy.latency_ms));
  RecordProperty("sequential_ms", std::to_string(outcome.sequential.latency_ms));
  // First search on an empty store: everything measured, once.
  EXPECT_EQ(outcome.table.stats.total, static_cast<int64_t>(outcome.plan.stage_count()));
  EXPECT_EQ(outcome.table.stats.measured, outcome.table.stats.total);
  EXPECT_EQ(outcome.table.stats.reused, 0);
  EXPECT_EQ(outcome.table.stats.failed, 0);
  EXPECT_EQ(measurer.asked, outcome.table.stats.total);
}

TEST_F(TempDirTest, RerunOnTheSameDbMeasuresNothingAndFindsTheSameSchedule) {
  const Graph g = BuildZooModel("squeezenet");
  const std::string db = PathIn("profile.db");
  SearchOutcome first, second;
  {
    auto store = db::ProfileStore::Open(db);
    CountingMeasurer measurer;
    first = RunSearch(g, "squeezenet", DefaultOptions(), *store, measurer);
  }
  CountingMeasurer measurer;
  {
    auto store = db::ProfileStore::Open(db);  // reopened: results survive on disk
    second = RunSearch(g, "squeezenet", DefaultOptions(), *store, measurer);
  }
  EXPECT_GT(first.table.stats.measured, 0);
  EXPECT_EQ(second.table.stats.measured, 0);
  EXPECT_EQ(second.table.stats.reused, second.table.stats.total);
  EXPECT_EQ(second.table.stats.total, first.table.stats.total);
  EXPECT_EQ(measurer.asked, 0);
  EXPECT_EQ(second.table.latency_ms, first.table.latency_ms);
  EXPECT_EQ(StagesOf(second.ios), StagesOf(first.ios));
  EXPECT_DOUBLE_EQ(second.ios.latency_ms, first.ios.latency_ms);
  EXPECT_DOUBLE_EQ(second.sequential.latency_ms, first.sequential.latency_ms);
  EXPECT_DOUBLE_EQ(second.greedy.latency_ms, first.greedy.latency_ms);
}

TEST(SearchTest, AnotherBatchSizeMeasuresItsOwnStagesAndLeavesBatchOneUntouched) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  const SearchOptions b1 = DefaultOptions(1), b2 = DefaultOptions(2);
  const SearchOutcome one = RunSearch(g, "squeezenet", b1, *store, measurer);
  std::vector<double> batch_one;
  const std::vector<std::string> keys = PlanKeys(g, one.plan);
  for (const std::string& key : keys) {
    const auto stored = store->Lookup(KeyFor(key, measurer, 1, b1));
    ASSERT_TRUE(stored.has_value());
    batch_one.push_back(stored->median_ms);
  }

  const SearchOutcome two = RunSearch(g, "squeezenet", b2, *store, measurer);
  EXPECT_EQ(two.table.stats.measured, two.table.stats.total);
  EXPECT_EQ(two.table.stats.reused, 0);
  EXPECT_GT(two.ios.latency_ms, one.ios.latency_ms) << "twice the work takes longer";

  int differ = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto at_one = store->Lookup(KeyFor(keys[i], measurer, 1, b1));
    const auto at_two = store->Lookup(KeyFor(keys[i], measurer, 2, b2));
    ASSERT_TRUE(at_one.has_value());
    ASSERT_TRUE(at_two.has_value());
    EXPECT_EQ(at_one->median_ms, batch_one[i]) << "batch-1 entry changed: " << keys[i];
    differ += at_one->median_ms != at_two->median_ms;
  }
  EXPECT_GT(differ, 0);

  // And batch 1 again is still all reuse, with the batch-1 answer.
  CountingMeasurer again;
  const SearchOutcome three = RunSearch(g, "squeezenet", b1, *store, again);
  EXPECT_EQ(three.table.stats.measured, 0);
  EXPECT_DOUBLE_EQ(three.ios.latency_ms, one.ios.latency_ms);
}

// Renames every node (so no name is shared) and round-trips through IOS JSON.
Graph RenamedCopy(const Graph& g, const std::string& prefix) {
  Graph copy = g;
  copy.name = prefix + g.name;
  for (Node& node : copy.nodes) node.name = prefix + node.name;
  return ParseIosJson(ToIosJson(copy), "renamed copy").graph;
}

TEST(SearchTest, RenamedCopyOfAModelReusesEveryStage) {
  const Graph g = BuildZooModel("squeezenet");
  const Graph renamed = RenamedCopy(g, "copy/");
  ASSERT_NE(renamed.node(1).name, g.node(1).name);
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer first_measurer, second_measurer;
  const SearchOutcome first = RunSearch(g, "squeezenet", DefaultOptions(), *store, first_measurer);
  const SearchOutcome second =
      RunSearch(renamed, "squeezenet-renamed", DefaultOptions(), *store, second_measurer);
  EXPECT_EQ(second.table.stats.measured, 0);
  EXPECT_EQ(second.table.stats.reused, first.table.stats.total);
  EXPECT_EQ(second_measurer.asked, 0);
  EXPECT_EQ(second.plan.key_hashes, first.plan.key_hashes);
  EXPECT_DOUBLE_EQ(second.ios.latency_ms, first.ios.latency_ms);
}

// The first blocks of squeezenet as a model of their own.
Graph FirstBlocks(const Graph& g, size_t block_count) {
  Graph head;
  head.name = g.name + "-head";
  const NodeId last = g.blocks.at(block_count - 1).exit;
  head.nodes.assign(g.nodes.begin(), g.nodes.begin() + last + 1);
  head.blocks.assign(g.blocks.begin(), g.blocks.begin() + block_count);
  InferShapes(head);
  return head;
}

TEST(SearchTest, ModelThatSharesBlocksWithAnEarlierOneReusesTheirStages) {
  const Graph full = BuildZooModel("squeezenet");
  const Graph head = FirstBlocks(full, 4);
  ASSERT_LT(head.OperatorCount(), full.OperatorCount());
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  RunSearch(full, "squeezenet", DefaultOptions(), *store, measurer);
  CountingMeasurer head_measurer;
  const SearchOutcome outcome =
      RunSearch(head, "squeezenet-head", DefaultOptions(), *store, head_measurer);
  EXPECT_GT(outcome.table.stats.total, 0);
  EXPECT_EQ(outcome.table.stats.measured, 0);
  EXPECT_EQ(head_measurer.asked, 0);
  ExpectValidSchedule(head, outcome.ios);
}

// ------------------------------------------------------------- plan sizes

TEST(SearchPlanTest, InceptionV3RepeatsStagesAcrossBlocksAndMatchesTheReferenceCount) {
  const Graph g = BuildZooModel("inception_v3");
  const SearchPlan plan = PlanSearch(g, DefaultOptions());
  // IOS profiles 5,479 stages for Inception V3 at r=3 s=8 (both strategies),
  // counting 119 one-operator stages twice (as merge and as parallel).
  EXPECT_EQ(plan.stage_occurrences, 5479 - 119);
  EXPECT_LT(static_cast<int64_t>(plan.stage_count()), plan.stage_occurrences)
      << "Inception V3 repeats blocks, so some stages are shared";
  const std::vector<std::string> keys = PlanKeys(g, plan);
  std::set<std::string> distinct(keys.begin(), keys.end());
  EXPECT_EQ(distinct.size(), plan.stage_count());
  int64_t per_part = 0;
  for (const PartPlan& part : plan.parts) per_part += part.space.stage_count();
  EXPECT_EQ(per_part, plan.stage_occurrences);
}

// ---------------------------------------------------------- failed stages

TEST(SearchTest, FailedMeasurementsAreStoredAvoidedAndNotRetried) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  const SearchOptions options = DefaultOptions();

  CountingMeasurer healthy;
  {
    auto scratch = db::ProfileStore::Open(":memory:");
    const SearchOutcome normal = RunSearch(g, "squeezenet", options, *scratch, healthy);
    ASSERT_GT(CountMergeStages(normal.ios), 0) << "precondition: merges win on the sim V100";
  }

  CountingMeasurer failing(/*fail_merges=*/true);
  const SearchOutcome first = RunSearch(g, "squeezenet", options, *store, failing);
  ASSERT_GT(failing.failed_merges, 0);
  EXPECT_EQ(first.table.stats.failed, failing.failed_merges);
  EXPECT_EQ(CountMergeStages(first.ios), 0);
  EXPECT_TRUE(std::isfinite(first.ios.latency_ms));
  ExpectValidSchedule(g, first.ios);

  int stored_errors = 0;
  const std::vector<std::string> keys = PlanKeys(g, first.plan);
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto stored = store->Lookup(KeyFor(keys[i], failing, 1, options));
    ASSERT_TRUE(stored.has_value()) << keys[i];
    if (!stored->ok()) {
      ++stored_errors;
      EXPECT_EQ(stored->error, MeasureError::kOutOfMemory);
      EXPECT_TRUE(std::isinf(first.table.latency_ms[i]));
    }
  }
  EXPECT_EQ(stored_errors, failing.failed_merges);
  EXPECT_EQ(store->GetStats().failed_measurements, failing.failed_merges);

  // A rerun with a healthy device of the same class reuses the stored errors.
  CountingMeasurer rerun_measurer;
  const SearchOutcome rerun = RunSearch(g, "squeezenet", options, *store, rerun_measurer);
  EXPECT_EQ(rerun_measurer.asked, 0);
  EXPECT_EQ(rerun.table.stats.measured, 0);
  EXPECT_EQ(rerun.table.stats.failed, failing.failed_merges);
  EXPECT_EQ(CountMergeStages(rerun.ios), 0);
  EXPECT_EQ(StagesOf(rerun.ios), StagesOf(first.ios));
}

// Fails every stage with an operator of 24 output channels (the conv
// named "bad\nconv" below) with `error`; measures the rest on the sim V100.
class FailingMeasurer final : public OneAtATimeMeasurer {
 public:
  explicit FailingMeasurer(MeasureError error)
      : backend_(devices::CreateSimBackend("v100")), error_(error) {}
  const DeviceInfo& Device() const override { return backend_->Device(); }

 protected:
  MeasureResult MeasureOne(const StageSpec& spec, int batch_size,
                           const MeasureSettings& settings) override {
    bool bad = false;
    for (const auto& group : spec.groups) {
      for (const StageOp& op : group) bad = bad || op.output.c == 24;
    }
    if (!bad) return backend_->Measure(spec, batch_size, settings);
    MeasureResult failed;
    failed.error = error_;
    failed.error_message = "test double: no luck";
    return failed;
  }

 private:
  std::unique_ptr<devices::Backend> backend_;
  MeasureError error_;
};

// in -> "bad\nconv" (24 channels) -> "after": every schedule runs the bad conv.
Graph GraphWithABadConv() {
  Graph g;
  g.name = "bad";
  Node in{"in", "", {}, {}, {8, 8, 8}};
  in.op.kind = OpKind::kInput;
  g.nodes.push_back(in);
  OpParams conv;
  conv.kind = OpKind::kConv;
  conv.conv.kernel = {1, 1};
  conv.conv.out_channels = 24;
  g.nodes.push_back({"bad\nconv", "", conv, {{{0, 0, 8}}}, {}});
  conv.conv.out_channels = 8;
  g.nodes.push_back({"after", "", conv, {{{1, 0, 24}}}, {}});
  g.blocks.push_back({0, {1}, 2, {}});
  InferShapes(g);
  return g;
}

std::string SearchError(const Graph& g, db::ProfileStore& store, Measurer& measurer) {
  try {
    RunSearch(g, g.name, DefaultOptions(), store, measurer);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the search succeeded";
  return "";
}

TEST(SearchTest, APartWithNoMeasurableScheduleNamesAFailedStageAndItsError) {
  const Graph g = GraphWithABadConv();
  auto store = db::ProfileStore::Open(":memory:");
  FailingMeasurer oom(MeasureError::kOutOfMemory);
  const std::string first = SearchError(g, *store, oom);
  EXPECT_NE(first.find("block 0 part 0: every schedule contains a stage that failed to measure"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("'bad\\nconv'"), std::string::npos) << first;  // Quoted: escaped
  EXPECT_NE(first.find("out_of_memory: test double: no luck"), std::string::npos) << first;
  EXPECT_EQ(first.find("forget --failures"), std::string::npos) << first;  // measured just now
  // The next search reuses the stored out-of-memory and says how to drop it.
  CountingMeasurer healthy;
  const std::string again = SearchError(g, *store, healthy);
  EXPECT_NE(again.find("'bad\\nconv'"), std::string::npos) << again;
  EXPECT_NE(again.find("stored in the profiling DB"), std::string::npos) << again;
  EXPECT_NE(again.find("ios-db --db FILE forget --failures"), std::string::npos) << again;
}

TEST(SearchTest, ATransientFailureThatLeavesNoScheduleHintsAtForget) {
  const Graph g = GraphWithABadConv();
  auto store = db::ProfileStore::Open(":memory:");
  FailingMeasurer timeout(MeasureError::kTimeout);
  const std::string error = SearchError(g, *store, timeout);
  EXPECT_NE(error.find("timeout: test double: no luck"), std::string::npos) << error;
  EXPECT_NE(error.find("transient"), std::string::npos) << error;
  EXPECT_NE(error.find("forget --failures"), std::string::npos) << error;
}

// ------------------------------------------------------------------ totals

TEST(SearchTest, ScheduleTotalsAreTheSumsOfTheirStageLatencies) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  const SearchOutcome outcome = RunSearch(g, "squeezenet", DefaultOptions(), *store, measurer);
  for (const Schedule* schedule : {&outcome.ios, &outcome.sequential, &outcome.greedy}) {
    EXPECT_NEAR(schedule->latency_ms, SumOfStageLatencies(*schedule), 1e-9 * schedule->latency_ms);
    for (const auto& block : schedule->blocks) {
      for (const ScheduledStage& s : block) {
        EXPECT_EQ(s.latency_ms, outcome.table.latency_ms.at(s.stage_id));
        EXPECT_EQ(outcome.plan.key_hashes.at(s.stage_id),
                  HashStageKey(MakeStageSpec(g, s.stage).Key()));
      }
    }
  }
  // Solving and pricing again from the table gives the same totals.
  const Schedule solved = SolveSchedule(outcome.plan, outcome.table.latency_ms, g.blocks.size());
  EXPECT_DOUBLE_EQ(solved.latency_ms, outcome.ios.latency_ms);
  const Schedule priced = PriceSchedule(outcome.plan.sequential, outcome.table.latency_ms);
  double expected = 0;
  for (const BlockSchedule& block : outcome.plan.sequential) {
    for (const auto& entry : block) expected += outcome.table.latency_ms.at(entry.second);
  }
  EXPECT_NEAR(priced.latency_ms, expected, 1e-9 * expected);
  EXPECT_EQ(priced.blocks.size(), g.blocks.size());
  // Re-pricing the IOS schedule itself reproduces its latency.
  std::vector<BlockSchedule> ios_blocks;
  for (const auto& block : outcome.ios.blocks) {
    ios_blocks.emplace_back();
    for (const ScheduledStage& s : block) ios_blocks.back().emplace_back(s.stage, s.stage_id);
  }
  EXPECT_NEAR(PriceSchedule(ios_blocks, outcome.table.latency_ms).latency_ms,
              outcome.ios.latency_ms, 1e-9 * outcome.ios.latency_ms);
}

// The measure phase keeps at most a chunk of stages in the measurer's hands
// (their specs are the memory of the phase); the table does not depend on it.
TEST(SearchTest, MeasuringInChunksGivesTheSameTableAsAllAtOnce) {
  const Graph g = BuildZooModel("squeezenet");
  const SearchPlan plan = PlanSearch(g, DefaultOptions());
  auto whole_store = db::ProfileStore::Open(":memory:");
  CountingMeasurer whole;
  const LatencyTable all = MeasureStages(g, plan, *whole_store, whole, DefaultOptions());
  SearchOptions chunked_options = DefaultOptions();
  chunked_options.measure_chunk = 7;
  auto chunked_store = db::ProfileStore::Open(":memory:");
  CountingMeasurer chunked;
  const LatencyTable table = MeasureStages(g, plan, *chunked_store, chunked, chunked_options);
  EXPECT_EQ(whole.calls, 1);
  EXPECT_EQ(whole.max_held, static_cast<int64_t>(plan.stage_count()));
  EXPECT_EQ(chunked.calls, 1);
  EXPECT_LE(chunked.max_held, 7);
  EXPECT_EQ(chunked.asked, static_cast<int64_t>(plan.stage_count()));
  EXPECT_FALSE(chunked.asked_twice);
  EXPECT_EQ(table.latency_ms, all.latency_ms);
  EXPECT_EQ(table.stats.measured, all.stats.measured);
}

// ------------------------------------------------------ keyer vs full spec

class PlanKeysTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanKeysTest, EveryCandidateStageKeyEqualsItsFullSpecKey) {
  const Graph g = BuildZooModel(GetParam());
  const SearchPlan plan = PlanSearch(g, DefaultOptions());
  ASSERT_GT(plan.stage_count(), 0u);
  // Inside the default DP budgets: every part exact.
  EXPECT_TRUE(plan.warnings.empty()) << plan.warnings.front();
  // Every distinct stage: the full StageSpec key is the plan's key.
  int64_t mismatches = 0;
  for (size_t id = 0; id < plan.stage_count(); id += ::ios::testing::kExhaustiveStride) {
    const Stage stage = plan.StageOf(static_cast<int>(id));
    const StageSpec spec = MakeStageSpec(g, stage);
    const std::string spec_key = spec.Key();
    // The DB keeps keys only and derives descriptions from them.
    const StageSpec parsed = ParseStageKey(spec_key);
    if ((parsed.Key() != spec_key || parsed.Describe() != spec.Describe()) && ++mismatches <= 3) {
      ADD_FAILURE() << "stage id " << id << " does not parse back: " << spec_key;
    }
    if (HashStageKey(spec_key) != plan.key_hashes[id] && ++mismatches <= 3) {
      ADD_FAILURE() << "stage id " << id
                    << ": the plan's hash is not the hash of\n spec: " << spec_key;
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << plan.stage_count() << " distinct stages";
  // Every occurrence in every part: a fresh keyer gives the key of the
  // stage id the part points to (building full specs for each of NASNet's
  // 240k occurrences would take a minute; the distinct ones are above).
  StageKeyer keyer(g);
  int64_t occurrences = 0;
  mismatches = 0;
  for (const PartPlan& part : plan.parts) {
    ASSERT_EQ(part.stage_ids.size(), static_cast<size_t>(part.space.stage_count()));
    occurrences += part.space.stage_count();
    for (int local = 0; local < part.space.stage_count();
         local += static_cast<int>(::ios::testing::kExhaustiveStride)) {
      const Stage stage = part.space.stage(local);
      const std::string keyer_key = keyer.Key(stage);
      const std::string plan_key = plan.KeyOf(keyer, part.stage_ids[local]);
      if (keyer_key != plan_key && ++mismatches <= 3) {
        ADD_FAILURE() << "block " << part.block << " part " << part.part << " stage " << local
                      << "\n keyer: " << keyer_key << "\n plan:  " << plan_key;
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << occurrences << " occurrences";
  EXPECT_EQ(occurrences, plan.stage_occurrences);
}

// Reordering the groups of a stage does not make it another stage: swapping
// any two groups of any candidate stage keeps its key (else the same stage,
// met again in another block with its groups in another order, is measured
// twice under two keys).
TEST_P(PlanKeysTest, SwappingAnyTwoGroupsOfAnyCandidateStageKeepsItsKey) {
  const Graph g = BuildZooModel(GetParam());
  const SearchPlan plan = PlanSearch(g, DefaultOptions());
  StageKeyer keyer(g);
  int64_t mismatches = 0, multi_group = 0;
  for (size_t id = 0; id < plan.stage_count(); id += ::ios::testing::kExhaustiveStride) {
    Stage stage = plan.StageOf(static_cast<int>(id));
    if (stage.groups.size() < 2) continue;
    ++multi_group;
    bool stable = true;
    for (size_t i = 0; i < stage.groups.size() && stable; ++i) {
      for (size_t j = i + 1; j < stage.groups.size() && stable; ++j) {
        std::swap(stage.groups[i], stage.groups[j]);
        const std::string& swapped = keyer.Key(stage);
        if (HashStageKey(swapped) != plan.key_hashes[id]) {
          stable = false;
          if (++mismatches <= 3) {
            ADD_FAILURE() << "stage id " << id << ", groups " << i << " and " << j
                          << " swapped\n plan:    " << plan.KeyOf(keyer, static_cast<int>(id))
                          << "\n swapped: " << swapped;
          }
        }
        std::swap(stage.groups[i], stage.groups[j]);
      }
    }
  }
  EXPECT_GT(multi_group, 0);
  EXPECT_EQ(mismatches, 0) << "of " << multi_group << " multi-group stages";
}

INSTANTIATE_TEST_SUITE_P(Zoo, PlanKeysTest,
                         ::testing::Values("inception_v3", "squeezenet", "nasnet"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace ios::coordinator
