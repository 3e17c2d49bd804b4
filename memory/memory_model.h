#pragma once
// How many activation bytes are live while a network runs under an order or
// a stage schedule. A buffer (exec/tensor_layout.h) is live in a stage from
// the first stage that runs an operator touching it to the last one (the
// input throughout, the output to the end); a stage's bytes are its live
// buffers' plus its temps'. With the kPlan model this is exactly the
// peak_live_bytes of ios-run's memory plan for every schedule without merge
// stages (with merges the plan stacks members into one buffer and gathers
// their input once; the model keeps them apart). float32: 4 bytes a value.

#include <cstdint>
#include <vector>

#include "common/graph.h"
#include "exec/tensor_layout.h"
#include "memory/order_costs.h"

namespace ios::memory {

enum class MemoryModel {
  //! What ios-run allocates: exec's layout (concatenation views, aliased
  //! identities, gather and chain temps; the input pinned).
  kPlan,
  //! Serenity's: one buffer per operator output, live from its producer to
  //! its last reader, no temps; the input freed after its last reader;
  //! outputs nobody reads kept to the end.
  kPerNode,
};

//! The buffers `model` sees in `graph` (kPlan: exec::LayoutTensors(graph)).
exec::TensorLayout ModelLayout(const Graph& graph, MemoryModel model);

//! Peak bytes at `batch` over `stages`, each the set of operators run
//! concurrently (a merge stage counts as its members). Throws ios::Error
//! when the stages do not run every operator once after its producers
//! (a producer in the same stage is allowed: lanes chain operators).
int64_t PeakOf(const Graph& graph, const std::vector<std::vector<NodeId>>& stages, int batch,
               MemoryModel model = MemoryModel::kPlan);
//! The same over a layout (from ModelLayout or exec::LayoutTensors).
int64_t PeakOf(const exec::TensorLayout& layout, const std::vector<std::vector<NodeId>>& stages,
               int batch);

//! One part of a network whose parts run one after another, in the order
//! given: what the memory-order search needs (OrderCosts) plus the bytes of
//! a concurrent stage (for the IOS DP). Local id i is part[i]; parts list
//! their operators in topological order. Bytes at batch 1.
//! A network's peak over an order that runs the parts in sequence is
//! max over parts of Background() + the largest Step().bytes of the part.
class PartMemory final : public OrderCosts {
 public:
  //! The part `parts[index]` of `layout`'s network. `parts` must hold every
  //! operator touching a buffer exactly once and `parts[index]` at most 64;
  //! throws ios::Error naming the operator or part otherwise. (The costs
  //! hold for any order; the search relies on parts listed topologically.)
  PartMemory(const exec::TensorLayout& layout, const std::vector<std::vector<NodeId>>& parts,
             size_t index);

  int operators() const override { return static_cast<int>(nodes_.size()); }
  int64_t Background() const override { return background_; }
  int64_t Resident(uint64_t done) const override;
  StepCost Step(uint64_t done, int64_t resident_done, int op) const override;
  int64_t LowerBound() const override { return lower_bound_; }

  //! Bytes live (background excluded) while the operators of `stage` run
  //! concurrently right after `done`. Splitting a stage never costs: for x
  //! of `stage` whose producers are done, neither StageBytes(done, {x}) nor
  //! StageBytes(done | x, stage \ x) is above it.
  int64_t StageBytes(uint64_t done, uint64_t stage) const;
  //! The part's operators: node id of each local id.
  const std::vector<NodeId>& nodes() const { return nodes_; }

 private:
  // A buffer some operator of the part touches.
  struct Local {
    int64_t bytes = 0;
    uint64_t touch = 0;      // local operators touching it
    bool started = false;    // live before the part (input, earlier writers)
    bool continues = false;  // live after it (output, later readers)
  };

  std::vector<NodeId> nodes_;
  std::vector<Local> locals_;
  std::vector<std::vector<int>> locals_of_;  // per local operator: indices into locals_
  int64_t background_ = 0;
  int64_t lower_bound_ = 0;
};

}  // namespace ios::memory
