#include "coordinator/report_input.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "common/error.h"
#include "common/input_file.h"

namespace ios::coordinator {
namespace {

using report::kNoFigure;
using report::Source;

double Figure(double ms) { return std::isfinite(ms) ? ms : kNoFigure; }

// What a stage row says of every schedule: its operators, lanes, block and
// price; where the price came from is the caller's to say.
report::StageRow PricedStageRow(const ScheduledStage& s, size_t block) {
  report::StageRow row;
  row.strategy = s.stage.strategy;
  row.groups = s.stage.groups;
  row.block = static_cast<int>(block);
  row.latency_ms = Figure(s.latency_ms);
  return row;
}

// The stages of `schedule`, priced and sourced from the search's table.
std::vector<report::StageRow> StageRows(const Schedule& schedule, const SearchPlan& plan,
                                        const LatencyTable& table) {
  std::vector<report::StageRow> rows;
  for (size_t b = 0; b < schedule.blocks.size(); ++b) {
    for (const ScheduledStage& s : schedule.blocks[b]) {
      report::StageRow row = PricedStageRow(s, b);
      const size_t id = static_cast<size_t>(s.stage_id);
      if (s.stage_id >= 0 && id < plan.key_hashes.size()) {
        row.key_id = std::to_string(plan.key_hashes[id].id);
      }
      const auto failure = table.failures.find(s.stage_id);
      if (failure != table.failures.end()) {
        row.source = Source::kFailed;
        row.error = std::string(ToString(failure->second.error)) + ": " + failure->second.message;
      } else if (id < table.skipped.size() && table.skipped[id]) {
        row.source = Source::kSkipped;
      } else if (!std::isfinite(s.latency_ms)) {
        row.source = Source::kUnpriced;
      } else if (id < table.measured_now.size() && table.measured_now[id]) {
        row.source = Source::kMeasuredNow;
      } else {
        row.source = Source::kStored;
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

report::ScheduleRow RowOf(const std::string& name, const Schedule& schedule, const SearchPlan& plan,
                          const LatencyTable& table) {
  report::ScheduleRow row;
  row.name = name;
  row.stages = StageRows(schedule, plan, table);
  row.predicted_ms = Figure(schedule.latency_ms);
  row.peak_bytes = schedule.peak_bytes;
  return row;
}

// A stage holding one operator alone is that operator's latency alone.
void FillAlone(const std::vector<report::StageRow>& stages, std::vector<double>& alone) {
  for (const report::StageRow& s : stages) {
    if (s.groups.size() == 1 && s.groups[0].size() == 1 && std::isfinite(s.latency_ms)) {
      alone[static_cast<size_t>(s.groups[0][0])] = s.latency_ms;
    }
  }
}

report::ReportInput Header(const Graph& graph, const std::string& model, const DeviceInfo& device,
                           int batch) {
  report::ReportInput input;
  input.model = model;
  input.device = device;
  input.batch = batch;
  input.graph = graph;
  input.op_alone_ms.assign(graph.nodes.size(), kNoFigure);
  return input;
}

// The thread budget a cpu device measured with: its fingerprint's
// "|threads=N|" (devices/cpu/cpu_device.cc); 0 when it has none.
int FingerprintInt(const std::string& fingerprint, const std::string& field) {
  const std::string tag = "|" + field + "=";
  const size_t at = fingerprint.find(tag);
  if (at == std::string::npos) return 0;
  return std::atoi(fingerprint.c_str() + at + tag.size());
}

report::MultiDeviceView MultiViewOf(const Graph& graph, const MultiDeviceOutcome& multi) {
  const std::vector<int> block_of = BlockOfNodes(graph);
  report::MultiDeviceView view;
  const MultiDeviceSchedule& schedule = multi.schedule;
  const bool timed = multi.op_start_ms.size() == graph.nodes.size();
  for (size_t d = 0; d < schedule.stages.size(); ++d) {
    report::DeviceStages device;
    device.name = d < schedule.devices.size() ? schedule.devices[d] : "device";
    // Identical devices share a name: the index tells their rows apart.
    if (std::count(schedule.devices.begin(), schedule.devices.end(), device.name) != 1) {
      device.name += "#" + std::to_string(d);
    }
    for (const Stage& stage : schedule.stages[d]) {
      report::StageRow row = StageRowOf(stage, block_of);
      const size_t first = static_cast<size_t>(stage.groups.at(0).at(0));
      if (timed) {
        row.start_ms = Figure(multi.op_start_ms[first]);
        row.latency_ms = Figure(multi.op_finish_ms[first] - multi.op_start_ms[first]);
        // Priced through the DB and the farm like the search's stages.
        if (std::isfinite(row.latency_ms)) row.source = Source::kStored;
      }
      device.stages.push_back(std::move(row));
    }
    view.devices.push_back(std::move(device));
  }
  for (size_t t = 0; t < multi.transfers.size(); ++t) {
    const Transfer& transfer = multi.transfers[t];
    report::TransferRow row{transfer.producer, transfer.from, transfer.to,
                            transfer.bytes,    kNoFigure,     kNoFigure};
    if (timed && t < multi.transfer_link_ms.size()) {
      // A copy leaves when its producer's stage finishes.
      row.start_ms = Figure(multi.op_finish_ms[static_cast<size_t>(transfer.producer)]);
      row.finish_ms = Figure(row.start_ms + multi.transfer_link_ms[t]);
    }
    view.transfers.push_back(row);
  }
  view.predicted_ms = Figure(multi.predicted_ms);
  view.one_device_kept = multi.one_device_kept;
  return view;
}

// A baseline of `graph` priced from `store` alone, or nothing when a stage
// of it has no stored latency.
std::optional<report::ScheduleRow> StoredBaseline(const Graph& graph, const EvaluationFacts& facts,
                                                  db::ProfileStore& store, bool greedy) {
  StageKeyer keyer(graph);
  Schedule schedule;
  for (const Block& block : graph.blocks) {
    const std::vector<NodeId> ops = block.Operators();
    std::vector<ScheduledStage>& stages = schedule.blocks.emplace_back();
    for (Stage& stage : greedy ? GreedySchedule(graph, ops) : SequentialSchedule(ops)) {
      const std::optional<MeasureResult> stored = store.Lookup(
          {keyer.Key(stage), facts.device.fingerprint, facts.batch, facts.settings.Key()});
      if (!stored || !stored->ok()) return std::nullopt;
      schedule.latency_ms += stored->median_ms;
      stages.push_back({std::move(stage), -1, stored->median_ms});
    }
  }
  schedule.peak_bytes = SchedulePeakBytes(graph, schedule, facts.batch);
  report::ScheduleRow row;
  row.name = greedy ? "greedy" : "sequential";
  row.predicted_ms = schedule.latency_ms;
  row.peak_bytes = schedule.peak_bytes;
  for (size_t b = 0; b < schedule.blocks.size(); ++b) {
    for (const ScheduledStage& s : schedule.blocks[b]) {
      report::StageRow stage = PricedStageRow(s, b);
      stage.source = Source::kStored;
      row.stages.push_back(std::move(stage));
    }
  }
  return row;
}

}  // namespace

std::string ReportPathProblem(const std::string& path) {
  const std::string cannot = "cannot write the report there: ";
  if (path.empty() || path == "-") return cannot + "a file name is expected";
  const std::string problem = OutputFileProblem(path);
  return problem.empty() ? "" : cannot + problem;
}

std::vector<PartStageCounts> CountPartStages(const SearchOutcome& o) {
  std::vector<PartStageCounts> counts;
  std::vector<bool> seen(o.plan.stage_count(), false);
  for (const PartPlan& p : o.plan.parts) {
    const std::set<int> ids(p.stage_ids.begin(), p.stage_ids.end());
    PartStageCounts c;
    c.stages = static_cast<int64_t>(ids.size());
    for (int id : ids) {
      const size_t i = static_cast<size_t>(id);
      if (seen[i]) {
        ++c.earlier;
      } else if (o.table.measured_now[i]) {
        ++c.measured;
      } else if (i < o.table.skipped.size() && o.table.skipped[i]) {
        ++c.skipped;
      } else {
        ++c.stored;
      }
      seen[i] = true;
    }
    counts.push_back(c);
  }
  return counts;
}

std::vector<int> BlockOfNodes(const Graph& graph) {
  std::vector<int> block_of(graph.nodes.size(), -1);
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    for (NodeId v : graph.blocks[b].Operators())
      block_of[static_cast<size_t>(v)] = static_cast<int>(b);
  }
  return block_of;
}

report::StageRow StageRowOf(const Stage& stage, const std::vector<int>& block_of) {
  report::StageRow row;
  row.strategy = stage.strategy;
  row.groups = stage.groups;
  if (!stage.groups.empty() && !stage.groups[0].empty()) {
    const size_t first = static_cast<size_t>(stage.groups[0][0]);
    if (first < block_of.size()) row.block = std::max(0, block_of[first]);
  }
  return row;
}

int LanesOf(const report::StageRow& stage) {
  return stage.strategy == Strategy::kMerge ? 1 : static_cast<int>(stage.groups.size());
}

report::LaneNames LaneNamesFor(const DeviceInfo& device, const std::set<int>& lane_counts) {
  report::LaneNames names;
  names.kind = device.backend;
  const int threads = FingerprintInt(device.fingerprint, "threads");
  const int cores = FingerprintInt(device.fingerprint, "cores");
  for (int lanes : lane_counts) {
    std::vector<std::string>& labels = names.by_count[lanes];
    for (int l = 0; l < lanes; ++l) {
      const std::string n = std::to_string(l);
      if (device.backend == "cuda") {
        // cuda_compile.cc: one lane runs on the main stream, lane l of
        // several on stream l + 1.
        labels.push_back(lanes == 1 ? "stream 0 (main)" : "stream " + std::to_string(l + 1));
      } else if (device.backend == "sim") {
        labels.push_back("modelled stream " + n);
      } else if (device.backend == "cpu" && threads > 0) {
        // SplitCores: floor(T/L) threads a lane, one more for the first
        // T % L; one thread each when L > T; pinned to its own cores when
        // there are several lanes and the budget fits on the cores.
        if (lanes == 1) {
          labels.push_back("caller's thread, " + std::to_string(threads) +
                           (threads == 1 ? " thread" : " threads"));
          continue;
        }
        const int share = lanes > threads ? 1 : threads / lanes + (l < threads % lanes ? 1 : 0);
        const bool pinned = lanes <= threads && threads <= cores;
        labels.push_back("lane " + n + ": " + std::to_string(share) +
                         (share == 1 ? " thread" : " threads") +
                         (pinned ? ", own cores" : ", cores shared"));
      } else if (device.backend == "cpu") {
        labels.push_back("lane " + n + " (own thread)");
      } else {
        labels.push_back("lane " + n);
      }
    }
  }
  return names;
}

void NameLanes(report::ReportInput& input) {
  std::set<int> counts;
  for (const report::ScheduleRow& s : input.schedules) {
    for (const report::StageRow& stage : s.stages) counts.insert(LanesOf(stage));
  }
  if (input.multi) {
    for (const report::DeviceStages& d : input.multi->devices) {
      for (const report::StageRow& stage : d.stages) counts.insert(LanesOf(stage));
    }
  }
  input.lanes = LaneNamesFor(input.device, counts);
}

report::EndToEnd EndToEndOf(const VerifiedSchedule& run) {
  report::EndToEnd e;
  const MeasureResult& m = run.measured;
  e.samples = m.samples;
  e.from_db = run.reused;
  e.how = run.reused ? "verification, from the DB" : "verification";
  if (m.ok()) {
    e.median_ms = m.median_ms;
    e.spread_ms = m.spread_ms;
  } else {
    e.error = std::string(ToString(m.error)) + ": " + m.error_message;
  }
  return e;
}

report::ReportInput ReportOfSearch(const Graph& graph, const SearchOutcome& outcome,
                                   const DeviceInfo& device, const MultiDeviceOutcome* multi) {
  report::ReportInput input = Header(graph, outcome.model, device, outcome.options.batch_size);
  const SearchPlan& plan = outcome.plan;
  const LatencyTable& table = outcome.table;
  const Verification& verification = outcome.verification;
  const std::string returned = outcome.ReturnedName();
  std::set<std::string> named;
  auto add = [&](const std::string& name, const Schedule& schedule) {
    if (std::isnan(schedule.latency_ms) || !named.insert(name).second) return;
    report::ScheduleRow row = RowOf(name, schedule, plan, table);
    row.returned = name == returned;
    for (const VerifiedSchedule& c : verification.candidates) {
      if (c.name == name) row.measured = EndToEndOf(c);
    }
    input.schedules.push_back(std::move(row));
  };
  add(returned, outcome.Returned());
  add("ios", outcome.ios);
  add("sequential", outcome.sequential);
  add("greedy", outcome.greedy);
  for (const VerifiedSchedule& c : verification.candidates) add(c.name, c.schedule);
  for (const report::ScheduleRow& s : input.schedules) {
    if (s.name == "sequential") FillAlone(s.stages, input.op_alone_ms);
  }

  report::SearchFacts facts;
  std::set<std::tuple<int, int, int>> used;  // block, part, piece in the IOS schedule
  for (const PartSummary& p : outcome.ios.parts) used.emplace(p.block, p.part, p.piece);
  const std::vector<PartStageCounts> counts = CountPartStages(outcome);
  for (size_t i = 0; i < plan.parts.size(); ++i) {
    const PartPlan& p = plan.parts[i];
    report::PartRow row;
    row.block = p.block;
    row.part = p.part;
    row.piece = p.piece;
    row.operators = p.space.operator_count();
    row.width = p.space.width();
    row.dp = ToString(p.schedule);
    row.unused = !outcome.ios.parts.empty() && !used.count({p.block, p.part, p.piece});
    row.states = p.space.state_count();
    row.transitions = p.space.transition_count();
    row.schedules = p.space.schedule_count();
    row.stages = counts[i].stages;
    row.measured = counts[i].measured;
    row.stored = counts[i].stored;
    row.earlier = counts[i].earlier;
    row.skipped = counts[i].skipped;
    facts.parts.push_back(row);
  }
  facts.warnings = plan.warnings;
  facts.distinct_stages = static_cast<int64_t>(plan.stage_count());
  facts.stage_occurrences = plan.stage_occurrences;
  const MeasureProgress& stats = table.stats;
  facts.measured = stats.measured;
  facts.reused = stats.reused;
  facts.failed = stats.failed;
  facts.skipped = std::count(table.skipped.begin(), table.skipped.end(), true);
  facts.lazy_rounds = stats.rounds;
  facts.bound_violations = stats.bound_violations;
  facts.parts_measured_in_full = stats.parts_measured_in_full;
  facts.enumerate_s = outcome.enumerate_s;
  facts.measure_s = outcome.measure_s;
  facts.solve_s = outcome.solve_s;
  facts.verify_s = outcome.verify_s;
  facts.passes_run = verification.passes_run;
  facts.passes_planned = verification.passes_planned;
  facts.measure_mode = ToString(outcome.options.measure);
  facts.settings_key = outcome.options.settings.Key();
  input.search = std::move(facts);
  if (!verification.unverified_reason.empty()) {
    input.notes.push_back("not verified end to end: " + verification.unverified_reason);
  }

  if (multi != nullptr) {
    input.multi = MultiViewOf(graph, *multi);
    input.notes.push_back(
        "multi-device: stage times are HIOS's predictions (hios::Evaluate) from stages priced "
        "through the profiling DB and the farm, copies from the link model");
  }
  NameLanes(input);
  return input;
}

report::ReportInput ReportOfEvaluation(const Graph& graph, const EvaluationFacts& facts,
                                       db::ProfileStore& store) {
  report::ReportInput input = Header(graph, graph.name, facts.device, facts.batch);
  report::ScheduleRow row = RowOf(facts.name, facts.priced, facts.plan, facts.table);
  row.returned = true;
  if (facts.run != nullptr) {
    row.measured = EndToEndOf(*facts.run);
    row.measured->how = facts.run->reused ? "--evaluate, from the DB" : "--evaluate";
  }
  input.schedules.push_back(std::move(row));
  std::string shown, missing;
  for (const bool greedy : {false, true}) {
    const char* name = greedy ? "greedy" : "sequential";
    if (const auto baseline = StoredBaseline(graph, facts, store, greedy)) {
      input.schedules.push_back(*baseline);
      shown += shown.empty() ? name : std::string(" and ") + name;
    } else {
      missing += missing.empty() ? name : std::string(" and ") + name;
    }
  }
  for (const report::ScheduleRow& s : input.schedules) FillAlone(s.stages, input.op_alone_ms);
  if (!shown.empty()) input.notes.push_back(shown + ": priced from the profiling DB alone");
  if (!missing.empty()) {
    input.notes.push_back(missing +
                          ": not shown, the profiling DB lacks some of their stages for this "
                          "device, batch and settings (a search of the model measures them)");
  }
  NameLanes(input);
  return input;
}

namespace {

std::string SettingName(const MatrixSetting& s) {
  return "batch " + std::to_string(s.batch) + " on " + s.device;
}

// The matrix as the heat map draws it. report::Normalised takes a cell's
// measured figure where it has one; a column that compares DP sums (a run
// of it failed) keeps its cells' measured figures out, so the page ranks
// as the text does.
report::MatrixView MatrixViewOf(const SpecializationMatrix& m) {
  const size_t n = m.settings.size();
  report::MatrixView view;
  for (const MatrixSetting& s : m.settings)
    view.settings.push_back({s.batch, s.device, s.simulated});
  view.cells.assign(n, std::vector<report::MatrixCell>(n));
  for (size_t j = 0; j < n; ++j) {
    const bool measured = m.MeasuredColumn(j);
    for (size_t i = 0; i < n; ++i) {
      const MatrixCell& cell = m.cells[i][j];
      report::MatrixCell& shown = view.cells[i][j];
      shown.predicted_ms = Figure(cell.predicted_ms);
      shown.source = ToString(cell.source);
      if (measured) {
        shown.measured_ms = Figure(cell.measured_ms);
      } else if (std::isfinite(cell.measured_ms)) {
        char ms[64];
        std::snprintf(ms, sizeof ms, "%.3f", cell.measured_ms);
        shown.source += std::string(", measured ") + ms +
                        " ms, not compared: a run of this column failed, it compares DP sums";
      }
      if (!cell.error.empty()) shown.source += ": " + cell.error;
    }
  }
  view.stages_measured = m.stages_measured;
  view.runs_measured = m.runs_measured;
  return view;
}

// "a, b and c": each distinct entry once, in order.
std::string ListOf(const std::vector<std::string>& entries) {
  std::vector<std::string> distinct;
  for (const std::string& e : entries) {
    if (std::find(distinct.begin(), distinct.end(), e) == distinct.end()) distinct.push_back(e);
  }
  std::string text;
  for (size_t i = 0; i < distinct.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == distinct.size() ? " and " : ", ") + distinct[i];
  }
  return text;
}

}  // namespace

report::ReportInput ReportOfSpecialization(const Graph& graph, const SpecializationMatrix& m,
                                           const SearchOutcome* first) {
  const size_t n = m.settings.size();
  bool square = m.cells.size() == n;
  for (const std::vector<MatrixCell>& row : m.cells) square = square && row.size() == n;
  if (n == 0 || m.own.size() != n || m.devices.size() != n || !square) {
    throw Error("specialization report of " + m.model + ": " + std::to_string(n) +
                " settings, but " + std::to_string(m.own.size()) + " schedules, " +
                std::to_string(m.devices.size()) +
                " devices and cells not one per row and column (RunSpecialization fills them)");
  }
  report::ReportInput input = Header(graph, m.model, m.devices[0], m.settings[0].batch);
  std::vector<std::string> batches, devices, described;
  for (size_t i = 0; i < n; ++i) {
    batches.push_back(std::to_string(m.settings[i].batch));
    devices.push_back(m.settings[i].device);
    // The farm's name only where it says more than the one given.
    const std::string& name = m.devices[i].name;
    described.push_back(m.settings[i].device + " (" +
                        (name != m.settings[i].device ? name + ", " : "") +
                        (m.settings[i].simulated ? "simulated" : "measured") + ")");
  }
  input.title =
      m.model + ": specialization over batch " + ListOf(batches) + " on " + ListOf(devices);
  // The banner names the first device; the note below names them all.
  input.device.simulated = m.AnySimulated();

  for (size_t i = 0; i < n; ++i) {
    const OwnSchedule& own = m.own[i];
    const int batch = m.settings[i].batch;
    report::ScheduleRow row = RowOf("optimised for " + SettingName(m.settings[i]),
                                    own.priced.schedule, own.priced.plan, own.priced.table);
    if (row.peak_bytes < 0) row.peak_bytes = SchedulePeakBytes(graph, own.priced.schedule, batch);
    row.returned = i == 0;
    if (own.run) {
      row.measured = EndToEndOf(*own.run);
      row.measured->how =
          own.run->reused ? "at its own setting, from the DB" : "at its own setting";
    }
    input.schedules.push_back(std::move(row));
  }
  if (first != nullptr) {
    FillAlone(RowOf("sequential", first->sequential, first->plan, first->table).stages,
              input.op_alone_ms);
  }
  input.matrix = MatrixViewOf(m);

  input.notes.push_back(
      "specialization matrix: rows = the schedule optimised for a (batch, device) setting, "
      "columns = the setting it runs at; each cell normalised to the best of its column (1.00 = "
      "the best there). The IOS paper's Table 3 is the transpose.");
  input.notes.push_back("devices: " + ListOf(described) + ".");
  input.notes.push_back(
      "each schedule is drawn priced at the setting it was optimised for; the "
      "header's device and batch are the first setting's" +
      std::string(first != nullptr ? ", and so are the operators' latencies alone" : "") + ".");
  std::string returned;
  for (size_t i = 0; i < n && i < m.returned.size(); ++i) {
    returned += (i == 0 ? "" : "; ") + SettingName(m.settings[i]) + ": " + m.returned[i];
  }
  if (!returned.empty()) {
    input.notes.push_back(
        "what each search returned (verification's fastest, else the IOS optimum): " + returned +
        ".");
  }
  NameLanes(input);
  return input;
}

}  // namespace ios::coordinator
