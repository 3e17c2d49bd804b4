// Multi-device placements for tests: where each operator of a graph runs
// when its branches alternate between devices.
#pragma once

#include <vector>

#include "common/graph.h"

namespace ios::testing {

//! device_of (-1 for the input) with the branches of every fork spread over
//! `devices`: the consumers of an operator read by several go to devices
//! 0, 1, 2... in node order, starting from the fork's own device; any other
//! operator stays on its first producer's device (the input's: device 0).
//! Joins thus read tensors from other devices, and forks send them.
inline std::vector<int> AlternateBranches(const Graph& graph, int devices) {
  const size_t n = graph.nodes.size();
  std::vector<std::vector<NodeId>> consumers(n);
  for (NodeId id = 1; id < static_cast<NodeId>(n); ++id) {
    for (const Term& term : graph.node(id).inputs) {
      for (const Slice& s : term) {
        auto& list = consumers[static_cast<size_t>(s.producer)];
        if (list.empty() || list.back() != id) list.push_back(id);
      }
    }
  }
  std::vector<int> device_of(n, 0);
  device_of[0] = -1;
  for (NodeId id = 1; id < static_cast<NodeId>(n); ++id) {
    const NodeId first = graph.node(id).inputs.at(0).at(0).producer;
    const auto& siblings = consumers[static_cast<size_t>(first)];
    const int base = first == 0 ? 0 : device_of[static_cast<size_t>(first)];
    int d = base;
    if (siblings.size() > 1) {
      int index = 0;
      while (siblings[static_cast<size_t>(index)] != id) ++index;
      d = (base + index) % devices;
    }
    device_of[static_cast<size_t>(id)] = d;
  }
  return device_of;
}

}  // namespace ios::testing
