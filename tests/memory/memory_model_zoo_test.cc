// The memory model on the zoo: its peak is the plan's peak_live_bytes for
// the sequential and greedy schedules at batch 1 and 16, and the per-part
// costs of the blocks add up to it. The least-peak order of every zoo model
// is never worse than the baselines and its peak is the plan's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/zoo.h"
#include "coordinator/dp.h"
#include "exec/tensor_layout.h"
#include "memory/memory_model.h"
#include "memory/network_order.h"

namespace ios::memory {
namespace {

std::vector<std::vector<NodeId>> MemberSets(const std::vector<Stage>& stages) {
  std::vector<std::vector<NodeId>> sets;
  for (const Stage& stage : stages) {
    sets.emplace_back();
    for (const auto& group : stage.groups) {
      sets.back().insert(sets.back().end(), group.begin(), group.end());
    }
  }
  return sets;
}

struct Schedules {
  std::vector<Stage> sequential, greedy;
};

Schedules BlockByBlock(const Graph& g) {
  Schedules s;
  for (const Block& block : g.blocks) {
    for (Stage& stage : coordinator::SequentialSchedule(block.Operators())) {
      s.sequential.push_back(std::move(stage));
    }
    for (Stage& stage : coordinator::GreedySchedule(g, block.Operators())) {
      s.greedy.push_back(std::move(stage));
    }
  }
  return s;
}

class ZooMemoryTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooMemoryTest, PeakEqualsThePlanForSequentialAndGreedy) {
  const Graph g = BuildZooModel(GetParam());
  const Schedules s = BlockByBlock(g);
  for (const auto* stages : {&s.sequential, &s.greedy}) {
    const int64_t plan = exec::PlanMemory(g, *stages).peak_live_bytes;
    for (int batch : {1, 16}) {
      EXPECT_EQ(PeakOf(g, MemberSets(*stages), batch), plan * batch)
          << (stages == &s.sequential ? "sequential" : "greedy") << " at batch " << batch;
    }
  }
}

// Parts: the blocks' explicit parts, or the blocks.
TEST_P(ZooMemoryTest, BlockPartsAddUpToThePeakOfTheSequentialSchedule) {
  const Graph g = BuildZooModel(GetParam());
  std::vector<std::vector<NodeId>> parts;
  for (const Block& block : g.blocks) {
    if (block.parts.empty()) {
      parts.push_back(block.Operators());
    } else {
      parts.insert(parts.end(), block.parts.begin(), block.parts.end());
    }
  }
  const size_t largest =
      std::max_element(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
        return a.size() < b.size();
      })->size();
  if (largest > 64) GTEST_SKIP() << "a part of " << largest << " operators (at most 64)";
  const exec::TensorLayout layout = exec::LayoutTensors(g);
  int64_t peak = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const PartMemory pm(layout, parts, k);
    uint64_t done = 0;
    int64_t resident = pm.Resident(0), part_peak = 0;
    for (int u = 0; u < pm.operators(); ++u) {
      const StepCost step = pm.Step(done, resident, u);
      part_peak = std::max(part_peak, step.bytes);
      done |= uint64_t{1} << u;
      resident = step.resident_after;
    }
    EXPECT_LE(pm.LowerBound(), part_peak) << "part " << k;
    peak = std::max(peak, pm.Background() + part_peak);
  }
  EXPECT_EQ(peak, PeakOf(g, MemberSets(BlockByBlock(g).sequential), 1));
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooMemoryTest,
                         ::testing::Values("inception_v3", "squeezenet", "nasnet", "randwire"));

// Every zoo model, the generated ones included, under both models.
class ZooNetworkOrderTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooNetworkOrderTest, LeastPeakOrderIsNeverWorseThanKahnNodeOrderOrGreedy) {
  const Graph g = BuildZooModel(GetParam());
  // NASNet's search takes about a second a model: CI runs it once.
  std::vector<MemoryModel> models{MemoryModel::kPlan};
  if (g.OperatorCount() < 300) models.push_back(MemoryModel::kPerNode);
  for (MemoryModel model : models) {
    SCOPED_TRACE(model == MemoryModel::kPlan ? "plan" : "per-node");
    NetworkOrderOptions options;
    options.model = model;
    options.batch = 2;
    const NetworkOrder found = OptimalNetworkOrder(g, options);
    const std::vector<Stage> stages = found.Stages();
    ASSERT_EQ(stages.size(), static_cast<size_t>(g.OperatorCount()));
    EXPECT_EQ(found.peak_bytes, PeakOf(g, MemberSets(stages), 2, model));
    if (model == MemoryModel::kPlan) {
      EXPECT_EQ(found.peak_bytes, exec::PlanMemory(g, stages).peak_live_bytes * 2);
    }
    EXPECT_LE(found.peak_bytes, found.kahn_peak_bytes);
    EXPECT_LE(found.peak_bytes, found.node_order_peak_bytes);
    EXPECT_LE(found.peak_bytes, found.greedy_peak_bytes);
    for (const PartOrderRecord& part : found.parts) {
      EXPECT_TRUE(part.exact) << "part of block " << part.block << ": " << part.why;
    }
  }
}

std::vector<std::string> ZooNames() {
  std::vector<std::string> names;
  for (const ZooEntry& entry : ZooModels()) names.push_back(entry.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooNetworkOrderTest, ::testing::ValuesIn(ZooNames()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

}  // namespace
}  // namespace ios::memory
