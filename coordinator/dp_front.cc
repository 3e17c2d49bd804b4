// An enumerated part (coordinator/dp.h) under a second measure: a value per
// transition (the memory search's bytes), solved under a cap, restricted to
// what fits, and the latency/value front; and one-path spaces of a given
// order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "coordinator/dp.h"

namespace ios::coordinator {
namespace {

constexpr int64_t kNoValue = std::numeric_limits<int64_t>::max();

}  // namespace

std::vector<int64_t> PartSpace::TransitionValues(
    const std::function<int64_t(uint64_t before, uint64_t ending)>& value) const {
  std::vector<int64_t> values(transitions_.size());
  for (size_t t = 0; t < transitions_.size(); ++t) {
    const Transition& tr = transitions_[t];
    values[t] = value(states_[tr.next_state].mask, stages_[tr.stage].ops);
  }
  return values;
}

PartSpace::Solution PartSpace::SolveWithin(const std::vector<double>& stage_latency_ms,
                                           const std::vector<int64_t>& values, int64_t cap) const {
  if (values.size() != transitions_.size()) {
    throw Error("value table has " + std::to_string(values.size()) + " entries for " +
                std::to_string(transitions_.size()) + " transitions");
  }
  // A stage's value depends on what ran before it: the cap is per
  // transition, not per stage.
  return SolveCapped(stage_latency_ms, &values, cap);
}

int64_t PartSpace::LeastValue(const std::vector<int64_t>& values) const {
  if (values.size() != transitions_.size()) {
    throw Error("value table has " + std::to_string(values.size()) + " entries for " +
                std::to_string(transitions_.size()) + " transitions");
  }
  // A bottleneck path: the least over endings of the larger of the ending's
  // value and the best of the rest.
  std::vector<int64_t> least(states_.size(), kNoValue);
  least[0] = std::numeric_limits<int64_t>::min();
  for (uint32_t s : solve_order_) {
    const State& st = states_[s];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      const int64_t rest = least[transitions_[t].next_state];
      if (rest == kNoValue) continue;
      least[s] = std::min(least[s], std::max(rest, values[t]));
    }
  }
  return least[root_];
}

std::vector<PartSpace::FrontPoint> PartSpace::Front(const std::vector<double>& stage_latency_ms,
                                                    const std::vector<int64_t>& values) const {
  const int64_t least = LeastValue(values);
  std::vector<int64_t> caps;  // the caps at which SolveWithin can change
  for (int64_t v : values) {
    if (v >= least) caps.push_back(v);
  }
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  std::vector<FrontPoint> front;
  if (caps.empty()) return front;
  std::vector<Solution> at(caps.size());
  std::vector<bool> solved(caps.size(), false);
  const auto solve = [&](size_t i) -> const Solution& {
    if (!solved[i]) {
      at[i] = SolveWithin(stage_latency_ms, values, caps[i]);
      solved[i] = true;
    }
    return at[i];
  };
  if (solve(0).latency_ms == std::numeric_limits<double>::infinity()) return front;
  // The latency is non-increasing in the cap: between two caps of equal
  // latency nothing changes, so only intervals whose ends differ are split.
  // Equal up to rounding: two schedules of the same stages summed in another
  // order are not a trade-off.
  const auto same = [](double a, double b) { return a - b <= 1e-9 * std::max(1.0, std::abs(a)); };
  std::vector<size_t> drops;  // indices where the latency is lower than just below
  const auto split = [&](auto&& self, size_t lo, size_t hi) -> void {
    if (same(solve(lo).latency_ms, solve(hi).latency_ms)) return;
    if (hi == lo + 1) {
      drops.push_back(hi);
      return;
    }
    const size_t mid = lo + (hi - lo) / 2;
    self(self, lo, mid);
    self(self, mid, hi);
  };
  split(split, 0, caps.size() - 1);
  std::sort(drops.begin(), drops.end());
  front.push_back({caps[0], solve(0)});
  for (size_t i : drops) front.push_back({caps[i], solve(i)});
  return front;
}

