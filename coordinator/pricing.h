// The price of a given schedule from the profiling DB: what --evaluate,
// ios-run's prediction and the specialization matrix ask of a schedule
// that no search of theirs produced (measuring only the stages the DB
// lacks for the device, batch and settings).
#pragma once

#include <functional>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"
#include "coordinator/measurer.h"
#include "coordinator/search.h"
#include "db/profile_store.h"

namespace ios::coordinator {

struct PricedSchedule {
  //! Every stage with its latency from the table; latency_ms is the DP's
  //! sum, infinite when a stage failed (its failure is in table.failures).
  Schedule schedule;
  //! Per distinct stage of the schedule, by the stage ids in `schedule`;
  //! stats say how many were measured now, reused or failed.
  LatencyTable table;
  //! The schedule's distinct stages, whose ids `schedule` names (their keys,
  //! for a report).
  SearchPlan plan;
  size_t distinct_stages = 0;
};

//! Prices `blocks` (stages in execution order, per block of `graph`) at
//! options.batch_size under options.settings on `measurer`'s device: the
//! stored latencies, and the missing stages measured through `measurer`
//! and stored. A stage repeated in the schedule is measured once.
PricedSchedule PriceBlocks(const Graph& graph, const std::vector<std::vector<Stage>>& blocks,
                           const SearchOptions& options, db::ProfileStore& store,
                           Measurer& measurer,
                           const std::function<void(const MeasureProgress&)>& progress = {});

//! The stages of `schedule`, per block (what PriceBlocks takes).
std::vector<std::vector<Stage>> BlockStagesOf(const Schedule& schedule);

}  // namespace ios::coordinator
