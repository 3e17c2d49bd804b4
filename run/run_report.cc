#include "run/run_report.h"

#include <cmath>
#include <ctime>
#include <fstream>

#include "common/error.h"
#include "coordinator/report_input.h"

namespace ios::run {
namespace {

std::string NowUtc() {
  const std::time_t t = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buffer;
}

}  // namespace

report::ReportInput ReportOfRun(const RunReportInputs& in) {
  report::ReportInput input;
  input.tool = "ios-run";
  input.version = IOS_FARM_VERSION;
  input.generated_at = NowUtc();
  input.model = in.model;
  input.device = in.device;
  input.batch = in.batch;
  input.graph = in.graph;
  input.op_alone_ms.assign(in.graph.nodes.size(), report::kNoFigure);

  const std::vector<int> block_of = coordinator::BlockOfNodes(in.graph);
  report::ScheduleRow row;
  row.name = in.schedule.name;
  row.returned = true;
  row.peak_bytes = in.peak_bytes;
  const Prediction* p = in.prediction;
  const bool priced = p != nullptr && p->stage_ms.size() == in.schedule.stages.size();
  for (size_t k = 0; k < in.schedule.stages.size(); ++k) {
    report::StageRow stage = coordinator::StageRowOf(in.schedule.stages[k], block_of);
    if (priced && std::isfinite(p->stage_ms[k])) {
      stage.latency_ms = p->stage_ms[k];
      stage.source = p->stage_measured[k] ? report::Source::kMeasuredNow : report::Source::kStored;
      // A stage of one operator alone prices that operator alone.
      if (stage.groups.size() == 1 && stage.groups[0].size() == 1) {
        input.op_alone_ms[static_cast<size_t>(stage.groups[0][0])] = stage.latency_ms;
      }
    } else if (priced) {
      stage.error = "no price: its measurement failed";
    }
    row.stages.push_back(std::move(stage));
  }
  if (priced) row.predicted_ms = p->latency_ms;
  report::EndToEnd measured;
  measured.median_ms = in.timing.protocol.median_ms;
  measured.spread_ms = in.timing.protocol.spread_ms;
  measured.samples = in.timing.repeats;
  measured.how = "ios-run, " + std::to_string(in.timing.repeats) + " runs (" + in.how + ")";
  measured.measured_at = static_cast<int64_t>(std::time(nullptr));
  row.measured = measured;
  input.schedules.push_back(std::move(row));

  if (p == nullptr) {
    input.notes.push_back(
        "--no-predict: the stages are not priced, so the timeline shows their order only");
  } else if (p->search_run) {
    input.notes.push_back("the search's own end-to-end figure of this schedule: " +
                          SearchRunText(*p->search_run));
  }
  coordinator::NameLanes(input);
  return input;
}

void WriteReportFile(const std::string& path, const report::ReportInput& input) {
  const std::string page = report::RenderHtml(input);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << page;
  if (!out) throw Error("--report " + path + ": cannot write the report");
}

}  // namespace ios::run
