#include "hios/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"

namespace ios::hios {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Stage numbering shared by Evaluate and CheckTimeline.
struct Layout {
  std::vector<StageRef> refs;  // per stage id
  std::vector<int> first;      // per device: id of its first stage
  std::vector<int> stage_of;   // per op, -1 when unmapped
};

std::string Name(StageRef s) {
  return "device " + std::to_string(s.device) + " stage " + std::to_string(s.index);
}

Layout Lay(const Dag& dag, const Costs& costs, const MultiSchedule& q) {
  if (static_cast<int>(q.stages.size()) != costs.devices()) {
    throw Error("hios schedule: expected " + std::to_string(costs.devices()) +
                " device lists (the costs' devices), found " + std::to_string(q.stages.size()));
  }
  Layout lay;
  lay.stage_of.assign(static_cast<size_t>(dag.ops()), -1);
  for (int d = 0; d < static_cast<int>(q.stages.size()); ++d) {
    lay.first.push_back(static_cast<int>(lay.refs.size()));
    const auto& list = q.stages[static_cast<size_t>(d)];
    for (int k = 0; k < static_cast<int>(list.size()); ++k) {
      const StageRef ref{d, k};
      const auto& ops = list[static_cast<size_t>(k)];
      if (ops.empty()) throw Error("hios schedule: " + Name(ref) + " is empty");
      for (OpId op : ops) {
        if (op < 0 || op >= dag.ops()) {
          throw Error("hios schedule: " + Name(ref) + " holds operator " + std::to_string(op) +
                      ", expected one in [0, " + std::to_string(dag.ops()) + ")");
        }
        int& slot = lay.stage_of[static_cast<size_t>(op)];
        if (slot >= 0) {
          throw Error("hios schedule: operator " + std::to_string(op) + " is in " +
                      Name(lay.refs[static_cast<size_t>(slot)]) + " and again in " + Name(ref));
        }
        slot = static_cast<int>(lay.refs.size());
      }
      lay.refs.push_back(ref);
    }
  }
  return lay;
}

const std::vector<OpId>& OpsOf(const MultiSchedule& q, StageRef s) {
  return q.stages[static_cast<size_t>(s.device)][static_cast<size_t>(s.index)];
}

// With a cycle every unreached stage still waits on an unreached stage, so
// walking back along unreached predecessors must repeat one: that loop.
std::vector<StageRef> FindCycle(const Dag& dag, const MultiSchedule& q, const Layout& lay,
                                const std::vector<int>& waiting) {
  const auto stages = static_cast<int>(lay.refs.size());
  int at = 0;
  while (waiting[static_cast<size_t>(at)] == 0) ++at;
  std::vector<int> seen_at(static_cast<size_t>(stages), -1);
  std::vector<int> walk;
  while (seen_at[static_cast<size_t>(at)] < 0) {
    seen_at[static_cast<size_t>(at)] = static_cast<int>(walk.size());
    walk.push_back(at);
    const StageRef ref = lay.refs[static_cast<size_t>(at)];
    int pred = -1;
    if (ref.index > 0 && waiting[static_cast<size_t>(at - 1)] > 0) pred = at - 1;
    for (OpId v : OpsOf(q, ref)) {
      for (EdgeId e : dag.in_edges(v)) {
        const int s = lay.stage_of[static_cast<size_t>(dag.edge(e).src)];
        if (pred < 0 && s >= 0 && s != at && waiting[static_cast<size_t>(s)] > 0) pred = s;
      }
    }
    at = pred;  // never -1: `at` is unreached, so some predecessor is too
  }
  std::vector<StageRef> cycle;
  for (size_t i = walk.size(); i-- > static_cast<size_t>(seen_at[static_cast<size_t>(at)]);) {
    cycle.push_back(lay.refs[static_cast<size_t>(walk[i])]);
  }
  return cycle;
}

}  // namespace

