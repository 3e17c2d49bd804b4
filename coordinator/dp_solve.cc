// Solving an enumerated part (coordinator/dp.h): the DP over its states,
// the slack of every stage, and the two baseline schedules.
#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "common/limits.h"
#include "coordinator/dp.h"

namespace ios::coordinator {

PartSpace::Solution PartSpace::Solve(const std::vector<double>& stage_latency_ms) const {
  return SolveCapped(stage_latency_ms, nullptr, 0);
}

PartSpace::Solution PartSpace::SolveCapped(const std::vector<double>& stage_latency_ms,
                                           const std::vector<int64_t>* values, int64_t cap) const {
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
      if (values != nullptr && (*values)[t] > cap) continue;
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

PartSolver::PartSolver(const PartSpace& space)
    : space_(&space),
      latency_(space.stages_.size(), std::numeric_limits<double>::infinity()),
      cost_(space.states_.size(), std::numeric_limits<double>::infinity()),
      second_(space.states_.size(), std::numeric_limits<double>::infinity()),
      choice_(space.states_.size(), 0),
      pending_(space.stages_.size(), 0),
      queued_(space.states_.size(), 0) {
  auto links = std::make_shared<Links>();
  const size_t states = space.states_.size();
  links->order.assign(states, 0);
  for (size_t i = 0; i < space.solve_order_.size(); ++i) {
    links->order[space.solve_order_[i]] = static_cast<uint32_t>(i);
  }
  // Two counting passes each: CSR lists of the states that read a stage
  // (have an ending on it) and of those that read a state (end in it).
  links->readers_begin.assign(space.stages_.size() + 1, 0);
  links->preds_begin.assign(states + 1, 0);
  for (const PartSpace::Transition& tr : space.transitions_) {
    ++links->readers_begin[tr.stage + 1];
    ++links->preds_begin[tr.next_state + 1];
  }
  for (size_t i = 1; i < links->readers_begin.size(); ++i) {
    links->readers_begin[i] += links->readers_begin[i - 1];
  }
  for (size_t i = 1; i < links->preds_begin.size(); ++i) {
    links->preds_begin[i] += links->preds_begin[i - 1];
  }
  links->readers.resize(space.transitions_.size());
  links->preds.resize(space.transitions_.size());
  std::vector<uint32_t> reader_end(links->readers_begin.begin(), links->readers_begin.end() - 1);
  std::vector<uint32_t> pred_end(links->preds_begin.begin(), links->preds_begin.end() - 1);
  for (uint32_t s = 0; s < states; ++s) {
    const PartSpace::State& st = space.states_[s];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      const PartSpace::Transition& tr = space.transitions_[t];
      links->readers[reader_end[tr.stage]++] = s;
      links->preds[pred_end[tr.next_state]++] = s;
    }
  }
  links_ = std::move(links);
  cost_[0] = 0;
}

void PartSolver::Set(int stage, double latency_ms) {
  double& value = latency_.at(static_cast<size_t>(stage));
  if (value == latency_ms) return;
  if (solved_ && !pending_[stage]) {
    pending_[stage] = 1;
    changed_.push_back(stage);
    changed_before_.push_back(value);
  }
  value = latency_ms;
}

bool PartSolver::Recompute(uint32_t s, bool scan) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (!scan && cost_[s] != kInf) {
    // Only the chosen ending became dearer: while it stays below every
    // other ending's last cost (which can only have risen since), it is
    // still the one minimum, so no scan is needed.
    const PartSpace::Transition& tr = space_->transitions_[choice_[s]];
    const double c = cost_[tr.next_state] + latency_[tr.stage];
    if (c < second_[s]) {
      const bool changed = c != cost_[s];
      cost_[s] = c;
      return changed;
    }
  }
  // The loop of PartSpace::Solve for one state: the same sums, the same
  // first ending reaching the minimum; and the least of the others.
  const PartSpace::State& st = space_->states_[s];
  double best = kInf, second = kInf;
  uint32_t pick = 0;
  for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
    const PartSpace::Transition& tr = space_->transitions_[t];
    const double c = cost_[tr.next_state] + latency_[tr.stage];
    if (c < best) {
      second = best;
      best = c;
      pick = t;
    } else if (c < second) {
      second = c;
    }
  }
  choice_[s] = pick;
  second_[s] = second;
  ++scans_;
  const bool changed = best != cost_[s];
  cost_[s] = best;
  return changed;
}

