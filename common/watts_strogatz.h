// Watts-Strogatz small-world graphs, the random graphs RandWire (Xie et al.
// 2019) wires its stages with, drawn from a seed so a benchmark can name the
// graph it ran on.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ios::zoo {

//! An undirected simple graph on nodes 0..num_nodes-1; each edge once, as
//! (smaller, larger), sorted.
struct WsGraph {
  int num_nodes = 0;
  std::vector<std::pair<int, int>> edges;
};

//! WS(n, k, p): a ring where each node links to its k/2 nearest neighbours
//! on each side, then each lattice edge (u, u+j), for j = 1..k/2 and u in
//! order, is with probability p moved to (u, w), w uniform among the nodes
//! that are neither u nor already linked to u (u keeps it when it is linked
//! to every other node). The algorithm is networkx's watts_strogatz_graph;
//! the random numbers are our own (splitmix64 from `seed`), so the graphs
//! are not networkx's. Always n*k/2 edges. Same arguments, same graph.
//! Requires 0 < k < n, k even, 0 <= p <= 1; otherwise throws ios::Error
//! naming the argument.
WsGraph WattsStrogatz(int n, int k, double p, uint64_t seed);

}  // namespace ios::zoo
