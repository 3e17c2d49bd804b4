// The search's last step: its best candidates run end to end on the
// measuring device, and the fastest as measured is returned (issue 22,
// docs/execution.md "Verified schedules"). The DP adds up stages measured
// one at a time; a whole network runs them back to back, where caches,
// launches and overlap differ. A schedule the DP ranks first can lose to
// greedy or sequential as it runs: measuring those few runs is cheap beside
// the search and settles it.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

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
  const auto add = [&](std::string name, Schedule schedule) {
    if (!std::isfinite(schedule.latency_ms) || !seen.insert(StageIds(schedule)).second) {
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
// the transient failures) in one batch, which the farm spreads over its
// workers, and stores what it measured.
void MeasureOrReuse(const Graph& graph, const std::string& model, const SearchOptions& options,
                    const DeviceInfo& device, std::vector<VerifiedSchedule>& candidates,
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
  if (missing.empty()) return;
  const int passes =
      device.simulated ? 1 : std::clamp(options.verify.passes, 1, VerifyOptions::kMaxPasses);
  std::vector<const NetworkSpec*> queries;
  for (int pass = 0; pass < passes; ++pass) {
    if (pass % 2 == 0) {
      queries.insert(queries.end(), missing.begin(), missing.end());
    } else {
      queries.insert(queries.end(), missing.rbegin(), missing.rend());
    }
  }
  const std::vector<MeasureResult> results =
      measurer.MeasureNetworks(queries, options.batch_size, options.verify.settings);
  for (size_t k = 0; k < missing.size(); ++k) {
    const size_t i = missing_index[k];
    // The pass with the lowest median, of those that ran.
    std::optional<MeasureResult> best;
    for (int pass = 0; pass < passes; ++pass) {
      const size_t at = pass * missing.size() + (pass % 2 == 0 ? k : missing.size() - 1 - k);
      const MeasureResult& r = results.at(at);
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
  MeasureOrReuse(graph, outcome.model, outcome.options, outcome.device, verification.candidates,
                 store, measurer);
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
  MeasureOrReuse(graph, model, options, device, one, store, measurer);
  return std::move(one.front());
}

const Schedule& SearchOutcome::Returned() const {
  return verification.ran() ? verification.candidates[verification.chosen].schedule : ios;
}

std::string SearchOutcome::ReturnedName() const {
  return verification.ran() ? verification.candidates[verification.chosen].name : "ios";
}

}  // namespace ios::coordinator
