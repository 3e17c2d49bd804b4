#include "memory/memory_order.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <limits>
#include <queue>
#include <tuple>

#include "common/error.h"

namespace ios::memory {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One down-set and the least-peak prefix found to reach it.
struct Entry {
  uint64_t mask = 0;
  int64_t peak = 0;
  int64_t resident = 0;
  uint32_t parent = 0;  // index of the down-set this prefix extends
  int op = -1;          // the operator it ran last
};

enum class StepOutcome { kSolved, kNoSolution, kOverBudget };

struct StepResult {
  StepOutcome outcome = StepOutcome::kNoSolution;
  uint32_t full = 0;  // index of the full part's entry when solved
};

// Stops a step at the state limit or, checked every so many states, the time
// limit.
class StepLimits {
 public:
  explicit StepLimits(const MemoryOrderOptions& options)
      : options_(options), start_(Clock::now()) {}

  bool Exceeded(size_t states) const {
    if (static_cast<int64_t>(states) > options_.max_states_per_step) return true;
    return options_.step_seconds > 0 && states % 1024 == 0 &&
           SecondsSince(start_) > options_.step_seconds;
  }

 private:
  const MemoryOrderOptions& options_;
  Clock::time_point start_;
};

std::vector<int> Backtrack(const std::vector<Entry>& entries, uint32_t last) {
  std::vector<int> ops;
  for (uint32_t e = last; entries[e].op >= 0; e = entries[e].parent) ops.push_back(entries[e].op);
  std::reverse(ops.begin(), ops.end());
  return ops;
}

// Serenity's Algorithm 1 under threshold `tau`: the down-sets of i
// operators from those of i - 1, pruning every prefix whose peak exceeds
// tau. A prefix is dropped only when another reaching the same down-set has
// a lower or equal peak, so whatever reaches the full part is optimal, and
// nothing does exactly when the optimum exceeds tau.
StepResult LayeredDp(const PartDag& dag, const OrderCosts& costs, int64_t tau,
                     const MemoryOrderOptions& options, std::vector<Entry>& entries) {
  const StepLimits limits(options);
  entries.assign(1, Entry{0, 0, costs.Resident(0), 0, -1});
  MaskIndex layer_index;
  size_t begin = 0, end = 1;
  for (int i = 0; i < dag.size(); ++i) {
    layer_index.Clear();
    for (size_t e = begin; e < end; ++e) {
      const Entry from = entries[e];  // entries grows below
      for (uint64_t ready = dag.Ready(from.mask); ready; ready &= ready - 1) {
        const int u = std::countr_zero(ready);
        const StepCost step = costs.Step(from.mask, from.resident, u);
        const int64_t peak = std::max(from.peak, step.bytes);
        if (peak > tau) continue;
        const uint64_t mask = from.mask | OpBit(u);
        const auto [id, fresh] = layer_index.Emplace(mask, static_cast<uint32_t>(entries.size()));
        if (fresh) {
          entries.push_back({mask, peak, step.resident_after, static_cast<uint32_t>(e), u});
          if (limits.Exceeded(entries.size())) return {StepOutcome::kOverBudget, 0};
        } else if (peak < entries[id].peak) {
          entries[id].peak = peak;
          entries[id].parent = static_cast<uint32_t>(e);
          entries[id].op = u;
        }
      }
    }
    begin = end;
    end = entries.size();
    if (begin == end) return {StepOutcome::kNoSolution, 0};
  }
  return {StepOutcome::kSolved, static_cast<uint32_t>(begin)};
}

// Expands down-sets in order of the least peak reaching them (more
// operators first among equals): a bottleneck shortest path, so the first
// time the full part comes off the queue its peak is the optimum, and no
// down-set whose every prefix exceeds the optimum is ever expanded.
StepResult BestFirst(const PartDag& dag, const OrderCosts& costs, const MemoryOrderOptions& options,
                     std::vector<Entry>& entries) {
  const StepLimits limits(options);
  entries.assign(1, Entry{0, 0, costs.Resident(0), 0, -1});
  MaskIndex index;
  index.Emplace(0, 0);
  using Key = std::tuple<int64_t, int, uint32_t>;  // peak, -operators, entry
  std::priority_queue<Key, std::vector<Key>, std::greater<>> queue;
  queue.emplace(0, 0, 0);
  std::vector<bool> expanded(1, false);
  while (!queue.empty()) {
    const auto [peak, minus_ops, e] = queue.top();
    queue.pop();
    if (expanded[e] || peak != entries[e].peak) continue;
    expanded[e] = true;
    const Entry from = entries[e];
    if (from.mask == dag.full()) return {StepOutcome::kSolved, e};
    for (uint64_t ready = dag.Ready(from.mask); ready; ready &= ready - 1) {
      const int u = std::countr_zero(ready);
      const StepCost step = costs.Step(from.mask, from.resident, u);
      const int64_t next_peak = std::max(from.peak, step.bytes);
      const uint64_t mask = from.mask | OpBit(u);
      const auto [id, fresh] = index.Emplace(mask, static_cast<uint32_t>(entries.size()));
      if (fresh) {
        entries.push_back({mask, next_peak, step.resident_after, e, u});
        expanded.push_back(false);
        if (limits.Exceeded(entries.size())) return {StepOutcome::kOverBudget, 0};
      } else if (next_peak < entries[id].peak && !expanded[id]) {
        entries[id].peak = next_peak;
        entries[id].parent = e;
        entries[id].op = u;
      } else {
        continue;
      }
      queue.emplace(next_peak, minus_ops - 1, id);
    }
  }
  return {StepOutcome::kNoSolution, 0};  // unreachable for a DAG
}

std::string Describe(const char* what, int64_t value) {
  char text[96];
  std::snprintf(text, sizeof text, "%s %lld", what, static_cast<long long>(value));
  return text;
}

}  // namespace

