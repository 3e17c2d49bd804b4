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
#include "common/stage.h"
#include "coordinator/dp.h"
#include "coordinator/measurer.h"
#include "db/profile_store.h"

namespace ios::coordinator {

struct SearchOptions {
  DpOptions dp;
  //! Blocks without explicit parts are cut into consecutive parts of at most
  //! this many operators (IOS: large blocks are split to bound the DP).
  int max_part_size = 50;
  int batch_size = 1;
  MeasureSettings settings;
};

//! One part of one block and its enumerated space.
struct PartPlan {
  int block = 0, part = 0;
  std::vector<NodeId> ops;
  PartSpace space;
  std::vector<int> stage_ids;  // per space.stages(): index into SearchPlan::stages
};

//! A schedule of one block: stages in execution order, by distinct-stage id.
using BlockSchedule = std::vector<std::pair<Stage, int>>;

//! Output of the enumerate phase: everything that must be measured.
struct SearchPlan {
  std::vector<PartPlan> parts;
  std::vector<std::string> keys;   // canonical key of each distinct stage, by stage id
  int64_t stage_occurrences = 0;   // candidate stages counted per part, before dedupe
  std::vector<BlockSchedule> sequential, greedy;  // baselines, per block

  size_t stage_count() const { return keys.size(); }
  //! Distinct stage `id` (one representative of its key).
  Stage StageOf(int id) const;
  //! Id of `stage`, registering it if its key is new. `keyer` is of the
  //! plan's graph. `part` / `local`: where the stage lives in parts (so it
  //! need not be copied); part -1 keeps a copy.
  int Intern(StageKeyer& keyer, const Stage& stage, int part = -1, int local = 0);

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct StageRef {
    int part = -1;  // -1: loose_stages_[local]
    int local = 0;
  };
  std::vector<StageRef> refs_;
  std::vector<Stage> loose_stages_;  // baselines, evaluated schedules
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> index_;
};

//! Splits `block` into the parts the DP schedules one after another.
std::vector<std::vector<NodeId>> PartsOf(const Block& block, int max_part_size);

//! Phase 1. Throws ios::Error on invalid options.
SearchPlan PlanSearch(const Graph& graph, const SearchOptions& options);

struct MeasureProgress {
  int64_t total = 0, reused = 0, measured = 0, failed = 0;
  double elapsed_s = 0;
  int workers = 0;  // serving the search now
};

struct LatencyTable {
  std::vector<double> latency_ms;  // per distinct stage; infinity when it failed
  std::vector<bool> measured_now;  // false: reused from the DB
  MeasureProgress stats;
};

//! Phase 2. Looks every stage up in `store` for the measurer's device;
//! measures only the misses and commits each result as it arrives.
//! `progress` is called now and then with the running counts.
LatencyTable MeasureStages(const Graph& graph, const SearchPlan& plan, db::ProfileStore& store,
                           Measurer& measurer, const SearchOptions& options,
                           const std::function<void(const MeasureProgress&)>& progress = {});

struct ScheduledStage {
  Stage stage;
  int stage_id = 0;
  double latency_ms = 0;
};

struct Schedule {
  std::vector<std::vector<ScheduledStage>> blocks;
  double latency_ms = 0;
};

//! Phase 3: the optimal schedule for every part, concatenated per block.
Schedule SolveSchedule(const SearchPlan& plan, const std::vector<double>& latency,
                       size_t block_count);
//! Prices a fixed per-block schedule with the latency table.
Schedule PriceSchedule(const std::vector<BlockSchedule>& blocks, const std::vector<double>& latency);

//! A whole search and what it found.
struct SearchOutcome {
  std::string model;
  DeviceInfo device;
  SearchOptions options;
  SearchPlan plan;
  LatencyTable table;
  Schedule ios, sequential, greedy;
  double enumerate_s = 0, measure_s = 0, solve_s = 0;
};

//! Runs the three phases for `graph` and the two baselines.
SearchOutcome RunSearch(const Graph& graph, const std::string& model, const SearchOptions& options,
                        db::ProfileStore& store, Measurer& measurer,
                        const std::function<void(const MeasureProgress&)>& progress = {});

}  // namespace ios::coordinator
