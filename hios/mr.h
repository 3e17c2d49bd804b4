// HIOS-MR (paper Alg. 3): a mapping-recording dynamic program over the ops
// in priority order. For each op and device it records the chain of earlier
// placements that lets the op finish earliest there, and extends the
// recorded chains of the previous op only.
#pragma once

#include <vector>

#include "hios/costs.h"
#include "hios/dag.h"

namespace ios::hios {

struct RecordedMapping {
  std::vector<int> device_of;  // per op
  //! The table's makespan of the chosen chain: equals Evaluate of the
  //! mapping as singletons in PriorityOrder (the same arithmetic).
  double makespan_ms = 0;
};

//! Op i (in PriorityOrder) on device j starts after device j's last op of
//! the recorded chain and after EVERY predecessor's finish plus its
//! transfer (the reference waits for the first predecessor only). Finish
//! times are read from the table along the chain's records, never kept
//! apart from it. With identical_devices(), op i may open at most one new
//! device (the others are relabellings). O(V·M·(V + M·deg)).
RecordedMapping MapByRecording(const Dag& dag, const Costs& costs);

}  // namespace ios::hios
