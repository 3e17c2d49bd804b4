// The operator DAG that multi-device scheduling (HIOS) works on: operators
// 0..n-1 in any order (ids need not be topological) and directed data edges.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ios::hios {

using OpId = int32_t;
using EdgeId = int32_t;

struct Edge {
  OpId src = 0;
  OpId dst = 0;
};

//! Immutable after Make; cheap to copy. Thread-safe for concurrent reads.
class Dag {
 public:
  //! Throws ios::Error naming the edge when an end is out of [0, ops), an edge
  //! is a self-loop or a duplicate, or the edges form a cycle (naming one op on it).
  static Dag Make(int ops, std::vector<Edge> edges);

  //! A default-constructed Dag is empty.
  int ops() const { return in_begin_.empty() ? 0 : static_cast<int>(in_begin_.size()) - 1; }
  int edge_count() const { return static_cast<int>(edges_.size()); }
  const std::vector<Edge>& edges() const { return edges_; }
  const Edge& edge(EdgeId e) const { return edges_[static_cast<size_t>(e)]; }
  //! Ids of the edges into / out of `op`, in the order they were given.
  std::span<const EdgeId> in_edges(OpId op) const;
  std::span<const EdgeId> out_edges(OpId op) const;
  //! Kahn's order taking the smallest ready id first: deterministic, and the
  //! tie-break the priority order falls back on.
  const std::vector<OpId>& topological() const { return topological_; }
  int topo_rank(OpId op) const { return topo_rank_[static_cast<size_t>(op)]; }

 private:
  std::vector<Edge> edges_;
  std::vector<int> in_begin_, out_begin_;  // CSR offsets, size ops + 1
  std::vector<EdgeId> in_ids_, out_ids_;
  std::vector<OpId> topological_;
  std::vector<int> topo_rank_;
};

}  // namespace ios::hios
