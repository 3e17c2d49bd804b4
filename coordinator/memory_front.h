// The latency/peak-memory trade-off of one network (ios-coordinator
// --memory-front, docs/memory.md "Memory-bounded IOS"): a sweep of
// memory-bounded searches between the least peak and the unconstrained
// IOS schedule's, all on one profiling DB, so each search measures only
// the stages the earlier ones did not. Each point is exact for its budget
// (memory_search.h); between two budgets the front is a step, not a line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "coordinator/search.h"

namespace ios::coordinator {

struct MemoryFrontOptions {
  //! Searched points: the unconstrained search, the least-peak one, and
  //! points - 2 budgets evenly between their peaks.
  int points = 6;
  static constexpr int kMinPoints = 2, kMaxPoints = 32;
  //! Also search at a budget of the sequential schedule's peak, when it
  //! lies between the two: the best schedule that fits where sequential does.
  bool at_sequential_peak = true;
};

struct MemoryFrontPoint {
  enum class Kind { kLeastPeak, kBudget, kSequentialPeak, kUnconstrained };
  Kind kind = Kind::kBudget;
  //! The budget searched under, bytes at the batch; 0 for the least-peak and
  //! the unconstrained searches.
  int64_t budget_bytes = 0;
  //! The DP's optimum of that search (SearchOutcome::ios): its latency is
  //! the sum of its stages' measured latencies, its peak ios-run's plan's.
  Schedule schedule;
  int64_t measured = 0;  // stages this search measured (the rest came from the DB)
  double search_s = 0;
  //! Another point is as fast with less memory, or faster with as little
  //! (or the same, listed earlier).
  bool dominated = false;
};
const char* ToString(MemoryFrontPoint::Kind kind);

struct MemoryFront {
  //! The unconstrained search, verified as the options given say (the
  //! other searches are not run end to end): the baselines come from it.
  SearchOutcome unconstrained;
  //! Every search, by increasing peak (ties: faster first, then by kind).
  std::vector<MemoryFrontPoint> points;
  //! Whether the least peak is exact (MemoryPlanInfo::least_exact).
  bool least_exact = true;
  int DominatedCount() const;
};

//! One search of the sweep starting: its index (0-based) of `count`.
struct MemoryFrontStep {
  int index = 0, count = 0;
  MemoryFrontPoint::Kind kind = MemoryFrontPoint::Kind::kBudget;
  int64_t budget_bytes = 0;  // as MemoryFrontPoint::budget_bytes
};

//! Searches the front of `graph` with `options` (its memory options are
//! ignored: each search sets its own). Throws what RunSearch throws and
//! ios::Error for front_options.points outside [kMinPoints, kMaxPoints].
MemoryFront SearchMemoryFront(const Graph& graph, const std::string& model,
                              const SearchOptions& options, const MemoryFrontOptions& front_options,
                              db::ProfileStore& store, Measurer& measurer,
                              const std::function<void(const MemoryFrontStep&)>& step = {},
                              const std::function<void(const MeasureProgress&)>& progress = {},
                              const std::function<void(const PlanProgress&)>& plan_progress = {});

//! Flags the dominated points of `points` (sorted as MemoryFront::points).
void MarkDominated(std::vector<MemoryFrontPoint>& points);

}  // namespace ios::coordinator
