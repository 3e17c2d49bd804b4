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
// At most this share of the measure phase goes to ranking the stages to
// measure beyond the optima (LazyMeasurement::Fill).
constexpr double kRankShare = 0.05;
constexpr double kRankPerRoundS = 0.002;
// The bound gap (progress lines only) at most this share of the phase.
constexpr double kGapShare = 0.02;
// Stages of a part ranked by slack in order, at most.
constexpr size_t kRankedHead = 4096;
// A round starts while the farm still holds this much work (LowWater)...
constexpr double kCoverS = 0.005;
// ...but never more than this many times its credit.
constexpr int64_t kMaxCreditMultiple = 8;
// The rate of results is measured over windows of at least this long.
constexpr double kRateWindowS = 0.05;

enum class StageState : char { kUnmeasured, kInFlight, kDone };

//! The DP state of one part under the current values.
struct PartStatus {
  // The two solvers share the space's links (built once).
  explicit PartStatus(const PartSpace& space) : bounded(space), upper(bounded) {}
  //! Values changed since the part was last solved.
  bool dirty = true;
  //! The optimum under bounds has an unmeasured or in-flight stage.
  bool open = false;
  bool slack_stale = true, upper_stale = true;
  //! Measured latencies, else bounds (the lower bound of the part); measured
  //! latencies, else infinity (what a schedule is known to cost).
  PartSolver bounded, upper;
  double lower_ms = 0, upper_ms = kInf;
  std::vector<int> optimum;                       // global ids of the optimum's stages
  std::vector<int> optimum_unmeasured;            // those not measured yet
  std::vector<int> optimum_unmeasured_local;      // the same, as the part's local ids
  std::vector<std::pair<double, int>> next_best;  // (slack, global id), ascending
  //! Its stages of several operators with a latency, those below their
  //! bounds, and whether that made it measured in full.
  int64_t checked = 0, violations = 0;
  bool full = false;
  size_t next_at = 0;  // next_best's first entry not taken
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
                  const StageBounds::Model& model, const Measurer& measurer,
                  const SearchOptions& options)
      : plan_(plan),
        session_(session),
        state_(plan.stage_count(), StageState::kUnmeasured),
        value_(plan.stage_count(), 0.0),
        bounds_(bounds),
        max_violations_(options.bound_violations_max_fraction),
        measurer_(measurer) {
    parts_.reserve(plan.parts.size());
    for (const PartPlan& part : plan.parts) parts_.emplace_back(part.space);
    // Where each stage occurs: (part, local id) pairs, by stage id (identical
    // stages of one part share an id).
    occurs_begin_.assign(plan.stage_count() + 1, 0);
    for (const PartPlan& part : plan.parts) {
      for (int id : part.stage_ids) ++occurs_begin_[id + 1];
    }
    for (size_t i = 1; i < occurs_begin_.size(); ++i) occurs_begin_[i] += occurs_begin_[i - 1];
    occurs_.resize(occurs_begin_.back());
    std::vector<uint32_t> end(occurs_begin_.begin(), occurs_begin_.end() - 1);
    for (size_t p = 0; p < plan.parts.size(); ++p) {
      const std::vector<int>& ids = plan.parts[p].stage_ids;
      for (size_t local = 0; local < ids.size(); ++local) {
        occurs_[end[ids[local]]++] = {static_cast<uint32_t>(p), static_cast<uint32_t>(local)};
      }
    }
    bound_.assign(plan.stage_count(), 0.0);
    for (int id = 0; id < static_cast<int>(plan.stage_count()); ++id) {
      const double bound = bounds.LowerBound(id, session.latency(), model);
      if (bounds.Operators(id) > 1) bound_[id] = bound;
      if (session.Known(id)) {
        state_[id] = StageState::kDone;
        value_[id] = session.latency()[id];
      } else {
        value_[id] = bound;
      }
      for (uint32_t k = occurs_begin_[id]; k < occurs_begin_[id + 1]; ++k) {
        PartStatus& status = parts_[occurs_[k].part];
        status.bounded.Set(static_cast<int>(occurs_[k].local), value_[id]);
        if (state_[id] == StageState::kDone) {
          status.upper.Set(static_cast<int>(occurs_[k].local), value_[id]);
        }
      }
    }
    // Stored stages are held to their bounds as measured ones are.
    for (int id = 0; id < static_cast<int>(plan.stage_count()); ++id) {
      if (state_[id] == StageState::kDone) Check(id);
    }
    if (options.sub_stage_bounds) {
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
      value_[id] = session_.latency()[id];
      for (uint32_t k = occurs_begin_[id]; k < occurs_begin_[id + 1]; ++k) {
        PartStatus& status = parts_[occurs_[k].part];
        status.bounded.Set(static_cast<int>(occurs_[k].local), value_[id]);
        status.upper.Set(static_cast<int>(occurs_[k].local), value_[id]);
        status.dirty = status.slack_stale = status.upper_stale = true;
      }
      Check(id);
    }
    in_flight_ -= static_cast<int64_t>(arrived.size());
    UpdateRate(static_cast<int64_t>(arrived.size()));
    if (in_flight_ > LowWater() && !full_pending_) return {};
    return Round();
  }

  int64_t Scans() const {
    int64_t scans = 0;
    for (const PartStatus& status : parts_) scans += status.bounded.scans() + status.upper.scans();
    return scans;
  }

  void LogCost() const {
    int64_t states = 0;
    for (const PartPlan& part : plan_.parts) states += part.space.state_count();
    spdlog::debug(
        "lazy measurement: {} part solves recomputed {} DP states (the plan has {}), {} for the "
        "bound gap; {} scans; {:.3f} s deciding rounds, {:.3f} s of it ranking stages by slack",
        solves_, recomputed_, states, recomputed_upper_, Scans(), round_s_, rank_s_);
  }

  void MarkSkipped(LatencyTable& table) const {
    for (size_t id = 0; id < state_.size(); ++id) {
      table.skipped[id] = state_[id] == StageState::kUnmeasured;
    }
  }

 private:
  void Solve(size_t p) {
    const PartPlan& part = plan_.parts[p];
    PartStatus& status = parts_[p];
    status.dirty = false;
    status.bounded.Solve();
    ++solves_;
    recomputed_ += status.bounded.last_recomputed();
    status.lower_ms = status.bounded.latency_ms();
    status.bounded.StageSequence(sequence_);
    status.optimum.clear();
    status.optimum_unmeasured.clear();
    status.optimum_unmeasured_local.clear();
    for (int local : sequence_) {
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
    status.next_at = 0;
    const std::vector<int>& ids = plan_.parts[p].stage_ids;
    status.bounded.StageSlack(slack_);
    const std::vector<double>& slack = slack_;
    for (size_t j = 0; j < ids.size(); ++j) {
      if (state_[ids[j]] == StageState::kUnmeasured && std::isfinite(slack[j])) {
        status.next_best.emplace_back(slack[j], ids[j]);
      }
    }
    // A ranking is used for a few rounds at most (it goes stale as results
    // arrive): the head in order is enough.
    const size_t head = std::min(status.next_best.size(), kRankedHead);
    std::partial_sort(status.next_best.begin(), status.next_best.begin() + head,
                      status.next_best.end());
    status.next_best.resize(head);
  }

  std::vector<int> Round() {
    const auto start = std::chrono::steady_clock::now();
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
    if (full_pending_) {
      for (size_t p = 0; p < parts_.size(); ++p) {
        if (!parts_[p].full) continue;
        for (int id : plan_.parts[p].stage_ids) Pick(id, picks);
      }
      full_pending_ = false;
    }
    // Fill the workers with the stages whose bounds leave the least slack:
    // the likeliest to be on the optimum once the others are measured.
    const int64_t target = Target();
    auto full = [&] { return in_flight_ + static_cast<int64_t>(picks.size()) >= target; };
    if (!full()) Fill(picks, target);
    in_flight_ += static_cast<int64_t>(picks.size());
    spdlog::debug("lazy round {}: {} picked, {} in flight", stats.rounds, picks.size(), in_flight_);
    UpdateGap(picks.empty() && in_flight_ == 0);
    round_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return picks;
  }

  //! Adds to `picks`, up to `target` in flight, the unmeasured stages of
  //! the open parts with the least slack, across parts.
  void Fill(std::vector<int>& picks, int64_t target) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    // Ranking a part costs two passes over its space, and it only orders
    // the measurements beyond the optima (those are picked whatever the
    // ranking): a stale ranking is refreshed only while ranking stays a
    // small share of the phase, else the last one is used, less what has
    // been picked since.
    const double allowed = kRankShare * std::chrono::duration<double>(start - started_).count();
    // Refreshing every stale part at once would hold the round up long
    // enough for the workers to run dry: a few milliseconds a round.
    auto refresh = [&] {
      const double spent = std::chrono::duration<double>(Clock::now() - start).count();
      return rank_s_ + spent <= allowed && spent < kRankPerRoundS;
    };
    auto skip_taken = [&](PartStatus& status) {
      while (status.next_at < status.next_best.size() &&
             state_[status.next_best[status.next_at].second] != StageState::kUnmeasured) {
        ++status.next_at;
      }
      return status.next_at < status.next_best.size();
    };
    heads_.clear();  // (slack of the part's next stage, part): a min-heap
    for (size_t p = 0; p < parts_.size(); ++p) {
      PartStatus& status = parts_[p];
      if (!status.open) continue;
      if (status.slack_stale && refresh()) RankNextBest(p);
      if (skip_taken(status)) heads_.emplace_back(status.next_best[status.next_at].first, p);
    }
    std::make_heap(heads_.begin(), heads_.end(), std::greater<>());
    while (!heads_.empty() && in_flight_ + static_cast<int64_t>(picks.size()) < target) {
      std::pop_heap(heads_.begin(), heads_.end(), std::greater<>());
      const size_t p = heads_.back().second;
      heads_.pop_back();
      PartStatus& status = parts_[p];
      Pick(status.next_best[status.next_at++].second, picks);
      if (skip_taken(status)) {
        heads_.emplace_back(status.next_best[status.next_at].first, p);
        std::push_heap(heads_.begin(), heads_.end(), std::greater<>());
      }
    }
    rank_s_ += std::chrono::duration<double>(Clock::now() - start).count();
  }

  //! The bound gap for progress lines: at most once a second and while it
  //! stays a small share of the phase (it costs a solve per open part, where
  //! every newly measured stage is cheaper), and at the end.
  void UpdateGap(bool last) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && (now - last_gap_ < std::chrono::seconds(1) ||
                  gap_s_ > kGapShare * std::chrono::duration<double>(now - started_).count())) {
      return;
    }
    last_gap_ = now;
    double lower = 0, upper = 0;
    for (size_t p = 0; p < parts_.size(); ++p) {
      PartStatus& status = parts_[p];
      if (status.upper_stale) {
        status.upper.Solve();
        recomputed_upper_ += status.upper.last_recomputed();
        status.upper_ms = status.upper.latency_ms();
        status.upper_stale = false;
      }
      lower += status.lower_ms;
      upper += status.upper_ms;
    }
    MeasureProgress& stats = session_.stats();
    stats.lower_ms = lower;
    stats.upper_ms = upper;
    gap_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - now).count();
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
      for (uint32_t q = occurs_begin_[id]; q < occurs_begin_[id + 1]; ++q) {
        PartStatus& other = parts_[occurs_[q].part];
        other.bounded.Set(static_cast<int>(occurs_[q].local), best);
        other.dirty = other.slack_stale = other.upper_stale = true;
      }
    }
    return raised;
  }

  //! In flight after a round: twice the low water mark, so that every
  //! worker's queue is full and as much again waits at the router while the
  //! next round is decided. Rounds are then few and wide, and the work
  //! between them small beside the measuring. One stage at a time where the
  //! measurer measures one at a time: nothing runs while a round is
  //! decided, and every stage beyond an optimum would be a wasted
  //! measurement.
  int64_t Target() const {
    const int64_t credit = measurer_.Credit();
    return credit <= 1 ? 1 : 2 * LowWater();
  }
  //! A round starts when no more than this is left in flight: the farm's
  //! credit (its workers' capacities summed; asked each round, workers come
  //! and go), or what the farm measures in kCoverS if more (a fast farm,
  //! e.g. the simulator, empties its queues before a round of credit's
  //! width has been decided, posted and handed on by three threads, and
  //! then sits idle), at most kMaxCreditMultiple times the credit.
  int64_t LowWater() const {
    const int64_t credit = measurer_.Credit();
    if (credit <= 1) return 0;
    const auto covered = static_cast<int64_t>(std::ceil(rate_ * kCoverS));
    return std::max({credit, int64_t{measurer_.ActiveWorkers()},
                     std::min(covered, kMaxCreditMultiple * credit)});
  }
  //! Follows the rate at which results come back, over the last rounds.
  void UpdateRate(int64_t arrived) {
    const auto now = std::chrono::steady_clock::now();
    arrived_since_ += arrived;
    const double span = std::chrono::duration<double>(now - rate_since_).count();
    if (span < kRateWindowS) return;
    const double rate = static_cast<double>(arrived_since_) / span;
    rate_ = rate_ > 0 ? 0.5 * rate_ + 0.5 * rate : rate;
    arrived_since_ = 0;
    rate_since_ = now;
  }

  //! Counts stage `id` (with a latency now) if it came in below its bound,
  //! per part, and marks a part whose bounds fail too often to be measured
  //! in full.
  void Check(int id) {
    if (bounds_.Operators(id) <= 1) return;  // a single operator is its own bound
    const double latency = session_.latency()[id];
    if (!std::isfinite(latency)) return;  // failed: no figure to hold to a bound
    const bool below = latency < bound_[id];
    MeasureProgress& stats = session_.stats();
    if (below) {
      ++stats.bound_violations;
      spdlog::debug("lazy measurement: stage {} came in at {:.6f} ms, below its bound {:.6f} ms",
                    id, latency, bound_[id]);
    }
    for (uint32_t k = occurs_begin_[id]; k < occurs_begin_[id + 1]; ++k) {
      const uint32_t p = occurs_[k].part;
      if (k > occurs_begin_[id] && occurs_[k - 1].part == p) continue;  // once per part
      PartStatus& status = parts_[p];
      ++status.checked;
      if (below) ++status.violations;
      if (status.full ||
          !(status.violations > max_violations_ * static_cast<double>(status.checked))) {
        continue;
      }
      status.full = true;
      full_pending_ = true;
      ++stats.parts_measured_in_full;
      const PartPlan& part = plan_.parts[p];
      spdlog::warn(
          "lazy measurement: block {} part {}{}: {} of its {} stages of several operators with "
          "a latency came in below their lower bounds (more than {:g}%, "
          "--bound-violations-max-fraction): measuring all {} of its candidate stages",
          part.block, part.part, part.piece > 0 ? " piece " + std::to_string(part.piece) : "",
          status.violations, status.checked, 100 * max_violations_, part.space.stage_count());
    }
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
  std::vector<double> bound_;  // the lower bound of each stage of several operators, else 0
  const StageBounds& bounds_;
  const double max_violations_;  // SearchOptions::bound_violations_max_fraction
  bool full_pending_ = false;    // a part marked full has stages not picked yet
  std::vector<PartStatus> parts_;
  struct Occurrence {
    uint32_t part = 0, local = 0;
  };
  std::vector<uint32_t> occurs_begin_;  // by stage id, into occurs_
  std::vector<Occurrence> occurs_;
  int64_t in_flight_ = 0;
  double rate_ = 0;  // results a second, lately; 0: not known yet
  int64_t arrived_since_ = 0;
  std::chrono::steady_clock::time_point rate_since_ = std::chrono::steady_clock::now();
  const Measurer& measurer_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  int64_t solves_ = 0, recomputed_ = 0, recomputed_upper_ = 0;  // DP states recomputed
  double gap_s_ = 0;                                            // spent on the bound gap
  double round_s_ = 0;                            // spent deciding rounds, ranking included
  double rank_s_ = 0;                             // spent ranking next-best stages
  std::vector<std::pair<double, size_t>> heads_;  // Fill's merge
  std::chrono::steady_clock::time_point last_gap_{};
  std::vector<SubStages> sub_stages_;  // by part; empty: sub-stage bounds are off
  std::vector<int> scratch_, sequence_;
  std::vector<double> slack_;
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
  LazyMeasurement lazy(plan, session, bounds, model, measurer, options);
  session.Measure(lazy.Start(),
                  [&](std::span<const int> arrived) { return lazy.Arrived(arrived); });
  LatencyTable table = session.Finish();
  lazy.MarkSkipped(table);
  lazy.LogCost();
  return table;
}

}  // namespace ios::coordinator
