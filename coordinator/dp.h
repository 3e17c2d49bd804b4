// The IOS dynamic program over one part of a block (MLSys 2021, Sec. 4):
//   cost[{}] = 0,  cost[S] = min over endings S' of S: cost[S - S'] + t(S').
// The state space and the candidate stages depend only on the graph and the
// options, never on latencies, so enumeration and solving are separate: the
// farm measures the stages in between. The enumerator does not know where
// latencies come from.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "common/stage.h"

namespace ios::coordinator {

enum class StrategySet { kParallel, kMerge, kBoth };
const char* ToString(StrategySet strategies);

struct DpOptions {
  //! r: at most this many operators per group of a concurrent stage.
  int max_group_size = 3;
  //! s: at most this many groups per concurrent stage.
  int max_groups = 8;
  StrategySet strategies = StrategySet::kBoth;
  //! Budgets per part, checked while the state space is walked (before any
  //! memory is spent on what lies beyond them): non-empty states, transitions
  //! (state, ending) and distinct candidate stages. Going over one throws
  //! DpBudgetExceeded. The defaults keep every zoo model exact, unpruned too
  //! (largest part: RandWire unpruned, 5,420 states, 1,194,825 transitions,
  //! 204,340 stages) and bound one part's walk to ~1 s and ~150 MB.
  int64_t max_states = kDefaultMaxStates;
  int64_t max_transitions = kDefaultMaxTransitions;
  int64_t max_stages = kDefaultMaxStages;
  static constexpr int64_t kDefaultMaxStates = 1'000'000;
  static constexpr int64_t kDefaultMaxTransitions = 2'000'000;
  static constexpr int64_t kDefaultMaxStages = 250'000;
  //! Largest accepted budget: every id stays far inside 32 bits.
  static constexpr int64_t kMaxBudget = std::numeric_limits<int32_t>::max();
  //! Largest part the DP handles (states are 64-bit masks).
  static constexpr int kMaxPartSize = 64;
};

//! Which budget of DpOptions a part went over.
enum class DpBudget { kStates, kTransitions, kStages };
const char* ToString(DpBudget budget);

//! Thrown by PartSpace::Enumerate when a part needs more than a budget
//! allows: either counted during the walk, or known before it from a lower
//! bound (an antichain of w operators has at least 2^w states).
class DpBudgetExceeded : public Error {
 public:
  DpBudgetExceeded(DpBudget budget, int64_t limit, double needed, bool lower_bound, int operators);
  DpBudget budget() const { return budget_; }
  int64_t limit() const { return limit_; }

 private:
  DpBudget budget_;
  int64_t limit_;
};

//! How far the walk of one part has got; see PartSpace::Enumerate.
struct DpProgress {
  int operators = 0;
  int64_t states = 0, transitions = 0, stages = 0;
  double elapsed_s = 0;
};
using DpProgressFn = std::function<void(const DpProgress&)>;

//! Narrows a count to a 32-bit state, stage or transition id. Throws
//! ios::Error naming `what` when it does not fit: ids never wrap.
uint32_t NarrowId(uint64_t value, const char* what);

//! The enumerated search space of one part, ready to be solved.
class PartSpace {
 public:
  //! Walks every state reachable from the whole part. `part` lists the
  //! operators in topological order (at most kMaxPartSize); edges from
  //! outside the part are ignored (they are satisfied by earlier parts).
  //! Throws DpBudgetExceeded as soon as the part is known to exceed a
  //! budget of `options`, ios::Error if the part is too large or options are
  //! invalid. `progress`, if set, is called from this thread at most once a
  //! second while a long walk goes on.
  static PartSpace Enumerate(const Graph& graph, const std::vector<NodeId>& part,
                             const DpOptions& options, const DpProgressFn& progress = {});
  //! The fallback for a part over budget: a space with one path, the greedy
  //! schedule (GreedySchedule below, restricted to the part).
  static PartSpace Greedy(const Graph& graph, const std::vector<NodeId>& part);

  //! This space for another part of the same structure (equal
  //! StageKeyer::OrderedKey): the same states and stages, over `part`'s
  //! operators, without walking it again.
  PartSpace Rebound(std::vector<NodeId> part) const {
    if (part.size() != part_.size()) throw Error("PartSpace::Rebound: the parts differ in size");
    PartSpace copy = *this;
    copy.part_ = std::move(part);
    return copy;
  }

  //! Number of distinct candidate stages (by strategy and operator set);
  //! stage ids are 0..stage_count()-1.
  int stage_count() const { return static_cast<int>(stages_.size()); }
  //! Candidate stage `id` in terms of the graph's node ids.
  Stage stage(int id) const;
  //! Same, reusing `out`'s storage (for hot loops over every stage).
  void FillStage(int id, Stage& out) const;
  int64_t state_count() const { return static_cast<int64_t>(states_.size()) - 1; }  // non-empty
  int64_t transition_count() const { return static_cast<int64_t>(transitions_.size()); }
  //! Number of distinct schedules (paths from the full part to the empty set).
  double schedule_count() const { return schedule_count_; }
  //! Largest number of groups in any concurrent ending (the block's width
  //! when nothing is pruned).
  int width() const { return width_; }
  int operator_count() const { return static_cast<int>(part_.size()); }

  struct Solution {
    double latency_ms = std::numeric_limits<double>::infinity();
    std::vector<int> stage_sequence;  // stage ids, in execution order
  };
  //! Runs the DP on a latency per stage (infinity: failed or unusable).
  //! Ties go to the first ending enumerated, whatever the other values:
  //! the lazy search relies on that (docs/search-cost.md).
  Solution Solve(const std::vector<double>& stage_latency_ms) const;
  //! Per stage: how much more than the optimum the best schedule through
  //! it costs (0 on an optimal schedule, up to rounding; infinity when no
  //! finite schedule uses it). The lazy search measures the stages whose
  //! bounds leave the least slack first.
  std::vector<double> StageSlack(const std::vector<double>& stage_latency_ms) const;

 private:
  struct State {
    uint64_t mask = 0;
    uint32_t first_transition = 0, transition_end = 0;
  };
  struct Transition {
    uint32_t stage = 0;
    uint32_t next_state = 0;
  };
  // A stage kept as its operator set: the grouping follows from the graph.
  struct CompactStage {
    uint64_t ops = 0;
    Strategy strategy = Strategy::kParallel;
  };
  class Builder;

  std::vector<NodeId> part_;
  std::vector<uint64_t> closure_;  // per local op: its descendants in the part, itself included
  std::vector<CompactStage> stages_;
  std::vector<State> states_;  // [0] is the empty state
  std::vector<Transition> transitions_;
  std::vector<uint32_t> solve_order_;  // every state after all its successors
  uint32_t root_ = 0;
  double schedule_count_ = 0;
  int width_ = 0;
};

//! One operator per stage, in topological order.
std::vector<Stage> SequentialSchedule(const std::vector<NodeId>& ops);
//! Repeatedly puts every ready operator into one concurrent stage, each in
//! its own group (at most limits::kMaxGroups per stage: more ready operators
//! wait for the next stage). `ops` must be a topologically ordered set closed under the
//! edges that matter (a block).
std::vector<Stage> GreedySchedule(const Graph& graph, const std::vector<NodeId>& ops);

}  // namespace ios::coordinator