Timeline Evaluate(const Dag& dag, const Costs& costs, const MultiSchedule& q) {
  const Layout lay = Lay(dag, costs, q);
  const auto stages = lay.refs.size();
  Timeline t;
  t.start_ms.assign(static_cast<size_t>(dag.ops()), kNaN);
  t.finish_ms.assign(static_cast<size_t>(dag.ops()), kNaN);

  // In-degree over the stage graph: the device's previous stage plus one per
  // data edge (parallel edges counted each, released each).
  std::vector<int> waiting(stages, 0);
  for (size_t s = 0; s < stages; ++s) {
    const StageRef ref = lay.refs[s];
    if (ref.index > 0) ++waiting[s];
    for (OpId v : OpsOf(q, ref)) {
      for (EdgeId e : dag.in_edges(v)) {
        const int u = lay.stage_of[static_cast<size_t>(dag.edge(e).src)];
        if (u < 0 || (q.ordered_stages && u == static_cast<int>(s))) continue;
        if (u == static_cast<int>(s)) {
          t.acyclic = false;
          t.cycle = {ref};
          t.problem = "operators " + std::to_string(dag.edge(e).src) + " and " + std::to_string(v) +
                      " depend on each other yet share " + Name(ref);
          t.latency_ms = kInf;
          return t;
        }
        ++waiting[s];
      }
    }
  }
  std::vector<double> finish(stages, kNaN);
  std::vector<int> ready;
  for (size_t s = 0; s < stages; ++s) {
    if (waiting[s] == 0) ready.push_back(static_cast<int>(s));
  }
  size_t done = 0;
  double latency = 0;
  // Finish times are longest paths in the stage graph: any Kahn order gives them.
  while (!ready.empty()) {
    const auto s = static_cast<size_t>(ready.back());
    ready.pop_back();
    ++done;
    const StageRef ref = lay.refs[s];
    double start = ref.index > 0 ? finish[s - 1] : 0.0;
    const auto& ops = OpsOf(q, ref);
    for (OpId v : ops) {
      for (EdgeId e : dag.in_edges(v)) {
        const int u = lay.stage_of[static_cast<size_t>(dag.edge(e).src)];
        if (u < 0 || u == static_cast<int>(s)) continue;  // inside an ordered stage
        const int from = lay.refs[static_cast<size_t>(u)].device;
        const double wait = from == ref.device ? 0.0 : costs.TransferMs(e, from, ref.device);
        start = std::max(start, finish[static_cast<size_t>(u)] + wait);
      }
    }
    finish[s] = start + costs.StageMs(ops, ref.device);
    latency = std::max(latency, finish[s]);
    for (OpId v : ops) {
      t.start_ms[static_cast<size_t>(v)] = start;
      t.finish_ms[static_cast<size_t>(v)] = finish[s];
    }
    auto release = [&](int next) {
      if (--waiting[static_cast<size_t>(next)] == 0) ready.push_back(next);
    };
    const auto& list = q.stages[static_cast<size_t>(ref.device)];
    if (ref.index + 1 < static_cast<int>(list.size())) release(static_cast<int>(s) + 1);
    for (OpId v : ops) {
      for (EdgeId e : dag.out_edges(v)) {
        const int w = lay.stage_of[static_cast<size_t>(dag.edge(e).dst)];
        if (w >= 0 && w != static_cast<int>(s)) release(w);
      }
    }
  }
  if (done == stages) {
    t.latency_ms = latency;
    return t;
  }
  t.acyclic = false;
  t.latency_ms = kInf;
  t.cycle = FindCycle(dag, q, lay, waiting);
  t.problem = "the stages wait on each other in a cycle:";
  for (const StageRef& ref : t.cycle) t.problem += " " + Name(ref) + " ->";
  t.problem += " " + Name(t.cycle.front());
  return t;
}

