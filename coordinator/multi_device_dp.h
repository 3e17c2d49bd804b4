// Internal to coordinator/multi_device.cc: the prices HIOS works with, and
// the IOS dynamic program run inside each device of a HIOS schedule (issue
// 23, item 4: "the IOS DP per GPU instead of the window", compared).
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"
#include "coordinator/measurer.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "hios/costs.h"
#include "hios/dag.h"
#include "hios/schedule.h"

namespace ios::coordinator {

inline NodeId NodeOf(hios::OpId op) { return op + 1; }
inline hios::OpId OpOf(NodeId node) { return node - 1; }

//! Operator and stage prices from the farm; copies from the link model.
//! A stage is priced by its operator set: on one device a set appears in
//! one stage at a time, and whoever sets its price chose its structure.
class GraphCosts : public hios::Costs {
 public:
  GraphCosts(int devices, std::vector<double> op_ms, std::vector<double> transfer_ms)
      : devices_(devices), op_ms_(std::move(op_ms)), transfer_ms_(std::move(transfer_ms)) {}

  int devices() const override { return devices_; }
  double OpMs(hios::OpId op, int) const override { return op_ms_[static_cast<size_t>(op)]; }
  double StageMs(std::span<const hios::OpId> ops, int) const override {
    if (ops.size() == 1) return op_ms_[static_cast<size_t>(ops[0])];
    std::vector<hios::OpId> key(ops.begin(), ops.end());
    std::sort(key.begin(), key.end());
    const auto it = stage_ms_.find(key);
    return it == stage_ms_.end() ? std::numeric_limits<double>::infinity() : it->second;
  }
  double TransferMs(hios::EdgeId edge, int, int) const override {
    return transfer_ms_[static_cast<size_t>(edge)];
  }
  bool identical_devices() const override { return true; }

  //! Not thread-safe: called between searches, never during one.
  void SetStageMs(std::vector<hios::OpId> ops, double ms) {
    std::sort(ops.begin(), ops.end());
    stage_ms_[std::move(ops)] = ms;
  }

 private:
  int devices_;
  std::vector<double> op_ms_, transfer_ms_;
  std::map<std::vector<hios::OpId>, double> stage_ms_;
};

//! A HIOS stage as the farm measures it: one group (stream) per operator.
Stage StageOfOps(const std::vector<hios::OpId>& ops);

//! The operators of a stage, as hios ops.
std::vector<hios::OpId> OpsOfStage(const Stage& stage);

//! What the DP inside each device found.
struct DeviceDpOutcome {
  //! Per device its stages, the DP's where they made the whole schedule
  //! faster under THE evaluator, else the window's.
  std::vector<std::vector<Stage>> stages;
  hios::MultiSchedule schedule;  // the same, as op sets (ordered_stages)
  double latency_ms = 0;
  int devices_improved = 0;
  int segments = 0, segments_over_budget = 0;
  int64_t stages_measured = 0, stages_reused = 0, stages_failed = 0;
};

//! For each device of `window` (HIOS after the sliding window): cuts its
//! stage sequence into segments of at most search.max_part_size operators,
//! enumerates each with the IOS DP (search.dp's budgets: a segment over one
//! keeps the window's stages), prices every candidate through the DB and
//! the farm in one batch, and replaces a device's stages by the DP's when
//! Evaluate of the whole schedule says it is strictly faster (it may not
//! be: the DP sees neither copies nor the other devices, and may order a
//! device so that it waits on them). `costs` gains the chosen stages'
//! prices.
DeviceDpOutcome RunDeviceDp(const Graph& graph, const hios::Dag& dag, GraphCosts& costs,
                            const hios::MultiSchedule& window, const SearchOptions& search,
                            db::ProfileStore& store, Measurer& measurer,
                            const std::function<void(const MeasureProgress&)>& progress);

}  // namespace ios::coordinator
