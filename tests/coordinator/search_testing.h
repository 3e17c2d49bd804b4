// Shared by the coordinator's search and schedule-file tests: a measurer
// double over the simulated V100, default options, a temp-dir fixture.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "coordinator/measurer.h"
#include "coordinator/search.h"
#include "tests/testing/process.h"
#include "worker/sim_backend.h"

namespace ios::coordinator::testing {

// ------------------------------------------------------------ test doubles

// Measures on the simulated V100 and counts what it was asked to measure.
// With `fail_merges`, every merge stage fails with out-of-memory instead.
class CountingMeasurer final : public Measurer {
 public:
  explicit CountingMeasurer(bool fail_merges = false)
      : inner_(MakeLocalMeasurer(worker::CreateSimBackend("v100"))), fail_merges_(fail_merges) {}

  const DeviceInfo& Device() const override { return inner_->Device(); }

  void MeasureAll(const std::vector<const StageSpec*>& specs, int batch_size,
                  const MeasureSettings& settings,
                  const std::function<void(std::span<const IndexedResult>)>& on_results) override {
    ++calls;
    asked += static_cast<int64_t>(specs.size());
    std::vector<const StageSpec*> pass;
    std::vector<size_t> index;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (fail_merges_ && specs[i]->strategy == Strategy::kMerge) {
        MeasureResult oom;
        oom.error = MeasureError::kOutOfMemory;
        oom.error_message = "test double: merge stages run out of memory";
        ++failed_merges;
        const IndexedResult failed{i, oom};
        on_results({&failed, 1});
      } else {
        pass.push_back(specs[i]);
        index.push_back(i);
      }
    }
    inner_->MeasureAll(pass, batch_size, settings, [&](std::span<const IndexedResult> results) {
      for (IndexedResult r : results) {
        r.index = index.at(r.index);
        on_results({&r, 1});
      }
    });
  }

  int calls = 0;
  int64_t asked = 0, failed_merges = 0;

 private:
  std::unique_ptr<Measurer> inner_;
  bool fail_merges_;
};

// ----------------------------------------------------------------- helpers

inline SearchOptions DefaultOptions(int batch = 1) {
  SearchOptions options;
  options.dp.max_group_size = 3;
  options.dp.max_groups = 8;
  options.dp.strategies = StrategySet::kBoth;
  options.batch_size = batch;
  return options;
}

// A fresh directory per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "cannot make a temp dir"; }
  std::string PathIn(const std::string& name) const { return (dir_.path() / name).string(); }

 private:
  ::ios::testing::TempDir dir_{"ios_search_test"};
};

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
