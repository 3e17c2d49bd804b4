// Where to cut a run of operators in two, for the DP: a block too large for
// one part, or a part over the DP budget. Both halves keep topological
// order, and the first half runs entirely before the second, so a cut
// costs every stage that would have mixed operators of both halves.
#pragma once

#include <cstddef>
#include <vector>

#include "common/graph.h"

namespace ios::coordinator {

struct PartCut {
  std::vector<NodeId> first, second;  // each in topological order
  int crossing = 0;                   // operators of `first` whose output `second` reads
};

//! Cuts `ops` (topological order, at least 2) into a first half of between
//! `min_first` and `max_first` operators (1 <= min_first <= max_first <
//! ops.size()) and the rest. Candidates are the prefixes of three
//! topological orders of `ops` (as given, by depth, depth-first); the
//! narrowest wins: fewest tensors crossing the cut, then the one closest to
//! `target_first`, then the earlier order. Edges from outside `ops` are
//! ignored.
PartCut NarrowCut(const Graph& graph, const std::vector<NodeId>& ops, size_t min_first,
                  size_t max_first, size_t target_first);

//! Cuts `ops` (topological order) into as few consecutive pieces of at most
//! `max_size` operators as possible, each cut a NarrowCut.
std::vector<std::vector<NodeId>> SplitToSize(const Graph& graph, const std::vector<NodeId>& ops,
                                             size_t max_size);

}  // namespace ios::coordinator
