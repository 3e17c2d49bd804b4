#pragma once
// The memory side of a search (issue 24, docs/memory.md): peak activation
// memory as a budget (--memory-budget) or as the objective (--objective
// memory). A stage's bytes depend on what ran before it, so a budget is a
// cap on each DP transition: every part's space is restricted to the
// transitions under the cap (PartSpace::Restricted) before anything is
// measured, and the search goes on as usual on what is left, exact. With
// parts run one after another, the network's peak is the largest over parts
// of the bytes live around the part (its background) plus the part's own.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "coordinator/dp.h"
#include "exec/tensor_layout.h"

namespace ios::coordinator {

struct MemoryOptions {
  enum class Objective {
    kLatency,  // the fastest schedule (under budget_bytes when set)
    kMemory,   // the fastest of the schedules with the least peak
  };
  //! Peak activation bytes at the search's batch size; 0: no budget.
  int64_t budget_bytes = 0;
  Objective objective = Objective::kLatency;
  bool active() const { return budget_bytes > 0 || objective == Objective::kMemory; }
};
const char* ToString(MemoryOptions::Objective objective);

//! "123", "64K", "1.5M", "2G" (K, M, G: powers of 1024) as bytes. Throws
//! ios::Error saying what was expected for anything else, zero or less, or
//! beyond 2^62 bytes.
int64_t ParseByteSize(const std::string& text);

//! What a search with a memory budget or objective decided (bytes at batch
//! 1 unless said otherwise).
struct MemoryPlanInfo {
  bool active = false;
  //! Least peak of any schedule of the search's parts (the least-peak order
  //! of each part: no stage schedule peaks lower), and whether every part's
  //! order search was exact (else it is the peak of a known order: an upper
  //! bound).
  int64_t least_peak = 0;
  bool least_exact = true;
  //! The cap the DP honoured: the budget per sample, or least_peak.
  int64_t cap = 0;
  //! Parts whose DP pieces had no schedule under the cap and were given
  //! their least-peak order (one operator per stage).
  int memory_order_parts = 0;
  std::vector<std::string> warnings;
};

//! The bytes model of one search: built once per graph.
class MemoryCaps {
 public:
  explicit MemoryCaps(const Graph& graph);

  //! Background and the least peak (background included) of `ops` run after
  //! the operators marked in `ran` (by node id), with its order (local ids)
  //! and whether the order search was exact.
  struct PartLeast {
    int64_t background = 0, peak = 0;
    std::vector<int> order;
    bool exact = true;
  };
  PartLeast Least(const std::vector<NodeId>& ops, const std::vector<char>& ran) const;

  //! `space` (of `ops`, run after `ran`) without the transitions whose
  //! bytes, background included, exceed `cap`.
  PartSpace Restrict(const PartSpace& space, const std::vector<NodeId>& ops,
                     const std::vector<char>& ran, int64_t cap) const;

 private:
  const Graph& graph_;
  exec::TensorLayout layout_;
};

//! A search's parts under a memory budget or objective: the bytes model,
//! what ran before each part, and each part's least-peak order.
struct MemoryBudget {
  std::optional<MemoryCaps> caps;             // empty: no budget or objective
  std::vector<std::vector<char>> ran_before;  // per part, by node id
  std::vector<MemoryCaps::PartLeast> least;   // per part
};

//! Plans `parts` (run one after another, in order) under `options` at
//! `batch`: fills `info` (the least peak, the cap; a budget below the least
//! peak is raised to it, with a warning line in info.warnings, logged).
//! Returns an empty MemoryBudget when options are inactive.
MemoryBudget PlanMemoryBudget(const Graph& graph, const std::vector<std::vector<NodeId>>& parts,
                              int batch, const MemoryOptions& options, MemoryPlanInfo& info);

//! Peak activation bytes of `stages` (each a set of operators run
//! concurrently) at `batch`, by the kPlan model (what ios-run allocates for
//! a schedule without merge stages).
int64_t PeakBytes(const Graph& graph, const std::vector<Stage>& stages, int batch);

}  // namespace ios::coordinator
