// Walks the DP state space of a search's parts ahead of the thread that
// plans them (PlanSearch), on a thread of its own: while the planning
// thread keys and interns one part's stages, the next parts are walked.
// The walks use only per-part budgets, so they never change the plan: the
// planning thread takes a walked space only where planning one part after
// another would have walked the same part to the same end, and walks again
// itself (with the budget that is left) where not.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "common/graph.h"
#include "coordinator/dp.h"

namespace ios::coordinator {

class PartWalker {
 public:
  //! Starts walking `parts[i]` for every i with `walk[i]`, in index order,
  //! with `options`. Borrows `graph` and `parts`, which must outlive it.
  PartWalker(const Graph& graph, const std::vector<std::vector<NodeId>>& parts,
             const std::vector<bool>& walk, const DpOptions& options);
  //! Stops after the walk under way (if any) and joins the thread.
  ~PartWalker();
  PartWalker(const PartWalker&) = delete;
  PartWalker& operator=(const PartWalker&) = delete;

  //! Part i's space, once its walk has ended; nullopt when it was not to be
  //! walked or its walk failed (over a budget, or any error: the caller
  //! walks it itself and meets the same error). Calls `progress`, from the
  //! calling thread, while it waits on a long walk. Each part once.
  std::optional<PartSpace> Take(size_t i, const DpProgressFn& progress);

 private:
  struct Slot {
    bool done = false;
    std::optional<PartSpace> space;
  };
  void Run(const std::stop_token& stop) noexcept;

  const Graph& graph_;
  const std::vector<std::vector<NodeId>>& parts_;
  const std::vector<bool> walk_;
  const DpOptions options_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Slot> slots_;
  std::optional<DpProgress> progress_;  // the walk under way, when it reported
  std::jthread thread_;                 // last: stopped and joined before the rest goes
};

}  // namespace ios::coordinator
