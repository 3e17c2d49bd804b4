#pragma once
// What the memory-order search needs to know about one part of a network:
// how many bytes are live while each operator runs, given which operators of
// the part have run before it. The search (memory_order.h) knows nothing of
// tensors or buffers; the model behind this interface (memory_model.h) knows
// nothing of search. Bytes are at batch 1 (every term scales with the batch).

#include <cstdint>

namespace ios::memory {

struct StepCost {
  int64_t bytes = 0;           // live while the operator runs, background excluded
  int64_t resident_after = 0;  // live once it has run, background excluded
};

class OrderCosts {
 public:
  virtual ~OrderCosts() = default;

  //! Operators of the part, local ids 0..operators()-1 in topological order.
  virtual int operators() const = 0;
  //! Bytes live throughout the part that no operator of it touches (tensors
  //! of earlier parts read by later ones, the network's input).
  virtual int64_t Background() const = 0;
  //! Bytes live between steps once the operators in `done` have run.
  virtual int64_t Resident(uint64_t done) const = 0;
  //! Running local operator `op` right after `done`, whose Resident() is
  //! `resident_done` (passed in so a search keeps it per state and a model
  //! updates it in the time of the operator's own tensors).
  virtual StepCost Step(uint64_t done, int64_t resident_done, int op) const = 0;
  //! No order of the part has a peak (background excluded) below this.
  virtual int64_t LowerBound() const = 0;
};

}  // namespace ios::memory
