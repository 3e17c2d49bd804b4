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
#include <memory>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "common/part_dag.h"
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
  static constexpr int kMaxPartSize = PartDag::kMaxOperators;
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

  //! One path: the operators of `part` one per stage in `order` (local
  //! ids, a topological order of the part). Throws ios::Error otherwise.
  static PartSpace Sequence(const Graph& graph, const std::vector<NodeId>& part,
                            const std::vector<int>& order);

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

  // Schedules under a second, additive-free measure: a value per transition
  // (for the memory search, the bytes live while that stage runs after the
  // operators before it), where a schedule's value is the largest of its
  // transitions'. The enumeration knows nothing of what the values mean.

  //! `value(before, ending)` per transition, in transition order: `before`
  //! is the local mask of the operators run before the stage, `ending` the
  //! stage's.
  std::vector<int64_t> TransitionValues(
      const std::function<int64_t(uint64_t before, uint64_t ending)>& value) const;
  //! Solve over the transitions whose value is at most `cap` (an infinite
  //! latency when no schedule fits).
  Solution SolveWithin(const std::vector<double>& stage_latency_ms,
                       const std::vector<int64_t>& values, int64_t cap) const;
  //! The least value any schedule can have (its largest transition's).
  int64_t LeastValue(const std::vector<int64_t>& values) const;
  struct FrontPoint {
    int64_t value = 0;  // the schedule's largest transition value
    Solution solution;
  };
  //! This space with only the transitions `keep(before, ending)` accepts
  //! (masks as in TransitionValues), the states no longer reachable from
  //! the whole part and the stages no longer used dropped. Order is kept, so
  //! ties still go to the first ending enumerated. Every consumer of a space
  //! (Solve, the lazy search, verification) then sees only what is kept.
  //! When nothing of the whole part can reach the empty state, Solve gives
  //! an infinite latency.
  PartSpace Restricted(const std::function<bool(uint64_t before, uint64_t ending)>& keep) const;
  //! The latency/value trade-off: for each cap where SolveWithin's latency
  //! drops, the least such cap and its schedule, by increasing value (so
  //! decreasing latency); the first point has LeastValue, the last the
  //! unconstrained optimum. Exact: SolveWithin at O(points x log values)
  //! caps. Empty when no schedule has a finite latency.
  std::vector<FrontPoint> Front(const std::vector<double>& stage_latency_ms,
                                const std::vector<int64_t>& values) const;

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
  friend class PartSolver;

  // Solve, skipping the transitions whose value is over `cap` when
  // `values` is given.
  Solution SolveCapped(const std::vector<double>& stage_latency_ms,
                       const std::vector<int64_t>* values, int64_t cap) const;

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

//! PartSpace::Solve kept current while stage latencies change, for a search
//! that solves one part again after each few measurements (the lazy
//! search): Solve recomputes only the states whose cost or choice a changed
//! latency can reach. It gives, bit for bit, what PartSpace::Solve gives on
//! the same latencies: a recomputed state runs the same sums in the same
//! order, and a state left alone has the same minimum and the same first
//! ending reaching it (its chosen ending costs what it did, the others no
//! less). Holds the space by reference.
class PartSolver {
 public:
  //! Every latency infinite, nothing solved yet.
  explicit PartSolver(const PartSpace& space);

  int stage_count() const { return static_cast<int>(latency_.size()); }
  const std::vector<double>& latency() const { return latency_; }
  //! Sets stage `stage`'s latency; takes effect at the next Solve.
  void Set(int stage, double latency_ms);
  //! Brings the optimum up to date (from scratch the first time).
  void Solve();
  //! The optimum as of the last Solve.
  double latency_ms() const { return cost_[space_->root_]; }
  //! Its stages, in execution order (empty when no finite schedule).
  void StageSequence(std::vector<int>& out) const;
  //! PartSpace::StageSlack on the current latencies, from the last Solve's
  //! costs (one pass over the space instead of three); `out` is resized.
  void StageSlack(std::vector<double>& out) const;
  //! States recomputed by the last Solve (for tests and profiles).
  int64_t last_recomputed() const { return last_recomputed_; }
  //! States whose every ending was looked at, over all Solves.
  int64_t scans() const { return scans_; }

 private:
  //! Which states read each stage and each state: built once per space
  //! structure and shared by copies.
  struct Links {
    std::vector<uint32_t> order;                   // per state: its position in solve_order_
    std::vector<uint32_t> readers_begin, readers;  // per stage: states with an ending on it
    std::vector<uint32_t> preds_begin, preds;      // per state: states with an ending to it
  };
  //! True when its cost changed; `scan`: look at every ending (else only
  //! the chosen one became dearer).
  bool Recompute(uint32_t state, bool scan);
  void Enqueue(uint32_t state, bool scan);

  const PartSpace* space_;
  std::shared_ptr<const Links> links_;
  std::vector<double> latency_, cost_;
  std::vector<double> second_;  // per state: the least cost of an ending not chosen, or less
  std::vector<uint32_t> choice_;
  std::vector<int> changed_;            // stages Set since the last Solve
  std::vector<double> changed_before_;  // their latencies as of the last Solve
  std::vector<char> pending_;           // per stage: in changed_
  std::vector<char> queued_;            // 1: for the chosen ending; 2: for a scan of every ending
  std::vector<uint32_t> heap_;          // solve-order positions of queued states (a min-heap)
  mutable std::vector<double> done_;    // StageSlack's scratch
  bool solved_ = false;
  int64_t last_recomputed_ = 0, scans_ = 0;
};

//! One operator per stage, in topological order.
std::vector<Stage> SequentialSchedule(const std::vector<NodeId>& ops);
//! Repeatedly puts every ready operator into one concurrent stage, each in
//! its own group (at most limits::kMaxGroups per stage: more ready operators
//! wait for the next stage). `ops` must be a topologically ordered set closed under the
//! edges that matter (a block).
std::vector<Stage> GreedySchedule(const Graph& graph, const std::vector<NodeId>& ops);

}  // namespace ios::coordinator
