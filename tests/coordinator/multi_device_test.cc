#include "coordinator/multi_device.h"

#include <gtest/gtest.h>

#include <set>

#include "common/error.h"
#include "common/zoo.h"
#include "db/profile_store.h"
#include "tests/coordinator/search_testing.h"

namespace ios::coordinator {
namespace {

using testing::CountingMeasurer;
using testing::DefaultOptions;

TEST(MultiDeviceTest, ParsesIdenticalDevicesAndMeasuresOnTheFirst) {
  const auto parsed = [](const std::string& text) {
    const DeviceList list = ParseDeviceList(text, {0, 1});
    std::string all = list.measure_on + " |";
    for (const std::string& name : list.names) all += " " + name;
    return all;
  };
  EXPECT_EQ(parsed("sim:v100x2"), "sim:v100 | sim:v100 sim:v100");
  EXPECT_EQ(parsed("cpux2"), "cpu,threads=1,cpus=0 | cpu,threads=1,cpus=0 cpu,threads=1,cpus=1");
  EXPECT_EQ(parsed("cpu,threads=1,cpus=1;cpu,threads=1,cpus=0"),
            "cpu,threads=1,cpus=1 | cpu,threads=1,cpus=1 cpu,threads=1,cpus=0");
  EXPECT_EQ(parsed("sim:2080ti"), "sim:2080ti | sim:2080ti");
  for (const char* bad : {"", "sim:v100;sim:k80", "cpu;;cpu", "cpu;", "sim:v100x0",
                          "cpu,threads=1,cpus=0;cpu,threads=2,cpus=1"}) {
    EXPECT_THROW(ParseDeviceList(bad, {0, 1}), Error) << "'" << bad << "'";
  }
}

TEST(MultiDeviceTest, DagOfAGraphHasOneEdgePerProducerAndLeavesTheInputOut) {
  const Graph g = BuildZooModel("squeezenet");
  const hios::Dag dag = DagOfGraph(g);
  ASSERT_EQ(dag.ops(), g.OperatorCount());
  size_t pairs = 0;
  for (NodeId v = 1; v < static_cast<NodeId>(g.nodes.size()); ++v) {
    std::set<NodeId> producers;
    for (const Term& term : g.node(v).inputs) {
      for (const Slice& s : term) {
        if (s.producer > 0) producers.insert(s.producer);
      }
    }
    pairs += producers.size();
    for (hios::EdgeId e : dag.in_edges(v - 1)) {
      EXPECT_EQ(producers.count(dag.edge(e).src + 1), 1u) << g.node(v).name;
    }
  }
  EXPECT_EQ(static_cast<size_t>(dag.edge_count()), pairs);
}

TEST(MultiDeviceTest, SchedulesEveryOperatorOnceAndASecondRunMeasuresNothing) {
  const Graph g = BuildZooModel("randwire");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  MultiDeviceOptions options;
  options.devices = 4;
  const MultiDeviceOutcome first =
      ScheduleMultiDevice(g, options, DefaultOptions(), *store, measurer);
  EXPECT_NO_THROW(CheckMultiSchedule(g, first.schedule, "test"));
  // Operators with equal shapes share a measurement: distinct stages only.
  EXPECT_GT(first.stages_measured, 0);
  EXPECT_EQ(first.stages_measured, measurer.asked);
  EXPECT_EQ(first.stages_failed, 0);
  int operators = 0, used = 0;
  for (const DeviceLoad& load : first.loads) {
    operators += load.operators;
    used += load.operators > 0 ? 1 : 0;
  }
  EXPECT_EQ(operators, g.OperatorCount());
  EXPECT_GT(used, 1) << "randwire's wide cells spread over devices";
  EXPECT_FALSE(first.transfers.empty());
  EXPECT_LT(first.hios.final_ms, first.hios.one_device_ms);
  EXPECT_DOUBLE_EQ(first.predicted_ms, first.hios.final_ms);

  const int asked = measurer.asked;
  const MultiDeviceOutcome again =
      ScheduleMultiDevice(g, options, DefaultOptions(), *store, measurer);
  EXPECT_EQ(measurer.asked, asked);
  EXPECT_EQ(again.stages_measured, 0);
  EXPECT_EQ(again.schedule.device_of, first.schedule.device_of);
}

TEST(MultiDeviceTest, TheDpInsideDevicesNeverLosesToTheWindowAndItsStagesRun) {
  const Graph g = BuildZooModel("inception_v3");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  MultiDeviceOptions options;
  options.devices = 4;
  options.device_dp = false;
  const MultiDeviceOutcome window =
      ScheduleMultiDevice(g, options, DefaultOptions(), *store, measurer);
  EXPECT_FALSE(window.dp_ran);
  EXPECT_DOUBLE_EQ(window.predicted_ms, window.hios.final_ms);
  options.device_dp = true;
  const MultiDeviceOutcome dp = ScheduleMultiDevice(g, options, DefaultOptions(), *store, measurer);
  ASSERT_TRUE(dp.dp_ran);
  EXPECT_GT(dp.dp_segments, 0);
  EXPECT_LE(dp.dp_ms, dp.hios.final_ms);
  EXPECT_DOUBLE_EQ(dp.predicted_ms, dp.dp_ms);
  EXPECT_DOUBLE_EQ(dp.hios.final_ms, window.hios.final_ms);  // the same HIOS underneath
  EXPECT_NO_THROW(CheckMultiSchedule(g, dp.schedule, "test"));
  // Where the DP won, a device runs IOS stages: a chain or a merge inside one.
  bool ios_stage = false;
  for (const auto& list : dp.schedule.stages) {
    for (const Stage& stage : list) {
      for (const auto& group : stage.groups) ios_stage |= group.size() > 1;
      ios_stage |= stage.strategy == Strategy::kMerge;
    }
  }
  EXPECT_EQ(ios_stage, dp.dp_devices_improved > 0);
  RecordProperty("dp_devices_improved", dp.dp_devices_improved);
}

TEST(MultiDeviceTest, KeepingTheOneDeviceScheduleNeedsNoCopies) {
  const Graph g = BuildZooModel("squeezenet");
  auto store = db::ProfileStore::Open(":memory:");
  CountingMeasurer measurer;
  const SearchOutcome search = RunSearch(g, "squeezenet", DefaultOptions(), *store, measurer);
  MultiDeviceOptions options;
  MultiDeviceOutcome outcome = ScheduleMultiDevice(g, options, DefaultOptions(), *store, measurer);
  KeepOnOneDevice(g, search.ios, 1, outcome);
  EXPECT_NO_THROW(CheckMultiSchedule(g, outcome.schedule, "test"));
  EXPECT_TRUE(outcome.one_device_kept);
  EXPECT_TRUE(outcome.transfers.empty());
  EXPECT_TRUE(outcome.schedule.stages[1].empty());
  EXPECT_EQ(outcome.loads[0].operators, g.OperatorCount());
  EXPECT_DOUBLE_EQ(outcome.predicted_ms, search.ios.latency_ms);
}

}  // namespace
}  // namespace ios::coordinator
