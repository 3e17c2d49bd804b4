// MeasureLazily (declared in coordinator/search.h): bound-guided
// measurement, docs/search-cost.md.
//
// Why the schedule is the one measuring everything would find: bounds never
// exceed the true latencies, so every schedule's bounded cost is at most its
// true cost. When a part's optimum under bounds consists of measured stages
// only, its bounded cost is its true cost, so no schedule is truly cheaper.
// It is also the same schedule: Solve keeps the first ending that reaches
// the minimum, and on the optimal path every ending tried before the chosen
// one costs more under bounds, hence more in truth.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <utility>

#include "coordinator/measure_session.h"
#include "coordinator/search.h"
#include "coordinator/stage_bounds.h"
#include "devices/registry.h"

namespace ios::coordinator {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Rounds of raising bounds from sub-stages and solving again before a round
// picks what to measure (each raise is only an improvement; the cap keeps a
// round's cost bounded).
constexpr int kMaxRefinePasses = 64;

enum class StageState : char { kUnmeasured, kInFlight, kDone };

//! The DP state of one part under the current values.
struct PartStatus {
  //! The optimum may have changed: a stage on it was measured, or a stage
  //! came out below its bound (noise).
  bool dirty = true;
  //! The optimum under bounds has an unmeasured or in-flight stage.
  bool open = false;
  bool slack_stale = true, upper_stale = true;
  double lower_ms = 0, upper_ms = kInf;
  std::vector<int> optimum;                       // global ids of the optimum's stages
  std::vector<int> optimum_unmeasured;            // those not measured yet
  std::vector<int> optimum_unmeasured_local;      // the same, as the part's local ids
  std::vector<std::pair<double, int>> next_best;  // (slack, global id), ascending
};

//! Per part: the sub-stages of each concurrent stage, i.e. the stage
//! without one of its groups, where the part has that candidate. Adding a
//! group rarely makes the others faster, so a stage costs about at least
//! any of its sub-stages, measured or bounded; not always (the simulator
//! launches streams in canonical group order, which removing a group can
//! change): hence SearchOptions::sub_stage_bounds, off by default.
class SubStages {
 public:
  explicit SubStages(const PartPlan& part) {
    std::unordered_map<NodeId, int> bit;
    for (size_t i = 0; i < part.ops.size(); ++i) bit[part.ops[i]] = static_cast<int>(i);
    const int n = part.space.stage_count();
    first_.assign(n + 1, 0);
    full_.assign(n, 0);
    Stage stage;
    for (int local = 0; local < n; ++local) {
      part.space.FillStage(local, stage);
      if (stage.strategy == Strategy::kParallel && stage.groups.size() > 1) {
        for (const std::vector<NodeId>& group : stage.groups) {
          uint64_t mask = 0;
          for (NodeId op : group) mask |= uint64_t{1} << bit.at(op);
          groups_.push_back(mask);
          full_[local] |= mask;
        }
      } else if (stage.strategy == Strategy::kParallel) {
        for (NodeId op : stage.groups.front()) full_[local] |= uint64_t{1} << bit.at(op);
      }
      if (stage.strategy == Strategy::kParallel) by_mask_.emplace(full_[local], local);
      first_[local + 1] = static_cast<uint32_t>(groups_.size());
    }
  }

  //! Appends to `out` the local ids of `local`'s sub-stages.
  void Of(int local, std::vector<int>& out) const {
    for (uint32_t g = first_[local]; g < first_[local + 1]; ++g) {
      const auto it = by_mask_.find(full_[local] & ~groups_[g]);
      if (it != by_mask_.end()) out.push_back(it->second);
    }
  }