PartSpace PartSpace::Sequence(const Graph& graph, const std::vector<NodeId>& part,
                              const std::vector<int>& order) {
  if (part.empty()) throw Error("cannot schedule an empty part");
  const PartDag dag = PartDag::Make(graph, part);
  PartSpace space;
  space.part_ = part;
  space.closure_ = dag.closures();
  space.states_.push_back({0, 0, 0});
  space.solve_order_.push_back(0);
  uint64_t done = 0;
  for (int u : order) {
    if (u < 0 || u >= dag.size() || (done & OpBit(u)) || (dag.predecessors(u) & ~done)) {
      throw Error("PartSpace::Sequence: the order is not a topological order of the part (at " +
                  std::to_string(u) + ")");
    }
    const uint32_t transition = NarrowId(space.transitions_.size(), "transition");
    space.transitions_.push_back(
        {NarrowId(space.stages_.size(), "stage"), NarrowId(space.states_.size() - 1, "state")});
    space.stages_.push_back({OpBit(u), Strategy::kParallel});
    done |= OpBit(u);
    space.states_.push_back({done, transition, transition + 1});
    space.solve_order_.push_back(NarrowId(space.states_.size() - 1, "state"));
  }
  if (done != dag.full()) {
    throw Error("PartSpace::Sequence: the order leaves operators of the part out");
  }
  space.root_ = static_cast<uint32_t>(space.states_.size() - 1);
  space.schedule_count_ = 1;
  space.width_ = 1;
  return space;
}

PartSpace PartSpace::Restricted(
    const std::function<bool(uint64_t before, uint64_t ending)>& keep) const {
  std::vector<char> kept(transitions_.size(), 0);
  for (size_t t = 0; t < transitions_.size(); ++t) {
    const Transition& tr = transitions_[t];
    kept[t] = keep(states_[tr.next_state].mask, stages_[tr.stage].ops) ? 1 : 0;
  }
  // Reachable from the whole part through kept transitions: solve order
  // lists every state after its successors, so walking it backwards visits
  // a state after every state with an ending to it.
  std::vector<char> reachable(states_.size(), 0);
  reachable[root_] = 1;
  for (auto it = solve_order_.rbegin(); it != solve_order_.rend(); ++it) {
    if (!reachable[*it]) continue;
    const State& st = states_[*it];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      if (kept[t]) reachable[transitions_[t].next_state] = 1;
    }
  }
  reachable[0] = 1;  // the empty state stays state 0
  std::vector<uint32_t> state_id(states_.size(), 0), stage_id(stages_.size(), 0);
  std::vector<char> stage_used(stages_.size(), 0);
  PartSpace out;
  out.part_ = part_;
  out.closure_ = closure_;
  out.width_ = width_;
  for (size_t s = 0; s < states_.size(); ++s) {
    if (!reachable[s]) continue;
    state_id[s] = NarrowId(out.states_.size(), "state");
    out.states_.push_back({states_[s].mask, 0, 0});
    const State& st = states_[s];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      if (kept[t]) stage_used[transitions_[t].stage] = 1;
    }
  }
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (!stage_used[i]) continue;
    stage_id[i] = NarrowId(out.stages_.size(), "stage");
    out.stages_.push_back(stages_[i]);
  }
  for (size_t s = 0; s < states_.size(); ++s) {
    if (!reachable[s]) continue;
    State& copy = out.states_[state_id[s]];
    copy.first_transition = NarrowId(out.transitions_.size(), "transition");
    const State& st = states_[s];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      if (!kept[t]) continue;
      out.transitions_.push_back(
          {stage_id[transitions_[t].stage], state_id[transitions_[t].next_state]});
    }
    copy.transition_end = NarrowId(out.transitions_.size(), "transition");
  }
  for (uint32_t s : solve_order_) {
    if (reachable[s]) out.solve_order_.push_back(state_id[s]);
  }
  out.root_ = state_id[root_];
  std::vector<double> paths(out.states_.size(), 0.0);
  paths[0] = 1.0;
  for (uint32_t s : out.solve_order_) {
    const State& st = out.states_[s];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      paths[s] += paths[out.transitions_[t].next_state];
    }
  }
  out.schedule_count_ = paths[out.root_];
  return out;
}

}  // namespace ios::coordinator