int64_t PeakOfOrder(const OrderCosts& costs, std::span<const int> order) {
  uint64_t done = 0;
  int64_t resident = costs.Resident(0), peak = 0;
  for (int u : order) {
    const StepCost step = costs.Step(done, resident, u);
    peak = std::max(peak, step.bytes);
    resident = step.resident_after;
    done |= OpBit(u);
  }
  return peak;
}

std::vector<int> KahnOrder(const PartDag& dag) {
  std::vector<int> order;
  std::vector<int> missing(static_cast<size_t>(dag.size()));
  std::queue<int> ready;
  for (int u = 0; u < dag.size(); ++u) {
    missing[static_cast<size_t>(u)] = std::popcount(dag.predecessors(u));
    if (missing[static_cast<size_t>(u)] == 0) ready.push(u);
  }
  while (!ready.empty()) {
    const int u = ready.front();
    ready.pop();
    order.push_back(u);
    for (uint64_t rest = dag.successors(u); rest; rest &= rest - 1) {
      const int v = std::countr_zero(rest);
      if (--missing[static_cast<size_t>(v)] == 0) ready.push(v);
    }
  }
  return order;
}

std::vector<int> GreedyMemoryOrder(const PartDag& dag, const OrderCosts& costs) {
  std::vector<int> order;
  uint64_t done = 0;
  int64_t resident = costs.Resident(0);
  while (done != dag.full()) {
    int best = -1;
    StepCost best_step;
    for (uint64_t ready = dag.Ready(done); ready; ready &= ready - 1) {
      const int u = std::countr_zero(ready);
      const StepCost step = costs.Step(done, resident, u);
      if (best < 0 || std::tie(step.bytes, step.resident_after) <
                          std::tie(best_step.bytes, best_step.resident_after)) {
        best = u;
        best_step = step;
      }
    }
    order.push_back(best);
    done |= OpBit(best);
    resident = best_step.resident_after;
  }
  return order;
}

PartOrder OptimalPartOrder(const PartDag& dag, const OrderCosts& costs,
                           const MemoryOrderOptions& options) {
  if (costs.operators() != dag.size()) {
    throw Error("memory order: the cost model has " + std::to_string(costs.operators()) +
                " operators, the part " + std::to_string(dag.size()));
  }
  const Clock::time_point start = Clock::now();
  PartOrder result;
  // The fallback, and the first threshold: a known order's peak.
  std::vector<int> kahn = KahnOrder(dag), greedy = GreedyMemoryOrder(dag, costs);
  const int64_t kahn_peak = PeakOfOrder(costs, kahn), greedy_peak = PeakOfOrder(costs, greedy);
  const bool greedy_better = greedy_peak < kahn_peak;
  const int64_t known_peak = greedy_better ? greedy_peak : kahn_peak;
  const auto finish = [&](std::vector<int> ops, int64_t peak, bool exact, std::string why) {
    result.ops = std::move(ops);
    result.peak = peak;
    result.exact = exact;
    result.why = std::move(why);
    result.seconds = SecondsSince(start);
    return result;
  };
  const int64_t lower_bound = costs.LowerBound();
  if (known_peak <= lower_bound) {  // nothing to search: the known order is optimal
    return finish(greedy_better ? greedy : kahn, known_peak, true, "");
  }
  std::vector<Entry> entries;
  int64_t infeasible = lower_bound - 1;                       // no order fits under this
  int64_t over_budget = std::numeric_limits<int64_t>::max();  // least tau that was too costly
  int64_t tau = known_peak;
  std::string last;
  while (result.steps < std::max(1, options.max_steps)) {
    ++result.steps;
    const StepResult step = options.engine == MemoryOrderOptions::Engine::kBestFirst
                                ? BestFirst(dag, costs, options, entries)
                                : LayeredDp(dag, costs, tau, options, entries);
    result.states += static_cast<int64_t>(entries.size());
    if (step.outcome == StepOutcome::kSolved) {
      return finish(Backtrack(entries, step.full), entries[step.full].peak, true, "");
    }
    if (options.engine == MemoryOrderOptions::Engine::kBestFirst) {
      last = "best-first search over its state budget";
      break;
    }
    if (step.outcome == StepOutcome::kNoSolution) {
      infeasible = tau;
    } else {
      over_budget = tau;
      last = Describe("over its state or time budget at threshold", tau);
    }
    const int64_t upper = std::min(over_budget, known_peak);
    if (upper - infeasible <= 1) break;
    tau = infeasible + (upper - infeasible) / 2;
  }
  std::string why = "memory order: " + last + " after " + std::to_string(result.steps) +
                    " step(s); using the " + (greedy_better ? "greedy" : "Kahn") + " order (" +
                    Describe("peak", known_peak) + ", " + Describe("lower bound", lower_bound) +
                    ")";
  return finish(greedy_better ? std::move(greedy) : std::move(kahn), known_peak, false,
                std::move(why));
}

}  // namespace ios::memory
