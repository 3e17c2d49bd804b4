#pragma once
// The order of a part's operators with the least peak memory (Serenity,
// "Ordering Chaos", MLSys 2020): a dynamic program over the part's down-sets
// (the sets of operators run so far; Serenity's zero-indegree sets are their
// complements' minimal elements), keeping per down-set the prefix with the
// least peak. Kept tractable with the paper's adaptive soft budget: a
// threshold tau prunes every prefix over it, tau is bisected between a lower
// bound and a known order's peak, and each step has a state and a time limit.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/part_dag.h"
#include "memory/order_costs.h"

namespace ios::memory {

struct MemoryOrderOptions {
  //! How the optimum is searched for.
  enum class Engine {
    kBudgeted,   // the paper's: layered DP under a threshold, bisected
    kBestFirst,  // expands down-sets by least peak so far; stops at the full part
  };
  Engine engine = Engine::kBudgeted;
  //! Down-sets one DP step (or the best-first search) may keep.
  int64_t max_states_per_step = 4'000'000;
  //! Wall time one step may take (0: no limit; tests use states only, so
  //! their outcome does not depend on the machine).
  double step_seconds = 2.0;
  //! Thresholds tried before falling back.
  int max_steps = 20;
};

struct PartOrder {
  std::vector<int> ops;  // local ids, in execution order
  int64_t peak = 0;      // the order's peak, background excluded
  bool exact = false;    // false: a fallback order (why says which and why)
  int64_t states = 0;    // down-sets kept over all steps
  int steps = 0;         // thresholds tried (best-first: 1)
  double seconds = 0;
  std::string why;
};

//! The order of `dag`'s operators with the least peak under `costs`, or,
//! when every step of the budget runs out, the better of KahnOrder and
//! GreedyMemoryOrder with `exact` false and `why` saying so (the caller logs
//! it). Ties between orders of equal peak go to the first found, so the
//! result is deterministic when step_seconds is 0.
PartOrder OptimalPartOrder(const PartDag& dag, const OrderCosts& costs,
                           const MemoryOrderOptions& options = {});

//! Kahn's algorithm with a FIFO queue (sources, then each operator's newly
//! ready successors, in local id order): a TensorFlow Lite-style order.
std::vector<int> KahnOrder(const PartDag& dag);
//! At each step the ready operator with the least bytes while it runs, then
//! the least resident after it, then the lowest id.
std::vector<int> GreedyMemoryOrder(const PartDag& dag, const OrderCosts& costs);
//! The peak of `order` (a topological order of every operator), background
//! excluded.
int64_t PeakOfOrder(const OrderCosts& costs, std::span<const int> order);

}  // namespace ios::memory
