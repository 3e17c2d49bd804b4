#include "coordinator/part_cut.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <tuple>
#include <unordered_map>

#include "common/error.h"

namespace ios::coordinator {

namespace {

// `ops` in local indices 0..n-1: who reads whom inside the run.
struct LocalDag {
  std::vector<std::vector<int>> consumers, producers;
};

LocalDag BuildLocal(const Graph& graph, const std::vector<NodeId>& ops) {
  const int n = static_cast<int>(ops.size());
  std::unordered_map<NodeId, int> local;
  for (int i = 0; i < n; ++i) local.emplace(ops[i], i);
  LocalDag dag{std::vector<std::vector<int>>(n), std::vector<std::vector<int>>(n)};
  for (int v = 0; v < n; ++v) {
    for (const Term& term : graph.node(ops[v]).inputs) {
      for (const Slice& slice : term) {
        auto it = local.find(slice.producer);
        if (it == local.end()) continue;
        const int u = it->second;
        if (u >= v) throw Error("operators to cut are not in topological order");
        std::vector<int>& p = dag.producers[v];
        if (std::find(p.begin(), p.end(), u) != p.end()) continue;
        p.push_back(u);
        dag.consumers[u].push_back(v);
      }
    }
  }
  return dag;
}

// By longest path from the run's sources, ties in given order: a cut
// between two depths is a cut between layers.
std::vector<int> DepthOrder(const LocalDag& dag) {
  const int n = static_cast<int>(dag.producers.size());
  std::vector<int> depth(n, 0), order(n);
  for (int v = 0; v < n; ++v) {
    for (int u : dag.producers[v]) depth[v] = std::max(depth[v], depth[u] + 1);
    order[v] = v;
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return depth[a] < depth[b]; });
  return order;
}

// Each operator as soon as possible after its producer: branches stay
// together, so a cut between branches crosses few tensors.
std::vector<int> DepthFirstOrder(const LocalDag& dag) {
  const int n = static_cast<int>(dag.producers.size());
  std::vector<int> pending(n), order, stack;
  order.reserve(n);
  for (int v = n - 1; v >= 0; --v) {
    pending[v] = static_cast<int>(dag.producers[v].size());
    if (pending[v] == 0) stack.push_back(v);
  }
  while (!stack.empty()) {
    const int u = stack.back();
    stack.pop_back();
    order.push_back(u);
    const std::vector<int>& next = dag.consumers[u];
    for (auto it = next.rbegin(); it != next.rend(); ++it) {
      if (--pending[*it] == 0) stack.push_back(*it);
    }
  }
  return order;
}

// crossing[k]: operators among the first k of `order` read by a later one.
std::vector<int> Crossing(const LocalDag& dag, const std::vector<int>& order) {
  const int n = static_cast<int>(order.size());
  std::vector<int> position(n), diff(n + 2, 0);
  for (int i = 0; i < n; ++i) position[order[i]] = i;
  for (int u = 0; u < n; ++u) {
    int last = -1;
    for (int v : dag.consumers[u]) last = std::max(last, position[v]);
    if (last < 0) continue;
    ++diff[position[u] + 1];
    --diff[last + 1];
  }
  std::vector<int> crossing(n + 1, 0);
  int running = 0;
  for (int k = 0; k <= n; ++k) {
    running += diff[k];
    crossing[k] = running;
  }
  return crossing;
}

}  // namespace

PartCut NarrowCut(const Graph& graph, const std::vector<NodeId>& ops, size_t min_first,
                  size_t max_first, size_t target_first) {
  const size_t n = ops.size();
  if (n < 2 || min_first < 1 || min_first > max_first || max_first >= n) {
    throw Error("cannot cut " + std::to_string(n) + " operators with a first half of " +
                std::to_string(min_first) + ".." + std::to_string(max_first));
  }
  const LocalDag dag = BuildLocal(graph, ops);
  std::vector<int> given(n);
  for (size_t i = 0; i < n; ++i) given[i] = static_cast<int>(i);
  const std::vector<std::vector<int>> orders{given, DepthOrder(dag), DepthFirstOrder(dag)};
  auto best = std::make_tuple(std::numeric_limits<int>::max(), n, orders.size());
  size_t best_k = 0;
  for (size_t o = 0; o < orders.size(); ++o) {
    const std::vector<int> crossing = Crossing(dag, orders[o]);
    for (size_t k = min_first; k <= max_first; ++k) {
      const size_t distance = k > target_first ? k - target_first : target_first - k;
      const auto score = std::make_tuple(crossing[k], distance, o);
      if (score < best) {
        best = score;
        best_k = k;
      }
    }
  }
  const std::vector<int>& order = orders[std::get<2>(best)];
  PartCut cut;
  cut.crossing = std::get<0>(best);
  for (size_t i = 0; i < n; ++i) (i < best_k ? cut.first : cut.second).push_back(ops[order[i]]);
  return cut;
}

std::vector<std::vector<NodeId>> SplitToSize(const Graph& graph, const std::vector<NodeId>& ops,
                                             size_t max_size) {
  if (max_size < 1) throw Error("part size must be >= 1");
  const size_t n = ops.size();
  if (n <= max_size) return {ops};
  // As few pieces as possible: the first half gets half of them (rounded
  // down) and must leave the second half no more than it can hold.
  const size_t pieces = (n + max_size - 1) / max_size;
  const size_t first_pieces = pieces / 2;
  const size_t min_first = std::max<size_t>(1, n - (pieces - first_pieces) * max_size);
  const size_t max_first = std::min(n - 1, first_pieces * max_size);
  PartCut cut = NarrowCut(graph, ops, min_first, max_first, n * first_pieces / pieces);
  std::vector<std::vector<NodeId>> out = SplitToSize(graph, cut.first, max_size);
  for (auto& piece : SplitToSize(graph, cut.second, max_size)) out.push_back(std::move(piece));
  return out;
}

}  // namespace ios::coordinator
