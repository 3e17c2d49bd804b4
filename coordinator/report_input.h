// The HTML report's input (report/report.h) filled from what the
// coordinator holds after a search or an --evaluate: the producers live with
// their data so that report/ depends on nothing but common.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/measurement.h"
#include "coordinator/multi_device.h"
#include "coordinator/search.h"
#include "coordinator/specialize.h"
#include "report/report.h"

namespace ios::coordinator {

//! Why an HTML report cannot be written to `path` ("cannot write the report
//! there: ..."; "-" included: a page is a file), or "" when it can. Run before any work so that a
//! typo costs nothing; leaves no file behind.
std::string ReportPathProblem(const std::string& path);

//! What became of one part's distinct candidate stages. A stage shared by
//! several parts counts where it first appears; later parts count it as
//! `earlier`. The text report (FormatReport) and the HTML report both use it.
struct PartStageCounts {
  int64_t stages = 0;    // distinct stages of the part
  int64_t measured = 0;  // measured by this search
  int64_t stored = 0;    // read from the DB (failed ones included)
  int64_t earlier = 0;   // counted by an earlier part
  int64_t skipped = 0;   // never measured: the lazy bounds ruled it out
};
//! One per outcome.plan.parts, in order.
std::vector<PartStageCounts> CountPartStages(const SearchOutcome& outcome);

//! Per NodeId: its block index, -1 for node 0 and nodes in no block.
std::vector<int> BlockOfNodes(const Graph& graph);

//! A stage as the report draws it (latency NaN, source unpriced); its block
//! from `block_of` (BlockOfNodes), by its first operator.
report::StageRow StageRowOf(const Stage& stage, const std::vector<int>& block_of);

//! The lanes a stage has on a device: 1 for a merge stage (one kernel),
//! else its group count.
int LanesOf(const report::StageRow& stage);

//! What lane l of a stage with L lanes is on `device`, for every L in
//! `lane_counts`: cuda streams as devices/cuda/cuda_compile.cc assigns them,
//! cpu thread shares as devices/cpu/cpu_lanes.h's SplitCores splits the
//! fingerprint's threads= budget, the simulator's modelled streams.
report::LaneNames LaneNamesFor(const DeviceInfo& device, const std::set<int>& lane_counts);

//! Every lane count of the input's schedules and multi view, then
//! LaneNamesFor(input.device, them) into input.lanes.
void NameLanes(report::ReportInput& input);

//! A verification's (or --evaluate's) end-to-end figure.
report::EndToEnd EndToEndOf(const VerifiedSchedule& run);

//! The report of a search: the returned schedule first, then the IOS
//! optimum (when verification returned another), sequential, greedy and the
//! alternatives verification priced, each with its stages' prices and where
//! they came from (`outcome.table`), its peak and its end-to-end figure; the
//! parts with their DP sizes and stage counts; the phase times; the lanes
//! named for `device`; and with `multi`, the multi-device view over time.
//! Schedules with a NaN latency (not asked for) are left out. tool, version
//! and generated_at are the caller's to fill.
report::ReportInput ReportOfSearch(const Graph& graph, const SearchOutcome& outcome,
                                   const DeviceInfo& device, const MultiDeviceOutcome* multi);

//! What --evaluate priced, for its report.
struct EvaluationFacts {
  std::string name;  // the schedule file
  const Schedule& priced;
  const SearchPlan& plan;  // whose stage ids `priced` names
  const LatencyTable& table;
  DeviceInfo device;
  int batch = 1;
  MeasureSettings settings;               // the stages' measurement settings
  const VerifiedSchedule* run = nullptr;  // its end-to-end figure, if any
};

//! The report of --evaluate: the file's schedule with its prices and
//! end-to-end figure; and the sequential and greedy schedules of the graph
//! when `store` holds every one of their stages for this device, batch and
//! settings (a DB lookup; measuring them would take as long as a search's
//! baselines). A note says which were shown.
report::ReportInput ReportOfEvaluation(const Graph& graph, const EvaluationFacts& facts,
                                       db::ProfileStore& store);

//! The report of --specialize: the matrix as a heat map (rows = optimised
//! for, columns = run at, normalised to the column's best; a column that
//! compares DP sums, as SpecializationMatrix::Figure does, shows no
//! measured figure); each row's schedule priced at its own setting, the
//! first setting's marked returned; each operator's latency alone from
//! `first`'s sequential schedule (the first setting's search; may be null);
//! the first setting's device, simulated when any is, and notes naming them
//! all. Throws ios::Error when the matrix lacks what RunSpecialization fills
//! (`own`, `devices`, a cell per row and column).
report::ReportInput ReportOfSpecialization(const Graph& graph, const SpecializationMatrix& matrix,
                                           const SearchOutcome* first);

}  // namespace ios::coordinator
