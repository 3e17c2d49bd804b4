// ios-run's prediction of a schedule's latency from the profiling DB, and
// the end-to-end figure a search stored for it (kept apart from run_main.cc,
// which reports them).
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/measurement.h"
#include "common/stage.h"
#include "db/profile_store.h"

namespace ios::run {

struct PredictionInputs {
  const Graph& graph;
  const std::vector<Stage>& stages;
  std::string db;      // the profiling DB's path (created if missing)
  std::string device;  // a device name of devices::LinkedRegistry()
  int batch = 1;
  //! The search's settings, from a schedule file; absent: the device's
  //! defaults with weight warmth decided here.
  std::optional<MeasureSettings> settings;
};

struct Prediction {
  double latency_ms = NAN;
  int64_t measured = 0, reused = 0, failed = 0;
  bool simulated = false;
  //! Per stage of PredictionInputs::stages: its price (NaN: none; the
  //! report draws each stage by it) and whether this call measured it.
  std::vector<double> stage_ms;
  std::vector<bool> stage_measured;
  //! The search's own end-to-end figure of this schedule, when its
  //! verification (or ios-coordinator --evaluate) stored one.
  std::optional<db::NetworkRunRow> search_run;
};

//! The DP's price of the schedule: the sum of its stages' latencies in the
//! DB for this device, batch and settings, measuring the stages it lacks;
//! and the figure the search stored for the whole network, if any.
Prediction Predict(const PredictionInputs& inputs);

//! "12.345 ms (stored 2026-01-02T03:04:05Z as greedy: spread 0.5 ms, 10
//! runs, w2-n1-r10-...)", or the stored failure.
std::string SearchRunText(const db::NetworkRunRow& run);
//! The same as JSON (null without a figure).
nlohmann::json SearchRunJson(const std::optional<db::NetworkRunRow>& run);

}  // namespace ios::run
