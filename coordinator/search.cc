#include "coordinator/search.h"

#include <chrono>
#include <limits>
#include <unordered_map>

#include "common/error.h"

namespace ios::coordinator {

namespace {

class LocalMeasurer final : public Measurer {
 public:
  explicit LocalMeasurer(std::unique_ptr<worker::Backend> backend) : backend_(std::move(backend)) {}
  const DeviceInfo& Device() const override { return backend_->Device(); }
  void MeasureAll(const std::vector<const StageSpec*>& specs, int batch_size,
                  const MeasureSettings& settings,
                  const std::function<void(std::span<const IndexedResult>)>& on_results) override {
    for (size_t i = 0; i < specs.size(); ++i) {
      const IndexedResult one{i, backend_->Measure(*specs[i], batch_size, settings)};
      on_results({&one, 1});
    }
  }

 private:
  std::unique_ptr<worker::Backend> backend_;
};

}  // namespace

std::unique_ptr<Measurer> MakeLocalMeasurer(std::unique_ptr<worker::Backend> backend) {
  return std::make_unique<LocalMeasurer>(std::move(backend));
}

int SearchPlan::Intern(StageKeyer& keyer, const Stage& stage, int part, int local) {
  const std::string& key = keyer.Key(stage);
  if (auto it = index_.find(std::string_view(key)); it != index_.end()) return it->second;
  const int id = static_cast<int>(keys.size());
  index_.emplace(key, id);
  keys.push_back(key);
  if (part < 0) {
    refs_.push_back({-1, static_cast<int>(loose_stages_.size())});
    loose_stages_.push_back(stage);
  } else {
    refs_.push_back({part, local});
  }
  return id;
}

Stage SearchPlan::StageOf(int id) const {
  const StageRef& ref = refs_.at(id);
  return ref.part < 0 ? loose_stages_.at(ref.local) : parts.at(ref.part).space.stage(ref.local);
}

std::vector<std::vector<NodeId>> PartsOf(const Block& block, int max_part_size) {
  if (!block.parts.empty()) return block.parts;
  const std::vector<NodeId> ops = block.Operators();
  std::vector<std::vector<NodeId>> parts;
  for (size_t begin = 0; begin < ops.size(); begin += max_part_size) {
    const size_t end = std::min(ops.size(), begin + static_cast<size_t>(max_part_size));
    parts.emplace_back(ops.begin() + begin, ops.begin() + end);
  }
  return parts;
}

SearchPlan PlanSearch(const Graph& graph, const SearchOptions& options) {
  if (options.max_part_size < 1 || options.max_part_size > DpOptions::kMaxPartSize) {
    throw Error("max part size must be between 1 and " + std::to_string(DpOptions::kMaxPartSize));
  }
  if (options.batch_size < 1) throw Error("batch size must be >= 1");
  SearchPlan plan;
  StageKeyer keyer(graph);
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    const Block& block = graph.blocks[b];
    const auto parts = PartsOf(block, options.max_part_size);
    for (size_t p = 0; p < parts.size(); ++p) {
      PartPlan part{static_cast<int>(b),
                    static_cast<int>(p),
                    parts[p],
                    PartSpace::Enumerate(graph, parts[p], options.dp),
                    {}};
      const int part_index = static_cast<int>(plan.parts.size());
      part.stage_ids.reserve(part.space.stage_count());
      Stage stage;
      for (int local = 0; local < part.space.stage_count(); ++local) {
        part.space.FillStage(local, stage);
        part.stage_ids.push_back(plan.Intern(keyer, stage, part_index, local));
      }
      plan.stage_occurrences += part.space.stage_count();
      plan.parts.push_back(std::move(part));
    }
    BlockSchedule sequential, greedy;
    for (const Stage& s : SequentialSchedule(block.Operators())) {
      sequential.emplace_back(s, plan.Intern(keyer, s));
    }
    for (const Stage& s : GreedySchedule(graph, block.Operators())) {
      greedy.emplace_back(s, plan.Intern(keyer, s));
    }
    plan.sequential.push_back(std::move(sequential));
    plan.greedy.push_back(std::move(greedy));
  }
  return plan;
}

