// A whole-network search in three phases (DESIGN.md §2): enumerate every
// candidate stage of every part and dedupe them by canonical key; measure
// only what the profiling DB lacks; solve the DP on the complete table.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/graph.h"
#include "common/measurement.h"
#include "common/network_spec.h"
#include "common/stage.h"
#include "common/stage_key_hash.h"
#include "coordinator/dp.h"
#include "coordinator/measurer.h"
#include "coordinator/memory_search.h"
#include "coordinator/stage_hash_index.h"
#include "db/profile_store.h"

namespace ios::coordinator {

//! kAll measures every candidate stage; kLazy only those that lower bounds
//! cannot rule out, with the same schedule as a result (docs/search-cost.md).
enum class MeasureMode { kLazy, kAll };
const char* ToString(MeasureMode mode);

//! The search's last step (docs/execution.md, "Verified schedules"): its
//! best candidates run end to end on the measuring device, and the fastest
//! as measured is returned.
struct VerifyOptions {
  bool enabled = true;
  //! DP schedules verified beside the IOS optimum, greedy and sequential:
  //! alternative i is the optimum with the i-th stage of the IOS schedule
  //! that the DP expects to save the most forbidden.
  int alternatives = 2;
  static constexpr int kMaxAlternatives = 16;
  //! Settings of the end-to-end runs (DefaultVerifySettings).
  MeasureSettings settings;
  //! On a real device each candidate is timed this many times, the passes
  //! in alternating order (A B C, C B A, ...), and its lowest median kept:
  //! a shared machine's slow spell then does not fall on one candidate
  //! alone. The simulator is exact: one pass.
  int passes = 2;
  static constexpr int kMaxPasses = 8;
  //! A pass after the first runs only while the verification, that pass
  //! included (taken to cost what the last one did), stays within this
  //! fraction of the search before it (enumerating, measuring, solving):
  //! a short search is not doubled by its end-to-end runs. The first pass
  //! always runs. 0: one pass; a large value: every pass.
  double budget_fraction = 0.1;
  uint64_t weight_seed = 1;
};

//! End-to-end runs: on a real device (cpu and cuda alike) 2 warm-up runs,
//! then single runs until 10 agree within 5% (at most 30); on a modelled
//! one (the simulator) one run (it is exact).
MeasureSettings DefaultVerifySettings(DeviceTiming timing);

struct SearchOptions {
  DpOptions dp;
  //! Blocks (and explicit parts) larger than this are cut, at narrow cuts,
  //! into as few parts of at most this many operators as possible (IOS:
  //! large blocks are split to bound the DP).
  int max_part_size = 50;
  //! A part over a DP budget is cut in two at a narrow cut and each half
  //! retried, at most this many times deep; pieces still over budget then
  //! are scheduled greedily.
  int max_split_depth = 8;
  //! Budget of the whole search: distinct candidate stages (each one is
  //! measured). A part may add at most what is
  //! left of it, counted before deduplication (else it is cut like a part
  //! over DpOptions::max_stages). The default keeps every zoo model exact,
  //! RandWire unpruned (380,929 distinct) included.
  int64_t max_search_stages = kDefaultMaxSearchStages;
  static constexpr int64_t kDefaultMaxSearchStages = 500'000;
  int batch_size = 1;
  MeasureSettings settings;
  //! Stages in the measurer's hands at once: bounds the memory of the
  //! measure phase (a stage's spec takes a few kilobytes).
  int measure_chunk = 16384;
  //! Which candidate stages a search measures (docs/search-cost.md).
  MeasureMode measure = MeasureMode::kLazy;
  //! Lazy: how far below the measured single operators an unmeasured
  //! stage's bound is set, as a fraction, for measurement noise (0: the
  //! stored latencies are taken as they are; docs/search-cost.md).
  double bound_margin = 0;
  //! Lazy: a part whose stages came in below their lower bounds more often
  //! than this fraction of its stages with a latency and more than one
  //! operator is measured in full (every candidate), so its schedule is the
  //! exhaustive one whatever its bounds are worth. 0: at the first stage
  //! below its bound; 1: never (docs/search-cost.md).
  double bound_violations_max_fraction = kDefaultBoundViolationsMaxFraction;
  static constexpr double kDefaultBoundViolationsMaxFraction = 0.05;
  //! Lazy: also raise a stage's bound to its measured or bounded sub-stages
  //! (the stage without one of its groups) before measuring it. Measures
  //! far fewer stages, but is not exact: on the simulator a sub-stage can be
  //! up to ~10% slower than the stage (launch order follows the canonical
  //! group order), so the schedule may differ slightly from --measure all's
  //! (docs/search-cost.md). Off by default.
  bool sub_stage_bounds = false;
  //! Plan a part with the structure of an earlier one (StageKeyer::
  //! OrderedKey) by reusing that one's space and stage ids instead of
  //! walking and keying it again: the plan is the same either way.
  bool reuse_repeated_parts = true;
  VerifyOptions verify;
  //! A peak-memory budget or objective (coordinator/memory_search.h).
  MemoryOptions memory;
  //! Threads that build the canonical keys of a part's candidate stages
  //! (the plan is the same for any count: ids follow part order); 0: one
  //! per hardware thread, at most kMaxPlanThreads.
  int plan_threads = 0;
  static constexpr int kMaxPlanThreads = 16;
};

//! How the schedule of a part was found.
enum class PartSchedule {
  kExact,        // the DP over the whole part: optimal for it
  kCut,          // a part of a block cut by max_part_size: optimal for the part, not the block
  kSplit,        // the part was over a DP budget; this piece of it is solved exactly
  kGreedy,       // over budget even after splitting: greedy (see PartSpace::Greedy)
  kMemoryOrder,  // its pieces had no schedule under the memory cap: its least-peak order
};
const char* ToString(PartSchedule schedule);

//! One part of one block (or a piece of a part over budget) and its space.
struct PartPlan {
  int block = 0, part = 0;
  int piece = 0;  // 0.. within a part cut by the budget fallback, else 0
  PartSchedule schedule = PartSchedule::kExact;
  std::vector<NodeId> ops;
  //! The greedy schedule of a whole part that was cut: SolveSchedule uses it
  //! instead of the part's pieces when it is faster (a cut loses every
  //! stage across it; greedy keeps the widest ones).
  bool alternative = false;
  PartSpace space;
  std::vector<int> stage_ids;  // per space.stages(): index into SearchPlan::stages
};

//! A schedule of one block: stages in execution order, by distinct-stage id.
using BlockSchedule = std::vector<std::pair<Stage, int>>;

//! Output of the enumerate phase: everything that must be measured.
struct SearchPlan {
  std::vector<PartPlan> parts;
  //! Identity of each distinct stage, by stage id: the profiling DB's hash
  //! of its canonical key (HashStageKey, 127 bits), which is also how
  //! the DB finds the stage. Two stages are one when their hashes are equal,
  //! in the plan as in the DB (for 10^6 stages the chance that two distinct
  //! keys share one is about 10^-27). The texts are not kept (RandWire
  //! unpruned: 380,929 keys of ~1 KB); KeyOf builds one again.
  std::vector<StageKeyHash> key_hashes;
  int64_t stage_occurrences = 0;  // candidate stages counted per part, before dedupe
  int reused_parts = 0;  // parts planned by reusing an earlier part's space (see SearchOptions)
  std::vector<BlockSchedule> sequential, greedy;  // baselines, per block
  //! One line per part that went over a DP budget and per block cut by
  //! max_part_size: what was approximated.
  std::vector<std::string> warnings;
  //! The memory budget or objective as planned (inactive without one).
  MemoryPlanInfo memory;

