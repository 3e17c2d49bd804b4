#include "hios/mr.h"

#include <algorithm>
#include <limits>

#include "hios/schedule.h"

namespace ios::hios {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Row i of the table, one cell per device.
struct Cell {
  double finish = kInf;    // of op i on this device, in the recorded chain
  double makespan = kInf;  // largest finish of the chain up to op i
  int previous = -1;       // device of op i-1 in that chain
};

}  // namespace

RecordedMapping MapByRecording(const Dag& dag, const Costs& costs) {
  const int n = dag.ops();
  const int m = costs.devices();
  RecordedMapping out;
  if (n == 0) return out;
  const std::vector<OpId> order = PriorityOrder(dag, costs);
  std::vector<int> position(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) position[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
  const bool identical = costs.identical_devices();
  // Devices op i may use: with identical devices the first i + 1 suffice.
  auto usable = [&](int i) { return identical ? std::min(m, i + 1) : m; };

  std::vector<std::vector<Cell>> table(static_cast<size_t>(n),
                                       std::vector<Cell>(static_cast<size_t>(m)));
  for (int j = 0; j < usable(0); ++j) {
    const double f = costs.OpMs(order[0], j);
    table[0][static_cast<size_t>(j)] = {f, f, -1};
  }
  std::vector<int> chain_device(static_cast<size_t>(n));
  std::vector<double> chain_finish(static_cast<size_t>(n));
  std::vector<double> device_free(static_cast<size_t>(m));
  for (int i = 1; i < n; ++i) {
    const OpId v = order[static_cast<size_t>(i)];
    auto& row = table[static_cast<size_t>(i)];
    for (int k = 0; k < m; ++k) {
      const Cell& from = table[static_cast<size_t>(i - 1)][static_cast<size_t>(k)];
      if (from.finish == kInf) continue;
      // The chain recorded for op i-1 on device k, read back from the table.
      std::fill(device_free.begin(), device_free.end(), 0.0);
      for (int l = i - 1, d = k; l >= 0;
           d = table[static_cast<size_t>(l)][static_cast<size_t>(d)].previous, --l) {
        const double f = table[static_cast<size_t>(l)][static_cast<size_t>(d)].finish;
        chain_device[static_cast<size_t>(l)] = d;
        chain_finish[static_cast<size_t>(l)] = f;
        device_free[static_cast<size_t>(d)] = std::max(device_free[static_cast<size_t>(d)], f);
      }
      for (int j = 0; j < usable(i); ++j) {
        double start = device_free[static_cast<size_t>(j)];
        for (EdgeId e : dag.in_edges(v)) {
          const auto l = static_cast<size_t>(position[static_cast<size_t>(dag.edge(e).src)]);
          const int d = chain_device[l];
          start = std::max(start, chain_finish[l] + (d == j ? 0.0 : costs.TransferMs(e, d, j)));
        }
        const double finish = start + costs.OpMs(v, j);
        Cell& cell = row[static_cast<size_t>(j)];
        if (finish < cell.finish) cell = {finish, std::max(from.makespan, finish), k};
      }
    }
  }
  const auto& last = table[static_cast<size_t>(n - 1)];
  int best = 0;
  for (int j = 1; j < m; ++j) {
    if (last[static_cast<size_t>(j)].makespan < last[static_cast<size_t>(best)].makespan) best = j;
  }
  out.makespan_ms = last[static_cast<size_t>(best)].makespan;
  out.device_of.assign(static_cast<size_t>(n), -1);
  for (int l = n - 1, d = best; l >= 0;
       d = table[static_cast<size_t>(l)][static_cast<size_t>(d)].previous, --l) {
    out.device_of[static_cast<size_t>(order[static_cast<size_t>(l)])] = d;
  }
  return out;
}

}  // namespace ios::hios
