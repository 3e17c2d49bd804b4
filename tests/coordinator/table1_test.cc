// The IOS paper's Table 1: for the largest block of each benchmark network,
// with the concurrent strategy and no pruning, the number of operators, the
// width, the transitions and the schedules the DP walks. These figures come
// from the reference implementation's own code, so they must match exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

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

// The part the paper reports: the widest one (explicit parts where the
// model has them, otherwise whole blocks), then the largest, then the one
// with the most transitions. NASNet's stem cell has more operators (21) but
// is narrower (d=7) than the first cell of a stack (n=18, d=8).
PartSpace HardestPart(const Graph& g, const DpOptions& options) {
  std::optional<PartSpace> best;
  auto rank = [](const PartSpace& s) {
    return std::tuple(s.width(), s.operator_count(), s.transition_count());
  };
  for (const Block& b : g.blocks) {
    for (auto& p : b.parts.empty() ? std::vector<std::vector<NodeId>>{b.Operators()} : b.parts) {
      if (p.size() < 6) continue;  // cannot be the hardest; keeps the test fast
      PartSpace space = PartSpace::Enumerate(g, p, options);
      if (!best || rank(space) > rank(*best)) best = std::move(space);
    }
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
  const PartSpace space = HardestPart(g, unpruned);
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
