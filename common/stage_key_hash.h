// The canonical stage key's two 64-bit hashes: how planning dedupes stages
// (coordinator/stage_hash_index.h) and how the profiling DB names a stage's
// row (docs/profiling-db.md). Part of the DB's file format: stable across
// builds and machines, never changed.
#pragma once

#include <cstdint>
#include <string_view>

namespace ios {

//! Two independent 64-bit hashes of a canonical stage key: `id` (63 bits,
//! never negative) is the stage's row id in the profiling DB, `check` must
//! match too.
struct StageKeyHash {
  int64_t id = 0;
  int64_t check = 0;
  friend bool operator==(const StageKeyHash&, const StageKeyHash&) = default;
};
StageKeyHash HashStageKey(std::string_view key);
//! HashStageKey of two keys at once (the same values, about twice as fast
//! as one after the other).
void HashStageKeyPair(std::string_view a, std::string_view b, StageKeyHash& hash_a,
                      StageKeyHash& hash_b);

}  // namespace ios
