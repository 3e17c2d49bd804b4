// A search after planning (search_plan.cc): measuring the planned stages,
// solving each part for its schedule, pricing the baselines, and RunSearch,
// which does all of it in order.
#include "coordinator/search.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "common/error.h"
#include "common/printable.h"
#include "coordinator/measure_session.h"
#include "exec/tensor_layout.h"

namespace ios::coordinator {

namespace {

class LocalMeasurer final : public OneAtATimeMeasurer {
 public:
  explicit LocalMeasurer(std::unique_ptr<devices::Backend> backend)
      : backend_(std::move(backend)) {}
  const DeviceInfo& Device() const override { return backend_->Device(); }

 protected:
  MeasureResult MeasureOne(const StageSpec& spec, int batch_size,
                           const MeasureSettings& settings) override {
    return backend_->Measure(spec, batch_size, settings);
  }
  MeasureResult MeasureNetworkOne(const NetworkSpec& network, int batch_size,
                                  const MeasureSettings& settings) override {
    return backend_->MeasureNetwork(network, batch_size, settings);
  }
  LinkMeasurement MeasureLink(const LinkQuery& query) override {
    return backend_->MeasureLink(query);
  }

 private:
  std::unique_ptr<devices::Backend> backend_;
};

}  // namespace

void OneAtATimeMeasurer::MeasureStream(
    std::vector<const StageSpec*> specs, int batch_size, const MeasureSettings& settings,
    const std::function<MoreSpecs(std::span<const IndexedResult>)>& on_results) {
  for (size_t i = 0; i < specs.size(); ++i) {
    const IndexedResult one{i, MeasureOne(*specs[i], batch_size, settings)};
    const MoreSpecs more = on_results({&one, 1});
    specs.insert(specs.end(), more.begin(), more.end());
  }
}

namespace {
MeasureResult CannotTimeNetworks() {
  MeasureResult result;
  result.error = MeasureError::kUnsupported;
  result.error_message = "this measurer times stages only, not whole networks";
  return result;
}
}  // namespace

std::vector<MeasureResult> Measurer::MeasureNetworks(std::span<const NetworkSpec* const> networks,
                                                     int, const MeasureSettings&) {
  return std::vector<MeasureResult>(networks.size(), CannotTimeNetworks());
}

std::vector<MeasureResult> OneAtATimeMeasurer::MeasureNetworks(
    std::span<const NetworkSpec* const> networks, int batch_size, const MeasureSettings& settings) {
  std::vector<MeasureResult> results;
  for (const NetworkSpec* network : networks) {
    results.push_back(MeasureNetworkOne(*network, batch_size, settings));
  }
  return results;
}

LinkMeasurement Measurer::MeasureLink(const LinkQuery&) {
  return LinkMeasurement::Unsupported("this measurer cannot time links between devices");
}

MeasureResult OneAtATimeMeasurer::MeasureNetworkOne(const NetworkSpec&, int,
                                                    const MeasureSettings&) {
  return CannotTimeNetworks();
}

std::unique_ptr<Measurer> MakeLocalMeasurer(std::unique_ptr<devices::Backend> backend) {
  return std::make_unique<LocalMeasurer>(std::move(backend));
}

const char* ToString(MeasureMode mode) {
  switch (mode) {
    case MeasureMode::kLazy:
      return "lazy";
    case MeasureMode::kAll:
      return "all";
  }
  return "?";
}

LatencyTable MeasureStages(const Graph& graph, const SearchPlan& plan, db::ProfileStore& store,
                           Measurer& measurer, const SearchOptions& options,
                           const std::function<void(const MeasureProgress&)>& progress) {
  MeasureSession session(graph, plan, store, measurer, options, progress);
  std::vector<int> missing;
  for (int id = 0; id < static_cast<int>(plan.stage_count()); ++id) {
    if (!session.Known(id)) missing.push_back(id);
  }
  // At most measure_chunk stages in the measurer's hands (a spec takes
  // kilobytes; a search may have 10^5 candidates), topped up as results
  // arrive so the workers never wait for the next chunk.
  const size_t window = static_cast<size_t>(std::max(1, options.measure_chunk));
  size_t handed = std::min(window, missing.size()), in_flight = handed;
  session.Measure({missing.begin(), missing.begin() + static_cast<std::ptrdiff_t>(handed)},
                  [&](std::span<const int> arrived) {
                    in_flight -= arrived.size();
                    std::vector<int> more;
                    if (in_flight <= window / 2 && handed < missing.size()) {
                      const size_t end = std::min(missing.size(), handed + window - in_flight);
                      more.assign(missing.begin() + static_cast<std::ptrdiff_t>(handed),
                                  missing.begin() + static_cast<std::ptrdiff_t>(end));
                      in_flight += end - handed;
                      handed = end;
                    }
                    return more;
                  });
  return session.Finish();
}

namespace {

// Every schedule of `part` has a failed stage: names the failed stage with
// the fewest operators (a failed single operator alone explains it), its
// error, and how to measure it again.
std::string DescribeUnschedulable(const Graph* graph, const PartPlan& part,
                                  const std::vector<double>& latency, const LatencyTable* table) {
  std::string text = "block " + std::to_string(part.block) + " part " + std::to_string(part.part) +
                     ": every schedule contains a stage that failed to measure";
  int failed = 0, pick = -1;
  for (size_t s = 0; s < part.stage_ids.size(); ++s) {
    if (std::isfinite(latency.at(part.stage_ids[s]))) continue;
    ++failed;
    if (pick < 0 || part.space.stage(static_cast<int>(s)).OperatorCount() <
                        part.space.stage(pick).OperatorCount()) {
      pick = static_cast<int>(s);
    }
  }
  if (pick < 0) return text;
  text += " (" + std::to_string(failed) + " of its " + std::to_string(part.stage_ids.size()) +
          " candidate stages failed)";
  const Stage stage = part.space.stage(pick);
  std::string names;
  for (const auto& group : stage.groups) {
    for (NodeId id : group) {
      if (!names.empty()) names += ", ";
      names += graph ? Quoted(graph->node(id).name) : "#" + std::to_string(id);
    }
  }
  text += "; e.g. the " + std::string(ToString(stage.strategy)) + " stage of " + names;
  const int id = part.stage_ids[pick];
  if (table == nullptr) return text;
  const auto failure = table->failures.find(id);
  if (failure == table->failures.end()) return text;
  text += ": " + std::string(ToString(failure->second.error));
  if (!failure->second.message.empty()) text += ": " + Printable(failure->second.message);
  const bool stored = id < static_cast<int>(table->measured_now.size()) && !table->measured_now[id];
  if (IsTransient(failure->second.error)) {
    text +=
        " (a transient failure: the next search measures it again; `ios-db --db FILE forget "
        "--failures` drops stored failures)";
  } else if (stored) {
    text +=
        " (stored in the profiling DB by an earlier search and reused; `ios-db --db FILE forget "
        "--failures` drops it to measure it again)";
  }
  return text;
}

}  // namespace

namespace {

std::vector<Stage> StagesOf(const Schedule& schedule) {
  std::vector<Stage> stages;
  for (const auto& block : schedule.blocks) {
    for (const ScheduledStage& s : block) stages.push_back(s.stage);
  }
  return stages;
}

// The memory model prices a merge stage's members apart; ios-run's plan
// stacks them into one buffer live until the last member's reader, which
// can take more. When it takes more than the cap, the reason to search
// again without merge stages (where model and plan agree); else empty.
std::string MergesOverTheCap(const Graph& graph, const SearchOutcome& outcome) {
  const MemoryPlanInfo& memory = outcome.plan.memory;
  if (!memory.active || outcome.options.dp.strategies == StrategySet::kParallel) return "";
  const std::vector<Stage> stages = StagesOf(outcome.ios);
  const bool merges = std::any_of(stages.begin(), stages.end(), [](const Stage& s) {
    return s.strategy == Strategy::kMerge && s.OperatorCount() > 1;
  });
  if (!merges) return "";
  const int64_t planned = exec::PlanMemory(graph, stages).peak_live_bytes;
  if (planned <= memory.cap) return "";
  const int batch = outcome.options.batch_size;
  return "memory: the schedule's merge stages take " + std::to_string(planned * batch) +
         " bytes in ios-run's plan at batch " + std::to_string(batch) + ", over the cap of " +
         std::to_string(memory.cap * batch) + ": searched again without merge stages";
}

}  // namespace

int64_t SchedulePeakBytes(const Graph& graph, const Schedule& schedule, int batch) {
  return exec::PlanMemory(graph, StagesOf(schedule)).peak_live_bytes * batch;
}

Schedule SolveSchedule(const SearchPlan& plan, const std::vector<double>& latency,
                       size_t block_count, const LatencyTable* table, const Graph* graph) {
  Schedule schedule;
  schedule.blocks.resize(block_count);
  struct Solved {
    const PartPlan* part;
    PartSpace::Solution solution;
  };
  auto solve = [&](const PartPlan& part) {
    std::vector<double> local(part.stage_ids.size());
    for (size_t i = 0; i < local.size(); ++i) local[i] = latency.at(part.stage_ids[i]);
    return Solved{&part, part.space.Solve(local)};
  };
  // One part at a time: its pieces (one if it fits the DP budgets), and the
  // greedy alternative when it was cut.
  for (size_t begin = 0; begin < plan.parts.size();) {
    size_t end = begin + 1;
    while (end < plan.parts.size() && plan.parts[end].block == plan.parts[begin].block &&
           plan.parts[end].part == plan.parts[begin].part) {
      ++end;
    }
    std::vector<Solved> pieces;
    std::optional<Solved> alternative;
    double pieces_ms = 0;
    for (size_t i = begin; i < end; ++i) {
      Solved solved = solve(plan.parts[i]);
      if (plan.parts[i].alternative) {
        alternative = std::move(solved);
      } else {
        pieces_ms += solved.solution.latency_ms;
        pieces.push_back(std::move(solved));
      }
    }
    if (alternative && alternative->solution.latency_ms < pieces_ms) {
      pieces = {std::move(*alternative)};
    }
    for (const Solved& solved : pieces) {
      const PartPlan& part = *solved.part;
      if (solved.solution.stage_sequence.empty()) {
        throw Error(DescribeUnschedulable(graph, part, latency, table));
      }
      for (int s : solved.solution.stage_sequence) {
        const int id = part.stage_ids[s];
        schedule.blocks.at(part.block).push_back({part.space.stage(s), id, latency[id]});
      }
      schedule.latency_ms += solved.solution.latency_ms;
      schedule.parts.push_back({part.block, part.part, part.piece, part.schedule,
                                static_cast<int>(part.ops.size()), part.ops.front(),
                                part.ops.back(), solved.solution.latency_ms, part.alternative});
    }
    begin = end;
  }
  // A block cut by --max-part-size or with a part over budget: its greedy
  // baseline (which cuts nothing) competes too, so an approximated block is
  // never slower than it.
  std::vector<bool> approximated(block_count, false);
  for (const PartPlan& part : plan.parts) {
    if (part.schedule != PartSchedule::kExact) approximated.at(part.block) = true;
  }
  // Not under a memory cap: the block's greedy baseline was never checked
  // against it.
  for (size_t b = 0; b < block_count && b < plan.greedy.size() && !plan.memory.active; ++b) {
    if (!approximated[b] || plan.greedy[b].empty()) continue;
    double ios_ms = 0, greedy_ms = 0;
    for (const ScheduledStage& s : schedule.blocks[b]) ios_ms += s.latency_ms;
    int operators = 0;
    for (const auto& [stage, id] : plan.greedy[b]) {
      greedy_ms += latency.at(id);
      operators += stage.OperatorCount();
    }
    if (!(greedy_ms < ios_ms)) continue;
    schedule.blocks[b].clear();
    for (const auto& [stage, id] : plan.greedy[b]) {
      schedule.blocks[b].push_back({stage, id, latency[id]});
    }
    schedule.latency_ms += greedy_ms - ios_ms;
    std::erase_if(schedule.parts,
                  [b](const PartSummary& p) { return p.block == static_cast<int>(b); });
    const Stage& first = plan.greedy[b].front().first;
    const Stage& last = plan.greedy[b].back().first;
    schedule.parts.push_back({static_cast<int>(b), -1, -1, PartSchedule::kGreedy, operators,
                              first.groups.front().front(), last.groups.back().back(), greedy_ms,
                              true});
  }
  std::stable_sort(schedule.parts.begin(), schedule.parts.end(),
                   [](const PartSummary& x, const PartSummary& y) { return x.block < y.block; });
  return schedule;
}

Schedule PriceSchedule(const std::vector<BlockSchedule>& blocks,
                       const std::vector<double>& latency) {
  Schedule schedule;
  for (const BlockSchedule& block : blocks) {
    std::vector<ScheduledStage> stages;
    for (const auto& [stage, id] : block) {
      stages.push_back({stage, id, latency.at(id)});
      schedule.latency_ms += latency.at(id);
    }
    schedule.blocks.push_back(std::move(stages));
  }
  return schedule;
}

SearchOutcome RunSearch(const Graph& graph, const std::string& model, const SearchOptions& options,
                        db::ProfileStore& store, Measurer& measurer,
                        const std::function<void(const MeasureProgress&)>& progress,
                        const std::function<void(const PlanProgress&)>& plan_progress) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  SearchOutcome outcome;
  outcome.model = model;
  outcome.device = measurer.Device();
  outcome.options = options;
  auto t = Clock::now();
  outcome.plan = PlanSearch(graph, options, plan_progress);
  outcome.enumerate_s = seconds_since(t);
  t = Clock::now();
  outcome.table = options.measure == MeasureMode::kLazy
                      ? MeasureLazily(graph, outcome.plan, store, measurer, options, progress)
                      : MeasureStages(graph, outcome.plan, store, measurer, options, progress);
  // Only what the DB holds: a skipped stage's key would cost a row for nothing.
  const std::vector<bool>& skipped = outcome.table.skipped;
  std::vector<int> linked;
  std::vector<StageKeyHash> linked_hashes;
  for (int id = 0; id < static_cast<int>(outcome.plan.stage_count()); ++id) {
    if (skipped[id]) continue;
    linked.push_back(id);
    linked_hashes.push_back(outcome.plan.key_hashes[id]);
  }
  StageKeyer keyer(graph);
  store.LinkModelStages(model, linked_hashes,
                        [&](size_t i) { return outcome.plan.KeyOf(keyer, linked[i]); });
  outcome.measure_s = seconds_since(t);
  t = Clock::now();
  outcome.ios = SolveSchedule(outcome.plan, outcome.table.latency_ms, graph.blocks.size(),
                              &outcome.table, &graph);
  outcome.sequential = PriceSchedule(outcome.plan.sequential, outcome.table.latency_ms);
  outcome.greedy = PriceSchedule(outcome.plan.greedy, outcome.table.latency_ms);
  for (Schedule* schedule : {&outcome.ios, &outcome.sequential, &outcome.greedy}) {
    schedule->peak_bytes = SchedulePeakBytes(graph, *schedule, options.batch_size);
  }
  outcome.solve_s = seconds_since(t);
  if (std::string why = MergesOverTheCap(graph, outcome); !why.empty()) {
    spdlog::warn("{}", why);
    SearchOptions again = options;
    again.dp.strategies = StrategySet::kParallel;
    SearchOutcome parallel =
        RunSearch(graph, model, again, store, measurer, progress, plan_progress);
    parallel.plan.warnings.insert(parallel.plan.warnings.begin(), std::move(why));
    return parallel;
  }
  if (options.verify.enabled) {
    t = Clock::now();
    outcome.verification = VerifyCandidates(graph, outcome, store, measurer);
    outcome.verify_s = seconds_since(t);
  }
  return outcome;
}

}  // namespace ios::coordinator
