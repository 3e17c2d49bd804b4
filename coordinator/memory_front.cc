#include "coordinator/memory_front.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>

#include "common/error.h"

namespace ios::coordinator {
namespace {

using Kind = MemoryFrontPoint::Kind;

// Latencies are sums of measured figures: two schedules of the same stages
// in another order may differ in the last bits.
bool SameLatency(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(a, b); }

}  // namespace

const char* ToString(Kind kind) {
  switch (kind) {
    case Kind::kLeastPeak:
      return "least peak";
    case Kind::kBudget:
      return "budget";
    case Kind::kSequentialPeak:
      return "sequential's peak";
    case Kind::kUnconstrained:
      return "unconstrained";
  }
  return "?";
}

int MemoryFront::DominatedCount() const {
  return static_cast<int>(
      std::count_if(points.begin(), points.end(), [](const auto& p) { return p.dominated; }));
}

void MarkDominated(std::vector<MemoryFrontPoint>& points) {
  for (size_t i = 0; i < points.size(); ++i) {
    const Schedule& p = points[i].schedule;
    points[i].dominated = false;
    for (size_t j = 0; j < points.size() && !points[i].dominated; ++j) {
      if (j == i) continue;
      const Schedule& q = points[j].schedule;
      const bool as_fast = q.latency_ms < p.latency_ms || SameLatency(q.latency_ms, p.latency_ms);
      if (!as_fast || q.peak_bytes > p.peak_bytes) continue;
      const bool same = SameLatency(q.latency_ms, p.latency_ms) && q.peak_bytes == p.peak_bytes;
      // Of two equal points the one listed first stays.
      points[i].dominated = !same || j < i;
    }
  }
}

MemoryFront SearchMemoryFront(const Graph& graph, const std::string& model,
                              const SearchOptions& options, const MemoryFrontOptions& front_options,
                              db::ProfileStore& store, Measurer& measurer,
                              const std::function<void(const MemoryFrontStep&)>& step,
                              const std::function<void(const MeasureProgress&)>& progress,
                              const std::function<void(const PlanProgress&)>& plan_progress) {
  if (front_options.points < MemoryFrontOptions::kMinPoints ||
      front_options.points > MemoryFrontOptions::kMaxPoints) {
    throw Error("memory front: " + std::to_string(front_options.points) +
                " points asked for; expected " + std::to_string(MemoryFrontOptions::kMinPoints) +
                " to " + std::to_string(MemoryFrontOptions::kMaxPoints));
  }
  MemoryFront front;
  // The count as planned (the search at the sequential peak may prove
  // unneeded), then as known.
  int index = 0, count = front_options.points + (front_options.at_sequential_peak ? 1 : 0);
  auto search = [&](Kind kind, int64_t budget_bytes) {
    if (step) step({index, count, kind, budget_bytes});
    ++index;
    SearchOptions one = options;
    one.memory = {};
    one.memory.budget_bytes = budget_bytes;
    if (kind == Kind::kLeastPeak) one.memory.objective = MemoryOptions::Objective::kMemory;
    // Only the unconstrained search is run end to end: it gives the
    // schedule --out writes and the baselines.
    one.verify.enabled = one.verify.enabled && kind == Kind::kUnconstrained;
    const auto start = std::chrono::steady_clock::now();
    SearchOutcome outcome = RunSearch(graph, model, one, store, measurer, progress, plan_progress);
    MemoryFrontPoint point;
    point.kind = kind;
    point.budget_bytes = budget_bytes;
    point.schedule = outcome.ios;
    point.measured = outcome.table.stats.measured;
    point.search_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    front.points.push_back(std::move(point));
    return outcome;
  };
  front.unconstrained = search(Kind::kUnconstrained, 0);
  const int64_t most = front.unconstrained.ios.peak_bytes;
  const int64_t sequential = front.unconstrained.sequential.peak_bytes;
  const bool by_sequential = front_options.at_sequential_peak && sequential < most;
  count = front_options.points + (by_sequential ? 1 : 0);
  front.least_exact = search(Kind::kLeastPeak, 0).plan.memory.least_exact;
  const int64_t least = front.points.back().schedule.peak_bytes;
  // Budgets strictly between the two peaks: at either end the search would
  // repeat one already made.
  std::vector<std::pair<int64_t, Kind>> budgets;
  const int between = front_options.points - 2;
  for (int i = 1; i <= between && least < most; ++i) {
    const double share = static_cast<double>(i) / (between + 1);
    const auto budget = least + static_cast<int64_t>(static_cast<double>(most - least) * share);
    if (budget > least && budget < most) budgets.emplace_back(budget, Kind::kBudget);
  }
  if (by_sequential && sequential > least) budgets.emplace_back(sequential, Kind::kSequentialPeak);
  // Of equal budgets the one at the sequential peak keeps its name.
  std::sort(budgets.begin(), budgets.end(), [](const auto& a, const auto& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  });
  budgets.erase(std::unique(budgets.begin(), budgets.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                budgets.end());
  count = 2 + static_cast<int>(budgets.size());
  for (const auto& [budget, kind] : budgets) search(kind, budget);
  std::stable_sort(front.points.begin(), front.points.end(), [](const auto& a, const auto& b) {
    return std::tuple(a.schedule.peak_bytes, a.schedule.latency_ms, a.kind) <
           std::tuple(b.schedule.peak_bytes, b.schedule.latency_ms, b.kind);
  });
  MarkDominated(front.points);
  return front;
}

}  // namespace ios::coordinator
