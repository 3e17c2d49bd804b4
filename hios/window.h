// The sliding window of HIOS (paper Alg. 2): inside each device, merge
// neighbouring stages of independent operators into one concurrent stage
// when the whole multi-device schedule gets faster under Evaluate.
#pragma once

#include <vector>

#include "hios/costs.h"
#include "hios/dag.h"
#include "hios/schedule.h"

namespace ios::hios {

struct WindowOptions {
  //! Most stages one window spans (the visited op's stage included); the
  //! paper's w, 2 as in its evaluation. 1 merges nothing.
  int window = 2;
  //! Most ops in one merged stage (one stream each); the paper's 2. 1
  //! merges nothing.
  int streams = 2;
};

//! Throws ios::Error naming the option when window < 1 or streams < 1.
void ValidateWindowOptions(const WindowOptions& options);

//! q with stages merged by the window: ops visited in PriorityOrder; from the
//! visited op's current stage k on its device, the candidates join stages
//! k..k+p for p = 1..window-1 while the union holds at most `streams`
//! pairwise independent ops (no path either way in dag); a candidate whose
//! price (Costs::StageMs) is +inf or whose stage graph has a cycle (through
//! any device's order) is skipped; the fastest candidate (ties: the smaller
//! p) replaces q only when it lowers Evaluate's latency. Each device keeps its
//! op sequence; the result's latency is never above q's.
//! Requires q.stages.size() == costs.devices(). Throws ios::Error on a bad
//! option, a malformed q (see Evaluate) or a q whose stage graph is cyclic.
//! O(n · (window-1) · (V + E)).
MultiSchedule Parallelize(const Dag& dag, const Costs& costs, const MultiSchedule& q,
                          const WindowOptions& options);

//! Every multi-op stage Parallelize(dag, costs, q, options) may ask StageMs to
//! price, for any costs: each run of 2..streams consecutive ops of a device's
//! op sequence in q (its stages concatenated) whose ops are pairwise
//! independent, plus q's own multi-op stages; ops in sequence order, as
//! Parallelize lists them. A superset (runs need not start at a stage), so
//! that the farm can measure them in one batch before the window runs. Empty
//! besides q's own stages when window or streams is 1. Throws ios::Error on a
//! bad option.
std::vector<std::vector<OpId>> WindowCandidates(const Dag& dag, const MultiSchedule& q,
                                                const WindowOptions& options);

}  // namespace ios::hios
