// Shared by the coordinator's search and schedule-file tests: a measurer
// double over the simulated V100, default options, a temp-dir fixture.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/measurer.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "devices/sim/sim_backend.h"
#include "tests/testing/process.h"

namespace ios::coordinator::testing {

// The canonical key of every distinct stage of `plan`, by stage id (the
// plan keeps only their hashes).
inline std::vector<std::string> PlanKeys(const Graph& graph, const SearchPlan& plan) {
  StageKeyer keyer(graph);
  std::vector<std::string> keys;
  keys.reserve(plan.stage_count());
  for (int id = 0; id < static_cast<int>(plan.stage_count()); ++id) {
    keys.push_back(plan.KeyOf(keyer, id));
  }
  return keys;
}

// ------------------------------------------------------------ test doubles

// Measures on the simulated V100 and counts what it was asked to measure:
// streams, stages, and the most stages it held at once. With
// `fail_merges`, every merge stage fails with out-of-memory instead.
class CountingMeasurer final : public OneAtATimeMeasurer {
 public:
  explicit CountingMeasurer(bool fail_merges = false)
      : backend_(devices::CreateSimBackend("v100")), fail_merges_(fail_merges) {}

  const DeviceInfo& Device() const override { return backend_->Device(); }

  void MeasureStream(
      std::vector<const StageSpec*> specs, int batch_size, const MeasureSettings& settings,
      const std::function<MoreSpecs(std::span<const IndexedResult>)>& on_results) override {
    ++calls;
    int64_t held = static_cast<int64_t>(specs.size());
    max_held = std::max(max_held, held);
    OneAtATimeMeasurer::MeasureStream(
        std::move(specs), batch_size, settings, [&](std::span<const IndexedResult> results) {
          MoreSpecs more = on_results(results);
          held += static_cast<int64_t>(more.size()) - static_cast<int64_t>(results.size());
          max_held = std::max(max_held, held);
          return more;
        });
  }

  int calls = 0;
  int64_t asked = 0, failed_merges = 0, max_held = 0;
  std::set<std::string> keys_asked;
  bool asked_twice = false;

 protected:
  MeasureResult MeasureOne(const StageSpec& spec, int batch_size,
                           const MeasureSettings& settings) override {
    ++asked;
    asked_twice = !keys_asked.insert(spec.Key()).second || asked_twice;
    if (fail_merges_ && spec.strategy == Strategy::kMerge) {
      MeasureResult oom;
      oom.error = MeasureError::kOutOfMemory;
      oom.error_message = "test double: merge stages run out of memory";
      ++failed_merges;
      return oom;
    }
    return backend_->Measure(spec, batch_size, settings);
  }
  MeasureResult MeasureNetworkOne(const NetworkSpec& network, int batch_size,
                                  const MeasureSettings& settings) override {
    ++networks_asked;
    return backend_->MeasureNetwork(network, batch_size, settings);
  }

 public:
  int64_t networks_asked = 0;

 private:
  std::unique_ptr<devices::Backend> backend_;
  bool fail_merges_;
};

// ----------------------------------------------------------------- helpers

// Measures every stage: the search tests are about what is measured,
// stored and reused; lazy_measure_test.cc covers kLazy against it.
inline SearchOptions DefaultOptions(int batch = 1) {
  SearchOptions options;
  options.measure = MeasureMode::kAll;
  options.dp.max_group_size = 3;
  options.dp.max_groups = 8;
  options.dp.strategies = StrategySet::kBoth;
  options.batch_size = batch;
  return options;
}

// A search of `g` against a fresh in-memory profiling DB, every stage
// measured by a CountingMeasurer: for tests about what the search returns.
inline SearchOutcome SearchInMemory(const Graph& g, const SearchOptions& options) {
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  return RunSearch(g, g.name, options, *store, measurer);
}

// A fresh directory per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "cannot make a temp dir"; }
  std::string PathIn(const std::string& name) const { return (dir_.path() / name).string(); }

 private:
  ::ios::testing::TempDir dir_{"ios_search_test"};
};

// Where every node of `graph` runs: {block, stage index in block, group}.
struct Placement {
  int block = -1, stage = -1, group = -1, position = -1;
};

inline std::string NodeName(const Graph& g, NodeId id) { return g.node(id).name; }

// Checks that `schedule` runs every operator exactly once, in the block it
// belongs to, after its producers (earlier stage, or earlier in its group).
inline void ExpectValidSchedule(const Graph& g, const Schedule& schedule) {
  ASSERT_EQ(schedule.blocks.size(), g.blocks.size());
  std::vector<Placement> where(g.nodes.size());
  int seen = 0;
  for (size_t b = 0; b < schedule.blocks.size(); ++b) {
    const std::vector<NodeId> ops = g.blocks[b].Operators();
    const std::set<NodeId> in_block(ops.begin(), ops.end());
    for (size_t s = 0; s < schedule.blocks[b].size(); ++s) {
      const Stage& stage = schedule.blocks[b][s].stage;
      for (size_t gi = 0; gi < stage.groups.size(); ++gi) {
        for (size_t p = 0; p < stage.groups[gi].size(); ++p) {
          const NodeId id = stage.groups[gi][p];
          EXPECT_EQ(where[id].block, -1) << NodeName(g, id) << " scheduled twice";
          EXPECT_TRUE(in_block.count(id)) << NodeName(g, id) << " scheduled in block " << b;
          where[id] = {static_cast<int>(b), static_cast<int>(s), static_cast<int>(gi),
                       static_cast<int>(p)};
          ++seen;
        }
      }
    }
  }
  EXPECT_EQ(seen, g.OperatorCount());
  for (NodeId id = 1; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    const Placement& me = where[id];
    EXPECT_NE(me.block, -1) << NodeName(g, id) << " is in no stage";
    for (const Term& term : g.node(id).inputs) {
      for (const Slice& s : term) {
        if (s.producer == 0) continue;
        const Placement& producer = where[s.producer];
        const bool earlier =
            std::make_pair(producer.block, producer.stage) < std::make_pair(me.block, me.stage);
        const bool same_group_before = producer.block == me.block && producer.stage == me.stage &&
                                       producer.group == me.group &&
                                       producer.position < me.position;
        EXPECT_TRUE(earlier || same_group_before)
            << NodeName(g, id) << " does not run after its producer " << NodeName(g, s.producer);
      }
    }
  }
}

// Per block, each stage's strategy and groups: schedules as comparable values.
using StageList = std::vector<std::vector<std::pair<Strategy, std::vector<std::vector<NodeId>>>>>;

inline StageList StagesOf(const Schedule& schedule) {
  StageList out;
  for (const auto& block : schedule.blocks) {
    out.emplace_back();
    for (const ScheduledStage& s : block) out.back().emplace_back(s.stage.strategy, s.stage.groups);
  }
  return out;
}

inline StageList StagesOf(const std::vector<std::vector<Stage>>& blocks) {
  StageList out;
  for (const auto& block : blocks) {
    out.emplace_back();
    for (const Stage& s : block) out.back().emplace_back(s.strategy, s.groups);
  }
  return out;
}

}  // namespace ios::coordinator::testing
