// The HTML report of a schedule (docs/report.md): a plain value a producer
// fills from what it has (a search, an evaluation, an ios-run run, a stored
// search, a specialization matrix) and a pure function that turns it into
// one self-contained page. Nothing here runs a farm, opens a DB or a file,
// so every view is testable from a hand-built input.
//
// Units everywhere: milliseconds (`_ms`), bytes (`_bytes`), seconds of a
// phase (`_s`), unix seconds (`_at`). NaN means "no figure" for every double
// named `_ms`; such fields default to NaN.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/graph.h"
#include "common/measurement.h"
#include "common/stage.h"

namespace ios::report {

inline constexpr double kNoFigure = std::numeric_limits<double>::quiet_NaN();

//! Where a stage's latency came from.
enum class Source {
  kMeasuredNow,  // measured by this run
  kStored,       // read from the profiling DB
  kSkipped,      // never measured: the lazy search's bounds showed it cannot win
  kFailed,       // measuring it failed (StageRow::error says why)
  kUnpriced,     // no figure at all
};
//! "measured", "stored", "skipped", "failed", "unpriced" (also the JSON form).
const char* ToString(Source source);

//! One stage of a schedule. Lane l of the stage runs groups[l]; a merge stage
//! is one lane whatever its group count.
struct StageRow {
  Strategy strategy = Strategy::kParallel;
  std::vector<std::vector<NodeId>> groups;  // operators (never node 0), topological per group
  int block = 0;                            // index into Graph::blocks
  double latency_ms = kNoFigure;            // the whole stage's price (the DP table's)
  Source source = Source::kUnpriced;
  int64_t measured_at = 0;  // when the price was measured, unix s; 0: unknown
  std::string key_id;       // HashStageKey(key).id in decimal (DB stages.id); empty: unknown
  std::string error;        // why it failed or is unpriced; empty otherwise
  //! Multi-device views only: predicted start on its device's clock
  //! (hios::Evaluate). Ignored by one-device timelines, which lay stages end to end.
  double start_ms = kNoFigure;
};

//! An end-to-end timing of a whole network run.
struct EndToEnd {
  double median_ms = kNoFigure;
  double spread_ms = 0;  // max - min of the timed runs' means
  int samples = 0;       // timed runs
  std::string how;       // e.g. "ios-run, 30 runs", "verification"
  std::string error;     // non-empty: the run failed, median_ms is NaN
  bool from_db = false;  // reused from the DB's network_runs, not run now
  int64_t measured_at = 0;
};

//! A schedule of the graph (sequential, greedy, IOS, an alternative, a file).
struct ScheduleRow {
  std::string name;                 // "ios", "sequential", "greedy", a file name...
  std::vector<StageRow> stages;     // in execution order; must cover every operator once
  double predicted_ms = kNoFigure;  // the DP's sum of stage prices
  std::optional<EndToEnd> measured;
  int64_t peak_bytes = -1;  // peak live activation memory; -1: unknown
  bool returned = false;    // the schedule the tool returned (at most one)
};

//! One part of the search (coordinator PartPlan + PartSpace + its stages).
struct PartRow {
  int block = 0, part = 0, piece = 0;
  int operators = 0;
  int width = 0;        // the part's width (largest antichain) as the DP saw it
  std::string dp;       // how it was solved: "exact", "cut", "split", "greedy", "memory-order"
  bool unused = false;  // an alternative the returned schedule does not use
  int64_t states = 0, transitions = 0;
  double schedules = 0;  // schedules the DP space holds (can exceed int64)
  int64_t stages = 0;    // candidate stages
  int64_t measured = 0;  // measured by this search
  int64_t stored = 0;    // read from the DB
  int64_t earlier = 0;   // priced by an earlier part with an equal key
  int64_t skipped = 0;   // never measured (lazy bounds)
};

//! What the search did and what it cost.
struct SearchFacts {
  std::vector<PartRow> parts;
  std::vector<std::string> warnings;
  int64_t distinct_stages = 0, stage_occurrences = 0;
  int64_t measured = 0, reused = 0, failed = 0, skipped = 0;
  int64_t lazy_rounds = 0, bound_violations = 0, parts_measured_in_full = 0;
  double enumerate_s = 0, measure_s = 0, solve_s = 0, verify_s = 0;
  int passes_run = 0, passes_planned = 0;  // verification passes
  std::string measure_mode;                // e.g. "lazy", "all"
  std::string settings_key;                // MeasureSettings::Key()
};

//! A copy of a tensor between devices in a multi-device schedule.
struct TransferRow {
  NodeId producer = -1;
  int from = -1, to = -1;  // indices into MultiDeviceView::devices
  int64_t bytes = 0;
  double start_ms = kNoFigure, finish_ms = kNoFigure;
};

struct DeviceStages {
  std::string name;              // e.g. "sim:v100#0"
  std::vector<StageRow> stages;  // start_ms set; lanes as in one-device stages
};

//! A schedule over several devices (HIOS): one group of timeline rows per device.
struct MultiDeviceView {
  std::vector<DeviceStages> devices;
  std::vector<TransferRow> transfers;
  double predicted_ms = kNoFigure;
  std::optional<EndToEnd> measured;
  bool one_device_kept = false;  // HIOS found no gain and kept everything on one device
};

//! One (batch, device) a schedule was optimised for or run at.
struct MatrixSetting {
  int batch = 1;
  std::string device;  // DeviceInfo::name
  bool simulated = false;
};

struct MatrixCell {
  double predicted_ms = kNoFigure;  // DP sum of the row's schedule priced at the column
  double measured_ms = kNoFigure;   // end to end at the column; NaN: not measured
  std::string source;               // e.g. "measured", "db", "dp-sum"
};

//! The specialization matrix (the IOS paper's Table 3, transposed): rows =
//! optimised for (settings, then extra_rows), columns = run at (settings).
struct MatrixView {
  std::vector<MatrixSetting> settings;
  std::vector<std::string> extra_rows;         // e.g. reference schedule files
  std::vector<std::vector<MatrixCell>> cells;  // [row][column]
  int64_t stages_measured = 0, runs_measured = 0;
};

//! A cell's figure: measured when there is one, else predicted (NaN: none).
double CellMs(const MatrixCell& cell);
//! CellMs(cells[row][column]) / the smallest CellMs of that column (the
//! paper's normalisation); NaN when either is missing. Requires both indices
//! in range (throws std::out_of_range otherwise).
double Normalised(const MatrixView& matrix, size_t row, size_t column);

//! What each timeline row is on the device.
struct LaneNames {
  std::string kind;  // "cuda", "cpu", "sim", or empty
  //! by_count[L][l]: lane l of a stage with L lanes, e.g. cuda {1: {"stream 0
  //! (main)"}, 2: {"stream 1", "stream 2"}}. Missing: "lane l".
  std::map<int, std::vector<std::string>> by_count;
};

//! Everything a report shows. Only `graph` and `schedules` are required.
struct ReportInput {
  std::string title;         // page title; empty: "<model> on <device>"
  std::string tool;          // "ios-coordinator search", "ios-run", "ios-db report"...
  std::string version;       // the tool's version
  std::string generated_at;  // ISO 8601, given by the producer (keeps RenderHtml pure)
  std::string model;
  DeviceInfo device;  // device.simulated puts a banner on the page
  int batch = 1;
  Graph graph;  // shapes inferred; must be non-empty to render
  //! Per NodeId (empty, or one per node): each operator's latency alone
  //! (the sequential schedule's stage of it); NaN: unknown.
  std::vector<double> op_alone_ms;
  std::vector<ScheduleRow> schedules;  // the returned one first
  std::optional<SearchFacts> search;
  std::optional<MultiDeviceView> multi;
  std::optional<MatrixView> matrix;
  LaneNames lanes;
  std::vector<std::string> notes;  // shown at the top, e.g. "partial: recorded before schema 5"
};

//! The self-contained page (no network access; docs/report.md). Pure, no
//! I/O. Throws ios::Error naming the field on an inconsistent input: a stage
//! naming a node outside the graph or the input, an operator in no stage or
//! in two, a block out of range, op_alone_ms of the wrong size, a transfer's
//! device out of range, a matrix whose cells do not match its settings.
std::string RenderHtml(const ReportInput& input);

//! The input as compact JSON (NaN written as null). with_graph = false
//! leaves the graph out (the DB stores it beside, in the schedule JSON).
std::string ToJson(const ReportInput& input, bool with_graph = true);

//! Reads ToJson's output. `where` names the source in errors, which also
//! name the field ("report.json: schedules[1].stages[3].latency_ms: expected
//! a number or null"). Unknown fields are ignored; a missing graph leaves
//! `graph` empty.
ReportInput FromJson(std::string_view text, const std::string& where);

}  // namespace ios::report
