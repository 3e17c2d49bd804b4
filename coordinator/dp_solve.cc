// Solving an enumerated part (coordinator/dp.h): the DP over its states,
// the slack of every stage, and the two baseline schedules.
#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "common/limits.h"
#include "coordinator/dp.h"

namespace ios::coordinator {

PartSpace::Solution PartSpace::Solve(const std::vector<double>& stage_latency_ms) const {
  if (stage_latency_ms.size() != stages_.size()) {
    throw Error("latency table has " + std::to_string(stage_latency_ms.size()) + " entries for " +
                std::to_string(stages_.size()) + " stages");
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> cost(states_.size(), kInf);
  std::vector<uint32_t> choice(states_.size(), 0);
  cost[0] = 0;
  for (uint32_t s : solve_order_) {
    const State& st = states_[s];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      const Transition& tr = transitions_[t];
      const double c = cost[tr.next_state] + stage_latency_ms[tr.stage];
      if (c < cost[s]) {
        cost[s] = c;
        choice[s] = t;
      }
    }
  }
  Solution solution;
  solution.latency_ms = cost[root_];
  if (cost[root_] == kInf) return solution;
  for (uint32_t s = root_; s != 0;) {
    const Transition& tr = transitions_[choice[s]];
    solution.stage_sequence.push_back(static_cast<int>(tr.stage));
    s = tr.next_state;
  }
  // The DP peels endings off the back: reverse into execution order.
  std::reverse(solution.stage_sequence.begin(), solution.stage_sequence.end());
  return solution;
}

std::vector<double> PartSpace::StageSlack(const std::vector<double>& stage_latency_ms) const {
  if (stage_latency_ms.size() != stages_.size()) {
    throw Error("latency table has " + std::to_string(stage_latency_ms.size()) + " entries for " +
                std::to_string(stages_.size()) + " stages");
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // rest[s]: the cheapest way to run the operators of state s (what Solve
  // computes); done[s]: the cheapest way from the whole part down to s.
  std::vector<double> rest(states_.size(), kInf), done(states_.size(), kInf);
  rest[0] = 0;
  for (uint32_t s : solve_order_) {
    const State& st = states_[s];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      const Transition& tr = transitions_[t];
      rest[s] = std::min(rest[s], rest[tr.next_state] + stage_latency_ms[tr.stage]);
    }
  }
  done[root_] = 0;
  for (auto it = solve_order_.rbegin(); it != solve_order_.rend(); ++it) {
    const State& st = states_[*it];
    if (done[*it] == kInf) continue;
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      const Transition& tr = transitions_[t];
      done[tr.next_state] = std::min(done[tr.next_state], done[*it] + stage_latency_ms[tr.stage]);
    }
  }
  std::vector<double> slack(stages_.size(), kInf);
  const double best = rest[root_];
  if (best == kInf) return slack;
  for (uint32_t s : solve_order_) {
    if (done[s] == kInf) continue;
    const State& st = states_[s];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      const Transition& tr = transitions_[t];
      const double through = done[s] + stage_latency_ms[tr.stage] + rest[tr.next_state];
      if (through < kInf) slack[tr.stage] = std::min(slack[tr.stage], through - best);
    }
  }
  return slack;
}

std::vector<Stage> SequentialSchedule(const std::vector<NodeId>& ops) {
  std::vector<Stage> stages;
  for (NodeId id : ops) stages.push_back({Strategy::kParallel, {{id}}});
  return stages;
}

std::vector<Stage> GreedySchedule(const Graph& graph, const std::vector<NodeId>& ops) {
  std::unordered_map<NodeId, int> pending;  // unscheduled producers inside `ops`
  std::unordered_map<NodeId, std::vector<NodeId>> consumers;
  for (NodeId id : ops) pending[id] = 0;
  for (NodeId id : ops) {
    std::vector<NodeId> producers;
    for (const Term& term : graph.node(id).inputs) {
      for (const Slice& s : term) {
        if (pending.count(s.producer) &&
            std::find(producers.begin(), producers.end(), s.producer) == producers.end()) {
          producers.push_back(s.producer);
        }
      }
    }
    pending[id] = static_cast<int>(producers.size());
    for (NodeId p : producers) consumers[p].push_back(id);
  }
  std::vector<NodeId> ready;
  for (NodeId id : ops) {
    if (pending[id] == 0) ready.push_back(id);
  }
  std::vector<Stage> stages;
  while (!ready.empty()) {
    // A stage wider than a worker can measure would come back unsupported
    // and price the whole baseline as failed: the rest waits a stage.
    const size_t take = std::min(ready.size(), limits::kMaxGroups);
    Stage stage{Strategy::kParallel, {}};
    std::vector<NodeId> next(ready.begin() + static_cast<std::ptrdiff_t>(take), ready.end());
    for (size_t i = 0; i < take; ++i) {
      const NodeId id = ready[i];
      stage.groups.push_back({id});
      for (NodeId c : consumers[id]) {
        if (--pending[c] == 0) next.push_back(c);
      }
    }
    std::sort(next.begin(), next.end());
    stages.push_back(std::move(stage));
    ready = std::move(next);
  }
  return stages;
}

}  // namespace ios::coordinator
