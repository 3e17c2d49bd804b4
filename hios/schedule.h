// A multi-device schedule and THE evaluator every HIOS algorithm is judged
// by: a list schedule over the stage graph where a stage starts after its
// device's previous stage and after every predecessor's finish plus the
// transfer of that edge (paper's precedence constraint, per edge).
#pragma once

#include <string>
#include <vector>

#include "hios/costs.h"
#include "hios/dag.h"

namespace ios::hios {

//! stages[d] = the ordered stages of device d; a stage is a set of ops run
//! concurrently. Ops listed nowhere are unmapped (a partial mapping): they
//! and their edges are ignored.
struct MultiSchedule {
  std::vector<std::vector<std::vector<OpId>>> stages;
  //! When set, a stage may hold dependent ops (an IOS stage's chains and
  //! merges, ordered inside it): an edge within a stage is the stage's own
  //! business and its price covers it. HIOS's own stages never do.
  bool ordered_stages = false;
};

struct StageRef {
  int device = 0;
  int index = 0;
};

//! The outcome of Evaluate. A cycle is an expected outcome (a window merge
//! may deadlock another device), so it is a value, not an exception.
struct Timeline {
  bool acyclic = true;
  double latency_ms = 0;  // +inf when !acyclic
  //! Per op: its stage's start and finish; NaN when unmapped or, with a
  //! cycle, never reached.
  std::vector<double> start_ms, finish_ms;
  //! When !acyclic: stages each waiting for the previous, the first for the
  //! last; one stage when it holds both ends of an edge.
  std::vector<StageRef> cycle;
  std::string problem;  // when !acyclic: the cycle in words
};

//! Requires q.stages.size() == costs.devices(). Throws ios::Error when an op
//! is out of range or listed twice, or a stage is empty (a malformed
//! schedule, not a scheduling outcome). O(V + E + stages).
Timeline Evaluate(const Dag& dag, const Costs& costs, const MultiSchedule& q);

//! An independent check of a timeline Evaluate returned for q: every edge
//! between mapped ops has finish(src) + transfer <= start(dst), and stages
//! of one device do not overlap and last at least their price. Throws
//! ios::Error naming the first violated edge or stage.
void CheckTimeline(const Dag& dag, const Costs& costs, const MultiSchedule& q,
                   const Timeline& timeline);

//! p(v) = t(v) + max over out-edges (w(e) + p(dst)), 0 for a sink (paper:
//! vertex and edge weights). t is the mean of OpMs over devices and w the
//! mean transfer over ordered pairs of distinct devices (0 with one device).
std::vector<double> Priorities(const Dag& dag, const Costs& costs);

//! Ops by descending priority, ties by Dag::topo_rank: always topological,
//! since p never increases along an edge.
std::vector<OpId> PriorityOrder(const Dag& dag, const Costs& costs);

//! Each op of device_of (-1: unmapped) alone in a stage, every device's ops
//! in `order` (a topological order keeps the stage graph acyclic).
MultiSchedule SingletonSchedule(int devices, const std::vector<int>& device_of,
                                const std::vector<OpId>& order);

}  // namespace ios::hios
