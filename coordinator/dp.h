// The IOS dynamic program over one part of a block (MLSys 2021, Sec. 4):
//   cost[{}] = 0,  cost[S] = min over endings S' of S: cost[S - S'] + t(S').
// The state space and the candidate stages depend only on the graph and the
// options, never on latencies, so enumeration and solving are separate: the
// farm measures the stages in between. The enumerator does not know where
// latencies come from.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

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
  //! Largest part the DP handles (states are 64-bit masks).
  static constexpr int kMaxPartSize = 64;
};

//! The enumerated search space of one part, ready to be solved.
class PartSpace {
 public:
  //! Walks every state reachable from the whole part. `part` lists the
  //! operators in topological order (at most kMaxPartSize); edges from
  //! outside the part are ignored (they are satisfied by earlier parts).
  //! Throws ios::Error if the part is too large or options are invalid.
  static PartSpace Enumerate(const Graph& graph, const std::vector<NodeId>& part,
                             const DpOptions& options);

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
  Solution Solve(const std::vector<double>& stage_latency_ms) const;

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
  std::vector<State> states_;             // [0] is the empty state
  std::vector<Transition> transitions_;
  std::vector<uint32_t> solve_order_;     // every state after all its successors
  uint32_t root_ = 0;
  double schedule_count_ = 0;
  int width_ = 0;
};

//! One operator per stage, in topological order.
std::vector<Stage> SequentialSchedule(const std::vector<NodeId>& ops);
//! Repeatedly puts every ready operator into one concurrent stage, each in
//! its own group. `ops` must be a topologically ordered set closed under the
//! edges that matter (a block).
std::vector<Stage> GreedySchedule(const Graph& graph, const std::vector<NodeId>& ops);

}  // namespace ios::coordinator
