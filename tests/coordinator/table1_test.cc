// The IOS paper's Table 1: for the largest block of each benchmark network,
// with the concurrent strategy and no pruning, the number of operators, the
// width, the transitions and the schedules the DP walks. These figures come
// from the reference implementation's own code, so they must match exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/zoo.h"
#include "coordinator/dp.h"

namespace ios::coordinator {
namespace {

struct Table1Row {
  std::string model;
  int operators, width;
  int64_t transitions;
  double schedules;
};

// The largest part of the model (explicit parts where the model has them,
// otherwise whole blocks); among equally large ones, the one with the most
// transitions, as the paper reports the hardest block.
PartSpace LargestPart(const Graph& g, const DpOptions& options) {
  size_t largest = 0;
  std::vector<std::vector<NodeId>> parts;
  for (const Block& b : g.blocks) {
    for (auto& p : b.parts.empty() ? std::vector<std::vector<NodeId>>{b.Operators()} : b.parts) {
      largest = std::max(largest, p.size());
      parts.push_back(p);
    }
  }
  std::optional<PartSpace> best;
  for (const auto& p : parts) {
    if (p.size() != largest) continue;
    PartSpace space = PartSpace::Enumerate(g, p, options);
    if (!best || space.transition_count() > best->transition_count()) best = std::move(space);
  }
  return std::move(*best);
}

class Table1Test : public ::testing::TestWithParam<Table1Row> {};

TEST_P(Table1Test, LargestBlockCountsMatchThePaper) {
  const Table1Row& row = GetParam();
  const Graph g = BuildZooModel(row.model);
  DpOptions unpruned;
  unpruned.max_group_size = DpOptions::kMaxPartSize;
  unpruned.max_groups = DpOptions::kMaxPartSize;
  unpruned.strategies = StrategySet::kParallel;
  const PartSpace space = LargestPart(g, unpruned);
  EXPECT_EQ(space.operator_count(), row.operators);
  EXPECT_EQ(space.width(), row.width);
  EXPECT_EQ(space.transition_count(), row.transitions);
  // The paper prints three significant digits.
  const double rel = std::abs(space.schedule_count() - row.schedules) / row.schedules;
  EXPECT_LT(rel, 0.005) << space.schedule_count();
}

INSTANTIATE_TEST_SUITE_P(Paper, Table1Test,
                         ::testing::Values(Table1Row{"inception_v3", 11, 6, 4871, 3.76e6},
                                           Table1Row{"randwire", 33, 8, 1170663, 9.20e22},
                                           Table1Row{"nasnet", 18, 8, 307841, 7.15e12},
                                           Table1Row{"squeezenet", 6, 3, 51, 131}),
                         [](const auto& param_info) { return param_info.param.model; });

}  // namespace
}  // namespace ios::coordinator
