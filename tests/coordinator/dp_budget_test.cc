// The DP's budgets: checked while walking (or refused up front from the
// widest antichain), inclusive, validated; ids that never wrap; the greedy
// space the fallback uses; and every zoo part inside the default budgets.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "common/error.h"
#include "common/zoo.h"
#include "coordinator/dp.h"
#include "coordinator/search.h"
#include "tests/coordinator/wide_models.h"
#include "tests/testing/sanitizers.h"

namespace ios::coordinator {
namespace {

using testing::WideBlock;

DpOptions Unlimited() {
  DpOptions o;
  o.max_states = o.max_transitions = o.max_stages = DpOptions::kMaxBudget;
  return o;
}

// Runs `f` and returns the budget it went over, if any.
template <typename F>
std::optional<DpBudget> BudgetHit(F f) {
  try {
    f();
  } catch (const DpBudgetExceeded& e) {
    return e.budget();
  }
  return std::nullopt;
}

TEST(DpBudgetTest, AWideBlockIsRefusedUpFrontByItsAntichainWithoutWalking) {
  const Graph g = WideBlock(40);
  try {
    PartSpace::Enumerate(g, g.blocks[0].Operators(), DpOptions{});
    FAIL() << "a block of 40 independent convolutions fit the default budgets";
  } catch (const DpBudgetExceeded& e) {
    EXPECT_EQ(e.budget(), DpBudget::kStates);
    EXPECT_EQ(e.limit(), DpOptions::kDefaultMaxStates);
    EXPECT_NE(std::string(e.what()).find("at least 1.1e+12 states"), std::string::npos) << e.what();
  }
}

// Three chains of four: the antichain bound (width 3) is small, the walk
// is not, so only the running count can stop it.
Graph ThreeChains() {
  Graph g = WideBlock(3, 4);
  return g;
}

TEST(DpBudgetTest, BudgetsAreInclusiveAndEachStopsTheWalk) {
  const Graph g = ThreeChains();
  const std::vector<NodeId> ops = g.blocks[0].Operators();
  const PartSpace full = PartSpace::Enumerate(g, ops, Unlimited());
  ASSERT_GT(full.transition_count(), 100);
  DpOptions exact = Unlimited();
  exact.max_states = full.state_count();
  exact.max_transitions = full.transition_count();
  exact.max_stages = full.stage_count();
  EXPECT_EQ(BudgetHit([&] { PartSpace::Enumerate(g, ops, exact); }), std::nullopt);
  for (DpBudget budget : {DpBudget::kStates, DpBudget::kTransitions, DpBudget::kStages}) {
    DpOptions tight = exact;
    int64_t& limit = budget == DpBudget::kStates        ? tight.max_states
                     : budget == DpBudget::kTransitions ? tight.max_transitions
                                                        : tight.max_stages;
    limit -= 1;
    EXPECT_EQ(BudgetHit([&] { PartSpace::Enumerate(g, ops, tight); }), budget) << ToString(budget);
  }
}

TEST(DpBudgetTest, BudgetsOutsideTheirRangeAreRejected) {
  const Graph g = ThreeChains();
  const std::vector<NodeId> ops = g.blocks[0].Operators();
  for (int64_t bad : {int64_t{0}, int64_t{-1}, DpOptions::kMaxBudget + 1}) {
    DpOptions o;
    o.max_transitions = bad;
    EXPECT_THROW(PartSpace::Enumerate(g, ops, o), Error) << bad;
  }
}

TEST(DpBudgetTest, NarrowIdThrowsInsteadOfWrapping) {
  constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
  EXPECT_EQ(NarrowId(kMax, "state"), kMax);
  EXPECT_EQ(NarrowId(0, "state"), 0u);
  try {
    NarrowId(kMax + 1, "transition");
    FAIL() << "2^32 narrowed to " << static_cast<uint32_t>(kMax + 1);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("transition id 4294967296 does not fit"),
              std::string::npos)
        << e.what();
  }
}

TEST(DpBudgetTest, GreedySpaceHasOnePathAndItIsTheGreedySchedule) {
  const Graph g = WideBlock(5, 3);
  const std::vector<NodeId> ops = g.blocks[0].Operators();
  const PartSpace space = PartSpace::Greedy(g, ops);
  EXPECT_EQ(space.schedule_count(), 1.0);
  const PartSpace::Solution solution = space.Solve(std::vector<double>(space.stage_count(), 1.0));
  std::vector<Stage> stages;
  for (int id : solution.stage_sequence) stages.push_back(space.stage(id));
  const std::vector<Stage> greedy = GreedySchedule(g, ops);
  ASSERT_EQ(stages.size(), greedy.size());
  for (size_t i = 0; i < stages.size(); ++i) {
    EXPECT_EQ(stages[i].strategy, greedy[i].strategy) << "stage " << i;
    EXPECT_EQ(stages[i].groups, greedy[i].groups) << "stage " << i;
  }
}

// A 130-wide block's greedy baseline must stay measurable: no stage wider
// than a worker accepts (the wire's group limit).
TEST(DpBudgetTest, GreedyStagesNeverExceedTheGroupsAWorkerAccepts) {
  const Graph g = WideBlock(130);
  const std::vector<Stage> greedy = GreedySchedule(g, g.blocks[0].Operators());
  std::vector<size_t> widths;
  for (const Stage& stage : greedy) widths.push_back(stage.groups.size());
  EXPECT_EQ(widths, (std::vector<size_t>{64, 64, 2, 1}));
}

// The defaults keep every model of the IOS paper exact, pruned (r=3 s=8) and
// unpruned, with every strategy set (also what tests/coordinator/table1_test.cc
// needs). Not the generated ones: a random RandWire draw may be wider.
TEST(DpBudgetTest, EveryZooPartFitsTheDefaultBudgets) {
  for (const ZooEntry& model : ZooModels()) {
    if (model.generated) continue;
    const Graph g = BuildZooModel(model.name);
    for (bool pruned : {true, false}) {
      // Unpruned walks take minutes sanitized; the plain build checks them.
      if (!pruned && ::ios::testing::kSanitized) continue;
      DpOptions o;
      if (!pruned) o.max_group_size = o.max_groups = DpOptions::kMaxPartSize;
      for (const Block& block : g.blocks) {
        for (const auto& part : PartsOf(g, block, SearchOptions{}.max_part_size)) {
          EXPECT_EQ(BudgetHit([&] { PartSpace::Enumerate(g, part, o); }), std::nullopt)
              << model.name << (pruned ? " r=3 s=8" : " unpruned");
        }
      }
    }
  }
}

}  // namespace
}  // namespace ios::coordinator