LatencyTable MeasureStages(const Graph& graph, const SearchPlan& plan, db::ProfileStore& store,
                           Measurer& measurer, const SearchOptions& options,
                           const std::function<void(const MeasureProgress&)>& progress) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const DeviceInfo& device = measurer.Device();
  const std::string settings_key = options.settings.Key();
  store.UpsertDevice(device);
  const std::vector<std::string>& keys = plan.keys;
  LatencyTable table{std::vector<double>(keys.size(), kInf),
                     std::vector<bool>(keys.size(), false),
                     {static_cast<int64_t>(keys.size()), 0, 0, 0, 0}};
  // Specs only for the stages to measure: a search may have 10^5 candidates.
  std::vector<StageSpec> specs;
  StageKeyer keyer(graph);
  std::vector<double>& latency = table.latency_ms;
  MeasureProgress& stats = table.stats;
  std::vector<size_t> missing;
  store.RunInTransaction([&] {
    for (size_t i = 0; i < keys.size(); ++i) {
      const db::MeasurementKey key{keys[i], device.fingerprint, options.batch_size, settings_key};
      auto stored = store.Lookup(key);
      // A transient failure (timeout, lost worker, backend failure) is kept
      // for diagnosis but measured again; OOM and unsupported are reused.
      if (stored && !stored->ok() && IsTransient(stored->error)) stored.reset();
      if (stored) {
        ++stats.reused;
        if (stored->ok()) {
          latency[i] = stored->median_ms;
        } else {
          ++stats.failed;
        }
      } else {
        specs.push_back(keyer.Spec(plan.StageOf(static_cast<int>(i))));
        store.UpsertStage(keys[i], specs.back().Describe());
        missing.push_back(i);
        table.measured_now[i] = true;
      }
    }
  });
  stats.workers = measurer.ActiveWorkers();
  if (progress) progress(stats);
  std::vector<const StageSpec*> queries;
  queries.reserve(missing.size());
  for (const StageSpec& spec : specs) queries.push_back(&spec);
  auto last_report = std::chrono::steady_clock::now();
  measurer.MeasureAll(
      queries, options.batch_size, options.settings, [&](std::span<const IndexedResult> results) {
        // One transaction for whatever has arrived: each result is
        // committed as soon as the previous commit allows.
        store.RunInTransaction([&] {
          for (const IndexedResult& r : results) {
            const size_t i = missing.at(r.index);
            store.Store({keys[i], device.fingerprint, options.batch_size, settings_key}, r.result);
          }
        });
        for (const IndexedResult& r : results) {
          const size_t i = missing.at(r.index);
          ++stats.measured;
          if (r.result.ok()) {
            latency[i] = r.result.median_ms;
          } else {
            ++stats.failed;
          }
        }
        const auto now = std::chrono::steady_clock::now();
        if (progress && now - last_report > std::chrono::milliseconds(200)) {
          last_report = now;
          stats.elapsed_s = elapsed();
          stats.workers = measurer.ActiveWorkers();
          progress(stats);
        }
      });
  stats.elapsed_s = elapsed();
  if (progress) progress(stats);
  return table;
}

Schedule SolveSchedule(const SearchPlan& plan, const std::vector<double>& latency,
                       size_t block_count) {
  Schedule schedule;
  schedule.blocks.resize(block_count);
  for (const PartPlan& part : plan.parts) {
    std::vector<double> local(part.stage_ids.size());
    for (size_t i = 0; i < local.size(); ++i) local[i] = latency.at(part.stage_ids[i]);
    const PartSpace::Solution solution = part.space.Solve(local);
    if (solution.stage_sequence.empty()) {
      throw Error("block " + std::to_string(part.block) + " part " + std::to_string(part.part) +
                  ": every schedule contains a stage that failed to measure");
    }
    for (int s : solution.stage_sequence) {
      const int id = part.stage_ids[s];
      schedule.blocks.at(part.block).push_back({part.space.stage(s), id, latency[id]});
    }
    schedule.latency_ms += solution.latency_ms;
  }
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
                        const std::function<void(const MeasureProgress&)>& progress) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  SearchOutcome outcome;
  outcome.model = model;
  outcome.device = measurer.Device();
  outcome.options = options;
  auto t = Clock::now();
  outcome.plan = PlanSearch(graph, options);
  outcome.enumerate_s = seconds_since(t);
  t = Clock::now();
  outcome.table = MeasureStages(graph, outcome.plan, store, measurer, options, progress);
  store.LinkModelStages(model, outcome.plan.keys);
  outcome.measure_s = seconds_since(t);
  t = Clock::now();
  outcome.ios = SolveSchedule(outcome.plan, outcome.table.latency_ms, graph.blocks.size());
  outcome.sequential = PriceSchedule(outcome.plan.sequential, outcome.table.latency_ms);
  outcome.greedy = PriceSchedule(outcome.plan.greedy, outcome.table.latency_ms);
  outcome.solve_s = seconds_since(t);
  return outcome;
}

}  // namespace ios::coordinator