 private:
  std::vector<uint32_t> first_;  // per local stage: its first group in groups_
  std::vector<uint64_t> groups_, full_;
  std::unordered_map<uint64_t, int> by_mask_;  // concurrent stages by operator set
};

class LazyMeasurement {
 public:
  LazyMeasurement(const SearchPlan& plan, MeasureSession& session, const StageBounds& bounds,
                  const StageBounds::Model& model, int workers, bool sub_stage_bounds)
      : plan_(plan),
        session_(session),
        state_(plan.stage_count(), StageState::kUnmeasured),
        value_(plan.stage_count(), 0.0),
        parts_(plan.parts.size()),
        // Enough queued that a worker finishing never waits for the next
        // round; one at a time on a single worker, where nothing runs while
        // the round is decided and every extra stage is a wasted measurement.
        target_in_flight_(workers <= 1 ? 1 : 2 * workers),
        low_water_(workers <= 1 ? 0 : workers) {
    for (int id = 0; id < static_cast<int>(plan.stage_count()); ++id) {
      if (session.Known(id)) {
        state_[id] = StageState::kDone;
        value_[id] = session.latency()[id];
      } else {
        value_[id] = bounds.LowerBound(id, session.latency(), model);
      }
    }
    // Which parts each stage belongs to (once each, though identical
    // stages of one part share an id), to re-solve only those its result
    // can change.
    parts_of_begin_.assign(plan.stage_count() + 1, 0);
    for (const PartPlan& part : plan.parts) {
      for (int id : part.stage_ids) ++parts_of_begin_[id + 1];
    }
    for (size_t i = 1; i < parts_of_begin_.size(); ++i)
      parts_of_begin_[i] += parts_of_begin_[i - 1];
    parts_of_.resize(parts_of_begin_.back());
    parts_of_end_.assign(parts_of_begin_.begin(), parts_of_begin_.end() - 1);
    for (size_t p = 0; p < plan.parts.size(); ++p) {
      for (int id : plan.parts[p].stage_ids) {
        uint32_t& end = parts_of_end_[id];
        if (end > parts_of_begin_[id] && parts_of_[end - 1] == p) continue;
        parts_of_[end++] = static_cast<uint32_t>(p);
      }
    }
    if (sub_stage_bounds) {
      sub_stages_.reserve(plan.parts.size());
      for (const PartPlan& part : plan.parts) sub_stages_.emplace_back(part);
    }
  }

  //! The first round's stages (none when every part's optimum is measured).
  std::vector<int> Start() { return Round(); }

  //! Results of `arrived` are in the session: a new round when few are left
  //! in the workers' hands.
  std::vector<int> Arrived(std::span<const int> arrived) {
    for (int id : arrived) {
      state_[id] = StageState::kDone;
      const double bound = value_[id];
      value_[id] = session_.latency()[id];
      for (uint32_t k = parts_of_begin_[id]; k < parts_of_end_[id]; ++k) {
        // Off the optimum and not below its bound, a measured stage cannot
        // change the optimum (values only rose): no need to solve again.
        PartStatus& status = parts_[parts_of_[k]];
        const bool on_optimum =
            std::find(status.optimum.begin(), status.optimum.end(), id) != status.optimum.end();
        if (on_optimum || value_[id] < bound) status.dirty = true;
        status.slack_stale = status.upper_stale = true;
      }
    }
    in_flight_ -= static_cast<int64_t>(arrived.size());
    if (in_flight_ > low_water_) return {};
    return Round();
  }

  void MarkSkipped(LatencyTable& table) const {
    for (size_t id = 0; id < state_.size(); ++id) {
      table.skipped[id] = state_[id] == StageState::kUnmeasured;
    }
  }

 private:
  //! Values of part `p`'s stages: measured, else the bound (`bounded`), or
  //! infinity for what is not measured (`!bounded`).
  std::vector<double> PartValues(size_t p, bool bounded) const {
    const std::vector<int>& ids = plan_.parts[p].stage_ids;
    std::vector<double> values(ids.size());
    for (size_t j = 0; j < ids.size(); ++j) {
      const bool done = state_[ids[j]] == StageState::kDone;
      values[j] = done || bounded ? value_[ids[j]] : kInf;
    }
    return values;
  }

