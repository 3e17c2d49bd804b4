// ios-run's HTML report (--report FILE.html, docs/report.md): the schedule
// it ran, its stages priced from the profiling DB (the prediction) and its
// own end-to-end timing beside them.
#pragma once

#include <cstdint>
#include <string>

#include "common/graph.h"
#include "common/measurement.h"
#include "report/report.h"
#include "run/network_run.h"
#include "run/run_prediction.h"

namespace ios::run {

struct RunReportInputs {
  const Graph& graph;
  std::string model;
  const NetworkSchedule& schedule;
  DeviceInfo device;
  int batch = 1;
  //! The DP's prices of the schedule's stages; null with --no-predict.
  const Prediction* prediction = nullptr;
  const Timing& timing;     // ios-run's figure: the replayed graph's or the streamed runs'
  std::string how;          // how it ran, e.g. "streams", "graph"
  int64_t peak_bytes = -1;  // the memory plan's live peak at the batch
};

//! One schedule (the one ran), each stage priced by the prediction (or
//! unpriced without one), ios-run's timing as its measured figure, and the
//! search's stored end-to-end figure as a note. tool, version and
//! generated_at are filled here.
report::ReportInput ReportOfRun(const RunReportInputs& in);

//! Renders `input` into `path`. Throws ios::Error naming the path when it
//! cannot be written.
void WriteReportFile(const std::string& path, const report::ReportInput& input);

}  // namespace ios::run