void PartSolver::Enqueue(uint32_t s, bool scan) {
  const char mark = scan ? 2 : 1;
  if (queued_[s]) {
    queued_[s] = std::max(queued_[s], mark);
    return;
  }
  queued_[s] = mark;
  heap_.push_back(links_->order[s]);
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
}

void PartSolver::Solve() {
  if (!solved_) {
    for (uint32_t s : space_->solve_order_) {
      if (s != 0) Recompute(s, true);
    }
    solved_ = true;
    last_recomputed_ = static_cast<int64_t>(space_->solve_order_.size());
    return;
  }
  const Links& links = *links_;
  const auto& transitions = space_->transitions_;
  // A stage that became dearer matters only to the states whose chosen
  // ending is on it (every other ending costs no less than the chosen one
  // did); one that became cheaper may win anywhere it is an ending.
  for (size_t i = 0; i < changed_.size(); ++i) {
    const int stage = changed_[i];
    pending_[stage] = 0;
    const double now = latency_[stage], before = changed_before_[i];
    if (now == before) continue;
    for (uint32_t k = links.readers_begin[stage]; k < links.readers_begin[stage + 1]; ++k) {
      const uint32_t s = links.readers[k];
      if (now < before) {
        Enqueue(s, true);
      } else if (transitions[choice_[s]].stage == static_cast<uint32_t>(stage)) {
        Enqueue(s, false);
      }
    }
  }
  changed_.clear();
  changed_before_.clear();
  // In solve order, every state after the states it ends in: a state is
  // recomputed once, on final values. The same rule upwards: a state that
  // became dearer matters to those that chose to end in it, a cheaper one
  // to every state that can.
  int64_t recomputed = 0;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    const uint32_t s = space_->solve_order_[heap_.back()];
    heap_.pop_back();
    const bool scan = queued_[s] == 2;
    queued_[s] = 0;
    const double before = cost_[s];
    ++recomputed;
    if (!Recompute(s, scan)) continue;
    const bool cheaper = cost_[s] < before;
    for (uint32_t k = links.preds_begin[s]; k < links.preds_begin[s + 1]; ++k) {
      const uint32_t p = links.preds[k];
      if (cheaper) {
        Enqueue(p, true);
      } else if (transitions[choice_[p]].next_state == s) {
        Enqueue(p, false);
      }
    }
  }
  last_recomputed_ = recomputed;
}

void PartSolver::StageSlack(std::vector<double>& out) const {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  out.assign(latency_.size(), kInf);
  const double best = latency_ms();
  if (best == kInf) return;
  // done[s]: the cheapest way from the whole part down to s, final when s
  // comes up in reverse solve order; cost_ is PartSpace::StageSlack's rest.
  done_.assign(cost_.size(), kInf);
  done_[space_->root_] = 0;
  for (auto it = space_->solve_order_.rbegin(); it != space_->solve_order_.rend(); ++it) {
    const double done = done_[*it];
    if (done == kInf) continue;
    const PartSpace::State& st = space_->states_[*it];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      const PartSpace::Transition& tr = space_->transitions_[t];
      const double to_next = done + latency_[tr.stage];
      done_[tr.next_state] = std::min(done_[tr.next_state], to_next);
      const double through = to_next + cost_[tr.next_state];
      if (through < kInf) out[tr.stage] = std::min(out[tr.stage], through - best);
    }
  }
}

void PartSolver::StageSequence(std::vector<int>& out) const {
  out.clear();
  if (latency_ms() == std::numeric_limits<double>::infinity()) return;
  for (uint32_t s = space_->root_; s != 0;) {
    const PartSpace::Transition& tr = space_->transitions_[choice_[s]];
    out.push_back(static_cast<int>(tr.stage));
    s = tr.next_state;
  }
  std::reverse(out.begin(), out.end());
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