  void Solve(size_t p) {
    const PartPlan& part = plan_.parts[p];
    PartStatus& status = parts_[p];
    status.dirty = false;
    const PartSpace::Solution optimum = part.space.Solve(PartValues(p, true));
    status.lower_ms = optimum.latency_ms;
    status.optimum.clear();
    status.optimum_unmeasured.clear();
    status.optimum_unmeasured_local.clear();
    for (int local : optimum.stage_sequence) {
      const int id = part.stage_ids[local];
      status.optimum.push_back(id);
      if (state_[id] != StageState::kDone) {
        status.optimum_unmeasured.push_back(id);
        status.optimum_unmeasured_local.push_back(local);
      }
    }
    status.open = !status.optimum_unmeasured.empty();
    // A closed part's optimum is measured: no measured schedule is cheaper.
    if (!status.open) {
      status.upper_ms = status.lower_ms;
      status.upper_stale = false;
    }
  }

  //! The unmeasured stages of open part `p` by how little their bounds
  //! leave between the best schedule through them and the optimum.
  void RankNextBest(size_t p) {
    PartStatus& status = parts_[p];
    status.slack_stale = false;
    status.next_best.clear();
    const std::vector<int>& ids = plan_.parts[p].stage_ids;
    const std::vector<double> slack = plan_.parts[p].space.StageSlack(PartValues(p, true));
    for (size_t j = 0; j < ids.size(); ++j) {
      if (state_[ids[j]] == StageState::kUnmeasured && std::isfinite(slack[j])) {
        status.next_best.emplace_back(slack[j], ids[j]);
      }
    }
    std::sort(status.next_best.begin(), status.next_best.end());
  }

  std::vector<int> Round() {
    MeasureProgress& stats = session_.stats();
    ++stats.rounds;
    // Before measuring a stage on an optimum, raise its bound to what its
    // sub-stages already say; solve again while that moves an optimum.
    for (int pass = 0; pass < kMaxRefinePasses && !sub_stages_.empty(); ++pass) {
      bool raised = false;
      for (size_t p = 0; p < parts_.size(); ++p) {
        if (parts_[p].dirty) Solve(p);
        raised = RaiseFromSubStages(p) || raised;
      }
      if (!raised) break;
    }
    std::vector<int> picks;
    for (size_t p = 0; p < parts_.size(); ++p) {
      if (parts_[p].dirty) Solve(p);
      for (int id : parts_[p].optimum_unmeasured) Pick(id, picks);
    }
    // Fill the workers with the stages whose bounds leave the least slack:
    // the likeliest to be on the optimum once the others are measured.
    auto full = [&] {
      return in_flight_ + static_cast<int64_t>(picks.size()) >= target_in_flight_;
    };
    if (!full()) {
      std::vector<std::pair<double, int>> next_best;
      for (size_t p = 0; p < parts_.size(); ++p) {
        if (!parts_[p].open) continue;
        if (parts_[p].slack_stale) RankNextBest(p);
        next_best.insert(next_best.end(), parts_[p].next_best.begin(), parts_[p].next_best.end());
      }
      std::sort(next_best.begin(), next_best.end());
      for (const auto& [slack, id] : next_best) {
        if (full()) break;
        Pick(id, picks);
      }
    }
    in_flight_ += static_cast<int64_t>(picks.size());
    spdlog::debug("lazy round {}: {} picked, {} in flight", stats.rounds, picks.size(), in_flight_);
    UpdateGap(picks.empty() && in_flight_ == 0);
    return picks;
  }