void CheckTimeline(const Dag& dag, const Costs& costs, const MultiSchedule& q,
                   const Timeline& timeline) {
  const Layout lay = Lay(dag, costs, q);
  if (!timeline.acyclic) throw Error("hios timeline: not a schedule: " + timeline.problem);
  // Relative slack for the rounding of sums taken in another order.
  auto late = [](double a, double b) { return a > b + 1e-9 * std::max(1.0, std::abs(b)); };
  for (EdgeId e = 0; e < dag.edge_count(); ++e) {
    const Edge& edge = dag.edge(e);
    const int su = lay.stage_of[static_cast<size_t>(edge.src)];
    const int sv = lay.stage_of[static_cast<size_t>(edge.dst)];
    if (su < 0 || sv < 0) continue;
    if (su == sv) {
      if (q.ordered_stages) continue;
      throw Error("hios timeline: operators " + std::to_string(edge.src) + " and " +
                  std::to_string(edge.dst) + " depend on each other yet share a stage");
    }
    const int a = lay.refs[static_cast<size_t>(su)].device;
    const int b = lay.refs[static_cast<size_t>(sv)].device;
    const double need = timeline.finish_ms[static_cast<size_t>(edge.src)] +
                        (a == b ? 0.0 : costs.TransferMs(e, a, b));
    const double start = timeline.start_ms[static_cast<size_t>(edge.dst)];
    if (!(start >= need) && (std::isnan(start) || late(need, start))) {
      throw Error("hios timeline: edge " + std::to_string(e) + " (operator " +
                  std::to_string(edge.src) + " on device " + std::to_string(a) + " -> operator " +
                  std::to_string(edge.dst) + " on device " + std::to_string(b) + "): starts at " +
                  std::to_string(start) + " ms, expected no earlier than " + std::to_string(need) +
                  " ms");
    }
  }
  for (size_t s = 0; s < lay.refs.size(); ++s) {
    const StageRef ref = lay.refs[s];
    const auto& ops = OpsOf(q, ref);
    const double start = timeline.start_ms[static_cast<size_t>(ops[0])];
    const double end = timeline.finish_ms[static_cast<size_t>(ops[0])];
    const double prev_end =
        ref.index > 0
            ? timeline.finish_ms[static_cast<size_t>(OpsOf(q, {ref.device, ref.index - 1})[0])]
            : 0.0;
    if (std::isnan(start) || late(prev_end, start) ||
        late(start + costs.StageMs(ops, ref.device), end)) {
      throw Error("hios timeline: " + Name(ref) + " runs [" + std::to_string(start) + ", " +
                  std::to_string(end) + "] ms, expected to start after " +
                  std::to_string(prev_end) + " ms and last its price");
    }
  }
}

std::vector<double> Priorities(const Dag& dag, const Costs& costs) {
  const int m = costs.devices();
  std::vector<double> p(static_cast<size_t>(dag.ops()), 0.0);
  const auto& topo = dag.topological();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const OpId v = *it;
    double t = 0;
    for (int d = 0; d < m; ++d) t += costs.OpMs(v, d);
    double tail = 0;
    for (EdgeId e : dag.out_edges(v)) {
      double w = 0;
      for (int a = 0; a < m; ++a) {
        for (int b = 0; b < m; ++b) w += a == b ? 0.0 : costs.TransferMs(e, a, b);
      }
      if (m > 1) w /= m * (m - 1);
      tail = std::max(tail, w + p[static_cast<size_t>(dag.edge(e).dst)]);
    }
    p[static_cast<size_t>(v)] = t / m + tail;
  }
  return p;
}

std::vector<OpId> PriorityOrder(const Dag& dag, const Costs& costs) {
  const std::vector<double> p = Priorities(dag, costs);
  std::vector<OpId> order = dag.topological();
  std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) {
    return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)];
  });
  return order;
}

MultiSchedule SingletonSchedule(int devices, const std::vector<int>& device_of,
                                const std::vector<OpId>& order) {
  MultiSchedule q;
  q.stages.resize(static_cast<size_t>(devices));
  for (OpId op : order) {
    const int d = device_of[static_cast<size_t>(op)];
    if (d < 0) continue;
    if (d >= devices) {
      throw Error("hios schedule: operator " + std::to_string(op) + " is mapped to device " +
                  std::to_string(d) + ", expected one in [0, " + std::to_string(devices) + ")");
    }
    q.stages[static_cast<size_t>(d)].push_back({op});
  }
  return q;
}

}  // namespace ios::hios
