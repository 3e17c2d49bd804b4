// Solving an enumerated part (coordinator/dp.h) under a cap on a value per
// transition, and the latency/value front.
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
  std::vector<double> capped = stage_latency_ms;
  if (capped.size() != stages_.size()) {
    throw Error("latency table has " + std::to_string(capped.size()) + " entries for " +
                std::to_string(stages_.size()) + " stages");
  }
  // The same DP as Solve, skipping the transitions over the cap: a stage's
  // value depends on what ran before it, so the cap is per transition, not
  // per stage.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> cost(states_.size(), kInf);
  std::vector<uint32_t> choice(states_.size(), 0);
  cost[0] = 0;
  for (uint32_t s : solve_order_) {
    const State& st = states_[s];
    for (uint32_t t = st.first_transition; t < st.transition_end; ++t) {
      if (values[t] > cap) continue;
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
  std::reverse(solution.stage_sequence.begin(), solution.stage_sequence.end());
  return solution;
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

}  // namespace ios::coordinator
