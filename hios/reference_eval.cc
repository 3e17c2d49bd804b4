#include "hios/reference_eval.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <utility>

#include "common/error.h"

namespace ios::hios {
namespace {

struct Positions {
  std::vector<int> device;                    // per position
  std::vector<const std::vector<OpId>*> ops;  // per position
  std::vector<int> of_op;                     // per op, -1 when unmapped
};

Positions Number(const Dag& dag, const MultiSchedule& q) {
  Positions p;
  p.of_op.assign(static_cast<size_t>(dag.ops()), -1);
  for (size_t d = 0; d < q.stages.size(); ++d) {
    for (const auto& stage : q.stages[d]) {
      for (OpId op : stage) {
        if (op < 0 || op >= dag.ops() || p.of_op[static_cast<size_t>(op)] >= 0) {
          throw Error("hios reference: operator " + std::to_string(op) +
                      " is out of range or listed twice");
        }
        p.of_op[static_cast<size_t>(op)] = static_cast<int>(p.device.size());
      }
      p.device.push_back(static_cast<int>(d));
      p.ops.push_back(&stage);
    }
  }
  return p;
}

}  // namespace

double ReferenceIdOrderLatency(const Dag& dag, const Costs& costs, const MultiSchedule& q) {
  const Positions pos = Number(dag, q);
  // Parallel edges between two positions add up, as in the reference's
  // positional graph.
  std::vector<std::map<int, double>> preds(pos.device.size());
  for (EdgeId e = 0; e < dag.edge_count(); ++e) {
    const int a = pos.of_op[static_cast<size_t>(dag.edge(e).src)];
    const int b = pos.of_op[static_cast<size_t>(dag.edge(e).dst)];
    if (a < 0 || b < 0 || a == b) continue;
    const int da = pos.device[static_cast<size_t>(a)];
    const int db = pos.device[static_cast<size_t>(b)];
    preds[static_cast<size_t>(b)][a] += da == db ? 0.0 : costs.TransferMs(e, da, db);
  }
  std::vector<double> ready(q.stages.size(), 0.0);
  std::vector<bool> visited(pos.device.size(), false);
  for (OpId op = 0; op < dag.ops(); ++op) {
    const int at = pos.of_op[static_cast<size_t>(op)];
    if (at < 0 || visited[static_cast<size_t>(at)]) continue;
    visited[static_cast<size_t>(at)] = true;
    const int g = pos.device[static_cast<size_t>(at)];
    double r = ready[static_cast<size_t>(g)];
    for (const auto& [pred, w] : preds[static_cast<size_t>(at)]) {
      const int pd = pos.device[static_cast<size_t>(pred)];
      r = std::max(r, ready[static_cast<size_t>(pd)] + (pd == g ? 0.0 : w));
    }
    ready[static_cast<size_t>(g)] = r + costs.StageMs(*pos.ops[static_cast<size_t>(at)], g);
  }
  return ready.empty() ? 0.0 : *std::max_element(ready.begin(), ready.end());
}

MultiSchedule ListScheduleByKey(const Dag& dag, const MultiSchedule& q,
                                const std::vector<double>& key) {
  const Positions pos = Number(dag, q);
  const size_t stages = pos.device.size();
  std::vector<double> stage_key(stages, 0);
  std::vector<int> waiting(stages, 0);
  for (size_t s = 0; s < stages; ++s) {
    stage_key[s] = key[static_cast<size_t>(pos.ops[s]->front())];
    for (OpId op : *pos.ops[s]) stage_key[s] = std::min(stage_key[s], key[static_cast<size_t>(op)]);
  }
  for (const Edge& e : dag.edges()) {
    const int b = pos.of_op[static_cast<size_t>(e.dst)];
    if (pos.of_op[static_cast<size_t>(e.src)] >= 0 && b >= 0) ++waiting[static_cast<size_t>(b)];
  }
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (size_t s = 0; s < stages; ++s) {
    if (waiting[s] == 0) ready.emplace(stage_key[s], static_cast<int>(s));
  }
  MultiSchedule out;
  out.stages.resize(q.stages.size());
  size_t done = 0;
  while (!ready.empty()) {
    const auto s = static_cast<size_t>(ready.top().second);
    ready.pop();
    ++done;
    out.stages[static_cast<size_t>(pos.device[s])].push_back(*pos.ops[s]);
    for (OpId op : *pos.ops[s]) {
      for (EdgeId e : dag.out_edges(op)) {
        const int b = pos.of_op[static_cast<size_t>(dag.edge(e).dst)];
        if (b >= 0 && --waiting[static_cast<size_t>(b)] == 0) {
          ready.emplace(stage_key[static_cast<size_t>(b)], b);
        }
      }
    }
  }
  if (done != stages) {
    throw Error(
        "hios reference: the stages' data edges form a cycle (a stage holds operators "
        "that depend on each other through another stage)");
  }
  return out;
}

}  // namespace ios::hios
