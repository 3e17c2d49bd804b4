#include "hios/dag.h"

#include <functional>
#include <queue>
#include <set>
#include <string>
#include <utility>

#include "common/error.h"

namespace ios::hios {
namespace {

void FillCsr(int ops, const std::vector<Edge>& edges, bool by_dst, std::vector<int>& begin,
             std::vector<EdgeId>& ids) {
  begin.assign(static_cast<size_t>(ops) + 1, 0);
  for (const Edge& e : edges) ++begin[static_cast<size_t>(by_dst ? e.dst : e.src) + 1];
  for (size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
  ids.assign(edges.size(), 0);
  std::vector<int> next(begin.begin(), begin.end() - 1);
  for (size_t e = 0; e < edges.size(); ++e) {
    const OpId end = by_dst ? edges[e].dst : edges[e].src;
    ids[static_cast<size_t>(next[static_cast<size_t>(end)]++)] = static_cast<EdgeId>(e);
  }
}

}  // namespace

Dag Dag::Make(int ops, std::vector<Edge> edges) {
  if (ops < 0)
    throw Error("hios dag: expected a number of operators >= 0, found " + std::to_string(ops));
  std::set<std::pair<OpId, OpId>> seen;
  for (size_t e = 0; e < edges.size(); ++e) {
    const Edge& edge = edges[e];
    const std::string where = "hios dag: edge " + std::to_string(e) + " (" +
                              std::to_string(edge.src) + " -> " + std::to_string(edge.dst) + ")";
    if (edge.src < 0 || edge.src >= ops || edge.dst < 0 || edge.dst >= ops) {
      throw Error(where + ": expected both ends in [0, " + std::to_string(ops) + ")");
    }
    if (edge.src == edge.dst) throw Error(where + ": expected two different operators");
    if (!seen.emplace(edge.src, edge.dst).second) {
      throw Error(where + ": duplicates an earlier edge between the same operators");
    }
  }
  Dag dag;
  dag.edges_ = std::move(edges);
  FillCsr(ops, dag.edges_, true, dag.in_begin_, dag.in_ids_);
  FillCsr(ops, dag.edges_, false, dag.out_begin_, dag.out_ids_);

  std::vector<int> waiting(static_cast<size_t>(ops));
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
  for (OpId v = 0; v < ops; ++v) {
    waiting[static_cast<size_t>(v)] = static_cast<int>(dag.in_edges(v).size());
    if (waiting[static_cast<size_t>(v)] == 0) ready.push(v);
  }
  dag.topo_rank_.assign(static_cast<size_t>(ops), -1);
  while (!ready.empty()) {
    const OpId v = ready.top();
    ready.pop();
    dag.topo_rank_[static_cast<size_t>(v)] = static_cast<int>(dag.topological_.size());
    dag.topological_.push_back(v);
    for (EdgeId e : dag.out_edges(v)) {
      const OpId s = dag.edge(e).dst;
      if (--waiting[static_cast<size_t>(s)] == 0) ready.push(s);
    }
  }
  if (static_cast<int>(dag.topological_.size()) != ops) {
    OpId stuck = 0;
    while (dag.topo_rank_[static_cast<size_t>(stuck)] >= 0) ++stuck;
    throw Error("hios dag: the edges form a cycle (operator " + std::to_string(stuck) +
                " is never ready: it lies on a cycle or after one)");
  }
  return dag;
}

std::span<const EdgeId> Dag::in_edges(OpId op) const {
  const auto o = static_cast<size_t>(op);
  return {in_ids_.data() + in_begin_[o], static_cast<size_t>(in_begin_[o + 1] - in_begin_[o])};
}

std::span<const EdgeId> Dag::out_edges(OpId op) const {
  const auto o = static_cast<size_t>(op);
  return {out_ids_.data() + out_begin_[o], static_cast<size_t>(out_begin_[o + 1] - out_begin_[o])};
}

}  // namespace ios::hios