  size_t stage_count() const { return key_hashes.size(); }
  //! Distinct stage `id` (one representative of its key).
  Stage StageOf(int id) const;
  //! The canonical key of stage `id`, built again by `keyer` (of the plan's graph).
  std::string KeyOf(StageKeyer& keyer, int id) const { return keyer.Key(StageOf(id)); }
  //! Id of `stage`, registering it if its key is new. `keyer` is of the
  //! plan's graph. `part` / `local`: where the stage lives in parts (so it
  //! need not be copied); part -1 keeps a copy.
  int Intern(StageKeyer& keyer, const Stage& stage, int part = -1, int local = 0);
  //! Same as Intern, for a stage of part `part` (>= 0) whose key's hash
  //! `hash` was computed elsewhere.
  int InternHash(const StageKeyHash& hash, int part, int local);
  //! The id of the stage with canonical key `key`, or -1.
  int IdOf(std::string_view key) const { return IdOfHash(HashStageKey(key)); }
  //! The id of the stage whose key hashes to `hash`, or -1.
  int IdOfHash(const StageKeyHash& hash) const { return index_.Find(hash); }

 private:
  int InternHashed(const StageKeyHash& hash, const Stage* stage, int part, int local);
  struct StageRef {
    int part = -1;  // -1: loose_stages_[local]
    int local = 0;
  };
  std::vector<StageRef> refs_;
  std::vector<Stage> loose_stages_;  // baselines, evaluated schedules
  StageHashIndex index_;
};

//! Splits `block` into the parts the DP schedules one after another: its
//! explicit parts, or the whole block, each cut to `max_part_size`. If
//! `cut` is set, (*cut)[i] says whether part i is a piece of a block or an
//! explicit part that was larger than `max_part_size` (the explicit parts
//! are IOS's own decomposition; a cut by size loses the stages across it).
std::vector<std::vector<NodeId>> PartsOf(const Graph& graph, const Block& block, int max_part_size,
                                         std::vector<bool>* cut = nullptr);

//! A long walk of one part (see DpProgress), with where it is.
struct PlanProgress {
  int block = 0, part = 0;
  DpProgress dp;
};

//! Phase 1. Throws ios::Error on invalid options. A part over a DP budget
//! is cut and retried, then scheduled greedily (SearchOptions); each such
//! part adds a line to `warnings` and is logged. `progress` is called at
//! most once a second during a long walk.
SearchPlan PlanSearch(const Graph& graph, const SearchOptions& options,
                      const std::function<void(const PlanProgress&)>& progress = {});

struct MeasureProgress {
  int64_t total = 0, reused = 0, measured = 0, failed = 0;
  double elapsed_s = 0;
  int workers = 0;        // serving the search now
  bool finished = false;  // the last report of the phase
  //! Lazy measurement: rounds of re-solving so far, and the DP's optimum
  //! over all parts with bounds for unmeasured stages (lower) and with
  //! measured stages only (upper); the search ends when they meet.
  bool lazy = false;
  int64_t rounds = 0;
  double lower_ms = 0, upper_ms = 0;
  //! Lazy: stages (stored or measured) whose latency came in below their
  //! lower bound, and parts measured in full because of them
  //! (SearchOptions::bound_violations_max_fraction).
  int64_t bound_violations = 0;
  int64_t parts_measured_in_full = 0;
};

//! Why a stage has no latency: its stored or new failed result.
struct StageFailure {
  MeasureError error = MeasureError::kNone;
  std::string message;
};

struct LatencyTable {
  //! Per distinct stage; infinity when it failed or was not measured.
  std::vector<double> latency_ms;
  std::vector<bool> measured_now;  // measured by this search (else from the DB, or skipped)
  //! Lazy measurement: neither stored nor measured, because its lower bound
  //! kept it off every optimal schedule.
  std::vector<bool> skipped;
  std::unordered_map<int, StageFailure> failures;  // by stage id, for messages
  MeasureProgress stats;
};

//! Phase 2, every stage. Looks every stage up in `store` for the
//! measurer's device; measures only the misses and commits each result as
//! it arrives. `progress` is called now and then with the running counts.
LatencyTable MeasureStages(const Graph& graph, const SearchPlan& plan, db::ProfileStore& store,
                           Measurer& measurer, const SearchOptions& options,
                           const std::function<void(const MeasureProgress&)>& progress = {});

//! Phase 2, lazily (docs/search-cost.md): the stored stages, the single
//! operators and the baselines' stages first; then, round by round, the
//! unmeasured stages on each part's optimum under lower bounds (and the
//! next-best ones, to keep every worker busy), until every part's optimum
//! consists of measured stages. SolveSchedule on the result finds the
//! schedule it would find on a table of every stage. Unmeasured stages are
//! `skipped` and infinite in the table.
LatencyTable MeasureLazily(const Graph& graph, const SearchPlan& plan, db::ProfileStore& store,
                           Measurer& measurer, const SearchOptions& options,
                           const std::function<void(const MeasureProgress&)>& progress = {});

struct ScheduledStage {
  Stage stage;
  int stage_id = 0;
  double latency_ms = 0;
};

//! How one part (or piece) of an IOS schedule was found.
struct PartSummary {
  int block = 0, part = 0, piece = 0;
  PartSchedule schedule = PartSchedule::kExact;
  int operators = 0;
  NodeId first = -1, last = -1;  // its first and last operator
  double latency_ms = 0;
  //! A greedy schedule that replaced the pieces: of the whole part that was
  //! cut, or (part == piece == -1) of the whole block, its baseline.
  bool alternative = false;
};

struct Schedule {
  std::vector<std::vector<ScheduledStage>> blocks;
  double latency_ms = 0;
  //! Peak activation bytes at the search's batch (SchedulePeakBytes); -1
  //! when not computed.
  int64_t peak_bytes = -1;
  std::vector<PartSummary> parts;  // SolveSchedule only: which parts are exact
};

//! Phase 3: the optimal schedule for every part, concatenated per block;
//! for a part over a DP budget, its pieces' or the greedy one, the faster;
//! for a block with such a part or cut by max_part_size, that or the
//! block's greedy baseline. Throws ios::Error when every schedule of a part
//! contains a failed stage, naming one (by operator names from `graph` and
//! with its error from `table`, when given).
Schedule SolveSchedule(const SearchPlan& plan, const std::vector<double>& latency,
                       size_t block_count, const LatencyTable* table = nullptr,
                       const Graph* graph = nullptr);
//! Peak activation bytes of `schedule` at `batch`: what ios-run's memory
//! plan holds live at once (exec::PlanMemory; merge stages included).
int64_t SchedulePeakBytes(const Graph& graph, const Schedule& schedule, int batch);
//! Prices a fixed per-block schedule with the latency table.
Schedule PriceSchedule(const std::vector<BlockSchedule>& blocks,
                       const std::vector<double>& latency);

//! One schedule the search ran end to end.
struct VerifiedSchedule {
  std::string name;   // "ios", "greedy", "sequential", "alternative 1", ...
  Schedule schedule;  // priced by the DP's table (latency_ms: the prediction)
  MeasureResult measured;
  bool reused = false;  // the figure came from the profiling DB
};

//! What verification found; empty when it did not run.
struct Verification {
  std::vector<VerifiedSchedule> candidates;  // the IOS optimum first
  size_t chosen = 0;                         // the fastest measured; the IOS optimum when none was
  //! Why nothing could be measured (e.g. the device cannot run networks),
  //! when so; the IOS optimum is returned unverified then.
  std::string unverified_reason;
  //! Passes run (VerifyOptions::passes, less those past the budget; 0 when
  //! every figure came from the DB) of those planned.
  int passes_run = 0, passes_planned = 0;
  bool ran() const { return !candidates.empty(); }
};

//! A whole search and what it found.
struct SearchOutcome {
  std::string model;
  DeviceInfo device;
  SearchOptions options;
  SearchPlan plan;
  LatencyTable table;
  Schedule ios, sequential, greedy;
  Verification verification;
  double enumerate_s = 0, measure_s = 0, solve_s = 0, verify_s = 0;
  //! The schedule the search returns: the verified fastest, else the IOS
  //! optimum.
  const Schedule& Returned() const;
  //! Its name ("ios" when unverified).
  std::string ReturnedName() const;
};

//! Runs `outcome`'s candidates (SearchOptions::verify) end to end through
//! `measurer`, reusing and storing figures in `store` (keyed by
//! NetworkKey, device, batch and settings). Never throws for a candidate
//! that fails to run: its failure is its result.
Verification VerifyCandidates(const Graph& graph, const SearchOutcome& outcome,
                              db::ProfileStore& store, Measurer& measurer);

//! One schedule end to end (ios-coordinator --evaluate): its stored figure
//! (keyed as VerifyCandidates keys them), or one measured through
//! `measurer` and stored under `name`.
VerifiedSchedule VerifySchedule(const Graph& graph, const std::string& model,
                                const std::string& name, const Schedule& schedule,
                                const SearchOptions& options, const DeviceInfo& device,
                                db::ProfileStore& store, Measurer& measurer);

//! The whole network of `schedule` as a worker runs it.
NetworkSpec NetworkOf(const Graph& graph, const Schedule& schedule, uint64_t weight_seed);

//! Runs the three phases for `graph` and the two baselines.
SearchOutcome RunSearch(const Graph& graph, const std::string& model, const SearchOptions& options,
                        db::ProfileStore& store, Measurer& measurer,
                        const std::function<void(const MeasureProgress&)>& progress = {},
                        const std::function<void(const PlanProgress&)>& plan_progress = {});

}  // namespace ios::coordinator
