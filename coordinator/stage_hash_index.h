// Internal to the search plan (coordinator/search.h): the index of its
// distinct stages by key hash.
#pragma once

#include <cstddef>
#include <vector>

#include "common/stage_key_hash.h"

namespace ios::coordinator {

//! Maps a stage's key hash to its id: one flat array probed linearly from
//! the hash's id bits (already uniformly mixed), so adding a stage never
//! allocates a node. A search interns up to ~500,000 occurrences of stages.
class StageHashIndex {
 public:
  //! The id stored for `hash`, or -1.
  int Find(const StageKeyHash& hash) const {
    if (slots_.empty()) return -1;
    for (size_t i = Start(hash);; i = (i + 1) & Mask()) {
      if (slots_[i].id < 0) return -1;
      if (slots_[i].hash == hash) return slots_[i].id;
    }
  }

  //! The id stored for `hash`; if there is none, stores `id` (>= 0) and returns it.
  int FindOrAdd(const StageKeyHash& hash, int id) {
    // At most half full: probes stay short.
    if (2 * (size_ + 1) > slots_.size()) Grow();
    size_t i = Start(hash);
    for (; slots_[i].id >= 0; i = (i + 1) & Mask()) {
      if (slots_[i].hash == hash) return slots_[i].id;
    }
    slots_[i] = {hash, id};
    ++size_;
    return id;
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    StageKeyHash hash;
    int id = -1;  // -1: empty
  };

  size_t Mask() const { return slots_.size() - 1; }
  size_t Start(const StageKeyHash& hash) const { return static_cast<size_t>(hash.id) & Mask(); }

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : 2 * old.size(), Slot{});
    for (const Slot& slot : old) {
      if (slot.id < 0) continue;
      size_t i = Start(slot.hash);
      while (slots_[i].id >= 0) i = (i + 1) & Mask();
      slots_[i] = slot;
    }
  }

  std::vector<Slot> slots_;  // a power of two in size
  size_t size_ = 0;
};

}  // namespace ios::coordinator
