// The search's last step: its best candidates run end to end on the
// measuring device, and the fastest as measured is returned (issue 22,
// docs/execution.md "Verified schedules"). The DP adds up stages measured
// one at a time; a whole network runs them back to back, where caches,
// launches and overlap differ. A schedule the DP ranks first can lose to
// greedy or sequential as it runs: measuring those few runs is cheap beside
// the search and settles it.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "coordinator/search.h"

namespace ios::coordinator {
namespace {

// The stages of the IOS schedule the DP expects to gain the most from, as
// (saving, stage id): a multi-operator stage whose operators alone cost
// more than it does. Where a schedule's price is most wrong, it is wrong
// about those (their operators were measured alone and together, never as
// the network runs them).
std::vector<std::pair<double, int>> RiskiestStages(const SearchOutcome& outcome) {
  std::map<NodeId, double> alone;  // an operator's latency as a stage of its own
  for (const auto& block : outcome.sequential.blocks) {
    for (const ScheduledStage& s : block) alone[s.stage.groups.front().front()] = s.latency_ms;
  }
  std::vector<std::pair<double, int>> stages;
  std::set<int> listed;  // a stage repeated in several blocks (Inception V3) is forbidden once
  for (const auto& block : outcome.ios.blocks) {
    for (const ScheduledStage& s : block) {
      if (s.stage.OperatorCount() < 2 || !listed.insert(s.stage_id).second) continue;
      double sum = 0;
      for (const auto& group : s.stage.groups) {
        for (const NodeId id : group) {
          const auto it = alone.find(id);
          if (it != alone.end()) sum += it->second;
        }
      }
      stages.emplace_back(sum - s.latency_ms, s.stage_id);
    }
  }
  std::sort(stages.begin(), stages.end(), std::greater<>());
  return stages;
}

std::vector<int> StageIds(const Schedule& schedule) {
  std::vector<int> ids;
  for (const auto& block : schedule.blocks) {
    for (const ScheduledStage& s : block) ids.push_back(s.stage_id);
  }
  return ids;
}

// The candidates, distinct by their stages: the IOS optimum, the
// alternatives, greedy, sequential (a baseline with a failed stage cannot
// run, and is left out).
std::vector<VerifiedSchedule> Candidates(const Graph& graph, const SearchOutcome& outcome) {
  std::vector<VerifiedSchedule> candidates;
  std::set<std::vector<int>> seen;
  const MemoryPlanInfo& memory = outcome.plan.memory;
  const int batch = outcome.options.batch_size;
  const auto add = [&](std::string name, Schedule schedule) {
    if (!std::isfinite(schedule.latency_ms) || !seen.insert(StageIds(schedule)).second) {
      return false;
    }
    // Under a memory cap only what fits may be returned (the DP's own
    // schedules fit by construction; the baselines may not).
    if (schedule.peak_bytes < 0) schedule.peak_bytes = SchedulePeakBytes(graph, schedule, batch);
    if (memory.active && schedule.peak_bytes > memory.cap * batch) {
      spdlog::info("verify: {} left out: its peak of {} bytes is over the memory cap of {}", name,
                   schedule.peak_bytes, memory.cap * batch);
      return false;
    }
    candidates.push_back({std::move(name), std::move(schedule), {}, false});
    return true;
  };
  add("ios", outcome.ios);
  const int wanted =
      std::clamp(outcome.options.verify.alternatives, 0, VerifyOptions::kMaxAlternatives);
  int found = 0;
  for (const auto& [saving, id] : RiskiestStages(outcome)) {
    if (found >= wanted) break;
    std::vector<double> latency = outcome.table.latency_ms;
    latency[id] = std::numeric_limits<double>::infinity();
    try {
      Schedule alternative =
          SolveSchedule(outcome.plan, latency, graph.blocks.size(), &outcome.table, &graph);
      if (add("alternative " + std::to_string(found + 1), std::move(alternative))) ++found;
    } catch (const Error& e) {
      spdlog::debug("verify: no schedule without stage {}: {}", id, e.what());
    }
  }
  add("greedy", outcome.greedy);
  add("sequential", outcome.sequential);
  return candidates;
}

}  // namespace

MeasureSettings DefaultVerifySettings(DeviceTiming timing) {
  MeasureSettings settings;
  if (timing == DeviceTiming::kModelled) {
    settings.warmup = 0;
    settings.number = 1;
    settings.repeat = 1;
    return settings;
  }
  settings.warmup = 2;
  settings.number = 1;
  settings.repeat = 10;
  settings.max_repeat = 30;
  settings.max_relative_spread = 0.05;
  return settings;
}

NetworkSpec NetworkOf(const Graph& graph, const Schedule& schedule, uint64_t weight_seed) {
  NetworkSpec spec{graph, {}, weight_seed};
  for (const auto& block : schedule.blocks) {
    for (const ScheduledStage& s : block) spec.stages.push_back(s.stage);
  }
  return spec;
}

namespace {

// Looks each candidate's figure up in `store`, measures the missing (and
// the transient failures), a pass at a time as the budget allows (each
// pass one batch, which the farm spreads over its workers), and stores what
// it measured.
// `search_s`: the time of the search before it, against which the passes
// after the first are budgeted (infinite: every pass). Returns the passes
// run and planned (0, 0 when every figure came from the DB).
std::pair<int, int> MeasureOrReuse(const Graph& graph, const std::string& model,
                                   const SearchOptions& options, const DeviceInfo& device,
                                   double search_s, std::vector<VerifiedSchedule>& candidates,
                                   db::ProfileStore& store, Measurer& measurer) {
  std::vector<NetworkSpec> networks;
  std::vector<db::NetworkRunKey> keys;
  for (const VerifiedSchedule& c : candidates) {
    networks.push_back(NetworkOf(graph, c.schedule, options.verify.weight_seed));
    keys.push_back({NetworkKey(networks.back()), device.fingerprint, options.batch_size,
                    options.verify.settings.Key()});
  }
  std::vector<const NetworkSpec*> missing;
  std::vector<size_t> missing_index;
  for (size_t i = 0; i < networks.size(); ++i) {
    std::optional<db::NetworkRunRow> stored = store.LookupNetworkRun(keys[i]);
    if (stored && !IsTransient(stored->result.error)) {
      candidates[i].measured = stored->result;
      candidates[i].reused = true;
      continue;
    }
    missing.push_back(&networks[i]);
    missing_index.push_back(i);
  }
  if (missing.empty()) return {0, 0};
  const int passes =
      device.simulated ? 1 : std::clamp(options.verify.passes, 1, VerifyOptions::kMaxPasses);
  const double budget_s = options.verify.budget_fraction * search_s;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  // results[pass][k]: candidate missing[k]'s figure in that pass.
  std::vector<std::vector<MeasureResult>> results;
  double last_pass_s = 0;
  for (int pass = 0; pass < passes; ++pass) {
    if (pass > 0 && seconds_since(start) + last_pass_s > budget_s) {
      spdlog::info(
          "verification: {} of {} passes; another would take about {:.1f} s, past the budget of "
          "{:.1f} s ({:g}% of the search's {:.1f} s, --verify-budget)",
          pass, passes, last_pass_s, budget_s, 100 * options.verify.budget_fraction, search_s);
      break;
    }
    // Alternating order: a slow spell of a shared machine does not fall on
    // the same candidate in every pass.
    std::vector<const NetworkSpec*> queries = missing;
    if (pass % 2 == 1) std::reverse(queries.begin(), queries.end());
    const auto pass_start = std::chrono::steady_clock::now();
    std::vector<MeasureResult> figures =
        measurer.MeasureNetworks(queries, options.batch_size, options.verify.settings);
    last_pass_s = seconds_since(pass_start);
    if (pass % 2 == 1) std::reverse(figures.begin(), figures.end());
    results.push_back(std::move(figures));
  }
  for (size_t k = 0; k < missing.size(); ++k) {
    const size_t i = missing_index[k];
    // The pass with the lowest median, of those that ran.
    std::optional<MeasureResult> best;
    for (const std::vector<MeasureResult>& pass : results) {
      const MeasureResult& r = pass.at(k);
      if (!best || (r.ok() && (!best->ok() || r.median_ms < best->median_ms))) best = r;
    }
    candidates[i].measured = *best;
    db::NetworkRunRow row;
    row.key = keys[i];
    row.model = model;
    row.schedule = candidates[i].name;
    row.stages = static_cast<int>(networks[i].stages.size());
    row.predicted_ms = candidates[i].schedule.latency_ms;
    row.result = candidates[i].measured;
    store.StoreNetworkRun(row);
  }
  return {static_cast<int>(results.size()), passes};
}

}  // namespace

Verification VerifyCandidates(const Graph& graph, const SearchOutcome& outcome,
                              db::ProfileStore& store, Measurer& measurer) {
  Verification verification;
  verification.candidates = Candidates(graph, outcome);
  if (verification.candidates.empty()) {
    verification.unverified_reason = "the DP's optimum has a failed stage";
    return verification;
  }
  std::tie(verification.passes_run, verification.passes_planned) =
      MeasureOrReuse(graph, outcome.model, outcome.options, outcome.device,
                     outcome.enumerate_s + outcome.measure_s + outcome.solve_s,
                     verification.candidates, store, measurer);
  // The fastest as measured; ties go to the earlier candidate (the IOS
  // optimum first).
  bool any = false;
  for (size_t i = 0; i < verification.candidates.size(); ++i) {
    const MeasureResult& m = verification.candidates[i].measured;
    if (!m.ok()) continue;
    if (!any || m.median_ms < verification.candidates[verification.chosen].measured.median_ms) {
      verification.chosen = i;
    }
    any = true;
  }
  if (!any) {
    const MeasureResult& first = verification.candidates.front().measured;
    verification.unverified_reason =
        std::string(ToString(first.error)) + ": " + first.error_message;
    verification.chosen = 0;
    spdlog::warn("verify: no candidate ran end to end ({}); returning the DP's optimum unverified",
                 verification.unverified_reason);
  }
  return verification;
}

VerifiedSchedule VerifySchedule(const Graph& graph, const std::string& model,
                                const std::string& name, const Schedule& schedule,
                                const SearchOptions& options, const DeviceInfo& device,
                                db::ProfileStore& store, Measurer& measurer) {
  std::vector<VerifiedSchedule> one{{name, schedule, {}, false}};
  // One schedule asked for by name: every pass, no search to budget against.
  MeasureOrReuse(graph, model, options, device, std::numeric_limits<double>::infinity(), one, store,
                 measurer);
  return std::move(one.front());
}

const Schedule& SearchOutcome::Returned() const {
  return verification.ran() ? verification.candidates[verification.chosen].schedule : ios;
}

std::string SearchOutcome::ReturnedName() const {
  return verification.ran() ? verification.candidates[verification.chosen].name : "ios";
}

}  // namespace ios::coordinator
