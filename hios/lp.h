// HIOS-LP (paper Alg. 1): map operators to devices one path at a time, the
// longest valid path of the residual graph first, each on the device that
// minimises the latency of the partial mapping under THE evaluator.
#pragma once

#include <vector>

#include "hios/costs.h"
#include "hios/dag.h"
#include "hios/schedule.h"

namespace ios::hios {

//! A path of unmapped ops u_1..u_k joined by edges, with its length: every
//! op's time, every edge between them, and the boundary edges from a mapped
//! op into u_1 and from u_k to a mapped op (the paper's Fig. 4 counts them).
struct Path {
  std::vector<OpId> ops;
  double length_ms = 0;
};

//! The longest valid path among the ops with device_of[op] == -1: no
//! intermediate op u_2..u_{k-1} has an edge from or to a mapped op. Edge
//! weights are the mean transfer between distinct devices (0 on one device).
//! Never empty while an op is unmapped (one op alone is valid). Ties go to
//! the path ending earliest in PriorityOrder. Empty when all are mapped.
//! O(V + E) given the order.
Path LongestValidPath(const Dag& dag, const Costs& costs, const std::vector<int>& device_of,
                      const std::vector<OpId>& priority_order);

//! The LP mapping: until every op is mapped, place the longest valid path
//! on the device where Evaluate of the mapped ops (singletons, PriorityOrder
//! on every device) finishes earliest; ties go to the lowest device. Returns
//! device_of per op. At most V paths, M evaluations each: O(V·M·(V + E)).
std::vector<int> MapLongestPaths(const Dag& dag, const Costs& costs);

}  // namespace ios::hios
