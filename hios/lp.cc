#include "hios/lp.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace ios::hios {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Paths are weighed before their ends are placed, so an edge counts as the
// mean of what it would cost between two distinct devices.
double MeanTransferMs(const Costs& costs, EdgeId e) {
  const int m = costs.devices();
  if (m < 2) return 0.0;
  double sum = 0;
  for (int a = 0; a < m; ++a) {
    for (int b = 0; b < m; ++b) sum += a == b ? 0.0 : costs.TransferMs(e, a, b);
  }
  return sum / (m * (m - 1));
}

}  // namespace

Path LongestValidPath(const Dag& dag, const Costs& costs, const std::vector<int>& device_of,
                      const std::vector<OpId>& priority_order) {
  const auto n = static_cast<size_t>(dag.ops());
  auto mapped = [&](OpId op) { return device_of[static_cast<size_t>(op)] >= 0; };
  // Per unmapped op v, the longest path ending at v (without its out-boundary):
  //   start[v]: v is u_1 (its heaviest in-edge from a mapped op counted);
  //   through[v]: v follows u on the path; u must be clean when it is itself
  //   in the middle (u_2..u_{k-1}), not when it is u_1.
  std::vector<double> start(n, kNegInf), through(n, kNegInf);
  std::vector<OpId> prev(n, -1);
  std::vector<char> prev_through(n, 0);  // prev's own state: through (1) or start (0)
  std::vector<char> clean(n, 1);
  std::vector<double> out_boundary(n, 0.0);
  Path best;
  double best_length = kNegInf;
  OpId best_end = -1;
  for (OpId v : priority_order) {
    const auto vi = static_cast<size_t>(v);
    if (mapped(v)) continue;
    double op_ms = 0;
    for (int d = 0; d < costs.devices(); ++d) op_ms += costs.OpMs(v, d);
    op_ms /= costs.devices();
    double in_boundary = 0;
    double longest_in = kNegInf;  // longest path ending at a predecessor, plus the edge
    for (EdgeId e : dag.in_edges(v)) {
      const OpId u = dag.edge(e).src;
      const double w = MeanTransferMs(costs, e);
      if (mapped(u)) {
        clean[vi] = 0;
        in_boundary = std::max(in_boundary, w);
        continue;
      }
      const auto ui = static_cast<size_t>(u);
      // The priority order is topological: u was visited before v.
      const bool via_through = clean[ui] && through[ui] > start[ui];
      const double from_u = (via_through ? through[ui] : start[ui]) + w;
      if (from_u > longest_in) {
        longest_in = from_u;
        prev[vi] = u;
        prev_through[vi] = via_through ? 1 : 0;
      }
    }
    through[vi] = longest_in + op_ms;
    start[vi] = op_ms + in_boundary;
    for (EdgeId e : dag.out_edges(v)) {
      if (!mapped(dag.edge(e).dst)) continue;
      clean[vi] = 0;
      out_boundary[vi] = std::max(out_boundary[vi], MeanTransferMs(costs, e));
    }
    const double length = std::max(start[vi], through[vi]) + out_boundary[vi];
    if (length > best_length) {
      best_length = length;
      best_end = v;
    }
  }
  if (best_end < 0) return best;
  best.length_ms = best_length;
  OpId at = best_end;
  bool at_through = through[static_cast<size_t>(at)] > start[static_cast<size_t>(at)];
  while (true) {
    best.ops.push_back(at);
    if (!at_through) break;
    const auto ai = static_cast<size_t>(at);
    at_through = prev_through[ai] != 0;
    at = prev[ai];
  }
  std::reverse(best.ops.begin(), best.ops.end());
  return best;
}

std::vector<int> MapLongestPaths(const Dag& dag, const Costs& costs) {
  const std::vector<OpId> order = PriorityOrder(dag, costs);
  std::vector<int> device_of(static_cast<size_t>(dag.ops()), -1);
  for (int left = dag.ops(); left > 0;) {
    const Path path = LongestValidPath(dag, costs, device_of, order);
    if (path.ops.empty()) throw Error("hios LP: no valid path while operators are unmapped");
    double best_ms = std::numeric_limits<double>::infinity();
    int best_device = 0;
    for (int d = 0; d < costs.devices(); ++d) {
      for (OpId op : path.ops) device_of[static_cast<size_t>(op)] = d;
      const Timeline t = Evaluate(dag, costs, SingletonSchedule(costs.devices(), device_of, order));
      if (t.latency_ms < best_ms) {
        best_ms = t.latency_ms;
        best_device = d;
      }
    }
    for (OpId op : path.ops) device_of[static_cast<size_t>(op)] = best_device;
    left -= static_cast<int>(path.ops.size());
  }
  return device_of;
}

}  // namespace ios::hios