  //! The bound gap for progress lines: at most every 200 ms (it costs a
  //! solve per open part), and at the end.
  void UpdateGap(bool last) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - last_gap_ < std::chrono::milliseconds(200)) return;
    last_gap_ = now;
    double lower = 0, upper = 0;
    for (size_t p = 0; p < parts_.size(); ++p) {
      PartStatus& status = parts_[p];
      if (status.upper_stale) {
        status.upper_ms = plan_.parts[p].space.Solve(PartValues(p, false)).latency_ms;
        status.upper_stale = false;
      }
      lower += status.lower_ms;
      upper += status.upper_ms;
    }
    MeasureProgress& stats = session_.stats();
    stats.lower_ms = lower;
    stats.upper_ms = upper;
  }

  //! Raises the bounds of part `p`'s unmeasured optimum stages to their
  //! sub-stages' values; marks every part holding a raised stage dirty.
  bool RaiseFromSubStages(size_t p) {
    bool raised = false;
    const PartStatus& status = parts_[p];
    const std::vector<int>& ids = plan_.parts[p].stage_ids;
    for (size_t k = 0; k < status.optimum_unmeasured_local.size(); ++k) {
      const int local = status.optimum_unmeasured_local[k];
      const int id = ids[local];
      if (state_[id] != StageState::kUnmeasured) continue;
      scratch_.clear();
      sub_stages_[p].Of(local, scratch_);
      double best = value_[id];
      for (int sub : scratch_) best = std::max(best, value_[ids[sub]]);
      if (!(best > value_[id])) continue;
      value_[id] = best;
      raised = true;
      for (uint32_t q = parts_of_begin_[id]; q < parts_of_end_[id]; ++q) {
        PartStatus& other = parts_[parts_of_[q]];
        other.dirty = other.slack_stale = other.upper_stale = true;
      }
    }
    return raised;
  }

  void Pick(int id, std::vector<int>& picks) {
    if (state_[id] != StageState::kUnmeasured) return;
    state_[id] = StageState::kInFlight;
    picks.push_back(id);
  }

  const SearchPlan& plan_;
  MeasureSession& session_;
  std::vector<StageState> state_;
  std::vector<double> value_;  // measured latency when done, else the lower bound
  std::vector<PartStatus> parts_;
  std::vector<uint32_t> parts_of_begin_, parts_of_end_, parts_of_;  // stage id -> parts
  int64_t in_flight_ = 0;
  const int64_t target_in_flight_, low_water_;
  std::chrono::steady_clock::time_point last_gap_{};
  std::vector<SubStages> sub_stages_;  // by part; empty: sub-stage bounds are off
  std::vector<int> scratch_;
};

}  // namespace

LatencyTable MeasureLazily(const Graph& graph, const SearchPlan& plan, db::ProfileStore& store,
                           Measurer& measurer, const SearchOptions& options,
                           const std::function<void(const MeasureProgress&)>& progress) {
  MeasureSession session(graph, plan, store, measurer, options, progress);
  session.stats().lazy = true;
  const StageBounds bounds(plan);
  // The single operators (every bound is made of them) and the baselines'
  // stages (reported beside the IOS schedule) are measured whatever happens.
  std::vector<char> chosen(plan.stage_count(), 0);
  std::vector<int> first;
  auto choose = [&](int id) {
    if (session.Known(id) || chosen[id]) return;
    chosen[id] = 1;
    first.push_back(id);
  };
  for (int id : bounds.singletons()) choose(id);
  for (const auto* baselines : {&plan.sequential, &plan.greedy}) {
    for (const BlockSchedule& block : *baselines) {
      for (const auto& [stage, id] : block) choose(id);
    }
  }
  session.Measure(first);
  const StageBounds::Model model =
      MakeBoundModel(graph, plan, bounds, session.latency(),
                     devices::StageCostFactsOf(measurer.Device()), options);
  spdlog::debug(
      "lazy measurement: bounds with overhead {:.6f} ms, {:.6f} ms per operator, parallelism {}, "
      "device work per operator {}, margin {:.0f}%",
      model.overhead_ms, model.serial_op_ms, model.max_parallelism,
      model.work_ms.empty() ? "unknown" : "known", model.margin * 100);
  LazyMeasurement lazy(plan, session, bounds, model, std::max(1, measurer.ActiveWorkers()),
                       options.sub_stage_bounds);
  session.Measure(lazy.Start(),
                  [&](std::span<const int> arrived) { return lazy.Arrived(arrived); });
  LatencyTable table = session.Finish();
  lazy.MarkSkipped(table);
  return table;
}

}  // namespace ios::coordinator
