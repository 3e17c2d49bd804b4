#pragma once
// One part of a network (at most 64 operators) as bit masks over local ids:
// the representation every search over a part's down-sets shares (the IOS DP
// in coordinator/dp.h, the memory-order search in memory/memory_order.h), so
// both walk the same state space.

#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "common/graph.h"

namespace ios {

//! The mask of local operator `i`.
constexpr uint64_t OpBit(int i) { return uint64_t{1} << i; }
//! The mask of local operators 0..n-1.
constexpr uint64_t LowMask(int n) { return n == 64 ? ~uint64_t{0} : OpBit(n) - 1; }

//! Maps a 64-bit operator mask to a 32-bit id: one flat array probed
//! linearly (a walk looks masks up millions of times; a node-based map spends
//! much of that allocating).
class MaskIndex {
 public:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  //! The id of `mask`, or kNone.
  uint32_t Find(uint64_t mask) const {
    if (slots_.empty()) return kNone;
    for (size_t i = Start(mask);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].id == kNone || slots_[i].mask == mask) return slots_[i].id;
    }
  }

  //! The id of `mask` and false, or, if it has none, `id` (stored) and true.
  std::pair<uint32_t, bool> Emplace(uint64_t mask, uint32_t id) {
    if (2 * (size_ + 1) > slots_.size()) Grow();
    size_t i = Start(mask);
    for (; slots_[i].id != kNone; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].mask == mask) return {slots_[i].id, false};
    }
    slots_[i] = {mask, id};
    ++size_;
    return {id, true};
  }

  size_t size() const { return size_; }
  //! Forgets every mask, keeping the storage.
  void Clear();

 private:
  struct Slot {
    uint64_t mask = 0;
    uint32_t id = kNone;
  };

  size_t Start(uint64_t mask) const {
    mask ^= mask >> 33;
    mask *= 0xff51afd7ed558ccdULL;
    mask ^= mask >> 33;
    return static_cast<size_t>(mask) & (slots_.size() - 1);
  }
  void Grow();

  std::vector<Slot> slots_;  // a power of two in size, at most half full
  size_t size_ = 0;
};

//! The edges of a part between its own operators; edges from outside the
//! part are satisfied by earlier parts and ignored. Local id i is part[i].
class PartDag {
 public:
  static constexpr int kMaxOperators = 64;

  //! Throws ios::Error if `part` has more than kMaxOperators operators or is
  //! not in topological order.
  static PartDag Make(const Graph& graph, std::span<const NodeId> part);

  int size() const { return static_cast<int>(successors_.size()); }
  uint64_t full() const { return LowMask(size()); }
  uint64_t successors(int u) const { return successors_[static_cast<size_t>(u)]; }
  uint64_t predecessors(int u) const { return predecessors_[static_cast<size_t>(u)]; }
  //! The descendants of `u` in the part, `u` included.
  uint64_t closure(int u) const { return closure_[static_cast<size_t>(u)]; }
  const std::vector<uint64_t>& closures() const { return closure_; }
  //! The operators not in `done` whose predecessors all are: the
  //! zero-indegree set of the rest of the part.
  uint64_t Ready(uint64_t done) const;

 private:
  std::vector<uint64_t> successors_, predecessors_, closure_;
};

}  // namespace ios
