// The specialization matrix (the IOS paper's Table 3): the schedule a
// search returns for each (batch size, device), run at every other one.
// Each search reuses the profiling DB and the cross pricing measures only
// what it lacks, so a second run over the same DB measures nothing.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/measurement.h"
#include "coordinator/measurer.h"
#include "coordinator/pricing.h"
#include "coordinator/search.h"
#include "db/profile_store.h"

namespace ios::coordinator {

//! One device the matrix covers, and its measurement settings (which
//! depend on the device's timing: DefaultMeasureSettings).
struct SpecializeDevice {
  std::string name;              // as the user gave it, e.g. "sim:v100" or "cpu,threads=1"
  Measurer* measurer = nullptr;  // serves `name`; not owned
  //! Stage settings before the weight warmth, which is decided here per
  //! batch size (DecideWeightWarmth: part of the settings' key).
  MeasureSettings settings;
  MeasureSettings verify_settings;  // end-to-end runs (DefaultVerifySettings)
};

//! A row (schedule optimised for) and a column (run at) of the matrix.
struct MatrixSetting {
  int batch = 1;
  std::string device;  // SpecializeDevice::name
  bool simulated = false;
};

enum class CellSource {
  kMeasuredNow,  // run end to end by this run
  kStored,       // end-to-end figure from the DB (network_runs)
  kPredicted,    // the DP's sum of stage latencies only (no end-to-end figure)
  kFailed,       // a stage or the run failed; no figure
};
const char* ToString(CellSource source);

struct MatrixCell {
  double predicted_ms = NAN;  // the DP's sum of the stages' latencies at the column's setting
  double measured_ms = NAN;   // end to end at the column's setting; NaN when none
  CellSource source = CellSource::kFailed;
  std::string error;  // why there is no end-to-end figure or no price, when so
};

//! A row's schedule at the setting it was optimised for: what a report
//! draws beside the matrix (ReportOfSpecialization), so that each
//! schedule's timeline shows the stages it was chosen for.
struct OwnSchedule {
  PricedSchedule priced;                // the diagonal cell's pricing
  std::optional<VerifiedSchedule> run;  // its end-to-end run there, when verified
};

struct SpecializationMatrix {
  std::string model;
  //! Rows and columns alike, in this order: per device, per batch size.
  std::vector<MatrixSetting> settings;
  //! The schedule each row's search returned ("ios", "greedy", ...).
  std::vector<std::string> returned;
  std::vector<std::vector<MatrixCell>> cells;  // [optimised for][run at]
  //! Over the whole run, searches and cross pricing together: a second run
  //! on the same DB measures 0 and 0.
  int64_t stages_measured = 0, runs_measured = 0;
  //! Per setting, its device as the farm describes it; per row, its
  //! schedule at its own setting. Filled by RunSpecialization for a
  //! report; the text, CSV and JSON need neither.
  std::vector<DeviceInfo> devices;
  std::vector<OwnSchedule> own;

  //! Whether `column` compares end-to-end figures: every priced cell of it
  //! has one. Otherwise it compares DP sums, so that a run that failed
  //! is never set against the others' measured figures.
  bool MeasuredColumn(size_t column) const;
  //! The figure compared in its column (measured or predicted, as the
  //! column does); NaN when there is none.
  double Figure(size_t row, size_t column) const;
  //! The row whose figure is the lowest in `column` (ties: the first), or
  //! -1 when the column has none.
  int BestRow(size_t column) const;
  //! Figure(row, column) over the best of its column, as the paper
  //! normalises (its Table 3 is the transpose: rows there are "run at");
  //! NaN when either is missing.
  double Normalised(size_t row, size_t column) const;
  bool AnySimulated() const;
};

struct SpecializeHooks {
  //! A line of progress ("search 2 of 4: batch 16 on sim:v100").
  std::function<void(const std::string&)> note;
  std::function<void(const MeasureProgress&)> progress;
  std::function<void(const PlanProgress&)> plan_progress;
  //! Each setting's search once it is done (the CLI records it in the
  //! DB's searches as a plain search is recorded).
  std::function<void(size_t setting, const SearchOutcome&)> searched;
};

//! The matrix over `batches` x `devices` (each device's batches together):
//! RunSearch for each setting with `base`'s search options, then every
//! returned schedule priced at every setting (PriceBlocks) and, with
//! base.verify.enabled, run end to end there (VerifySchedule: a stored
//! figure is reused). Throws ios::Error on empty or repeated settings, or
//! when a search finds no schedule.
SpecializationMatrix RunSpecialization(const Graph& graph, const std::string& model,
                                       const std::vector<int>& batches,
                                       const std::vector<SpecializeDevice>& devices,
                                       const SearchOptions& base, db::ProfileStore& store,
                                       const SpecializeHooks& hooks = {});

//! The matrix as text: ratios to the column's best with raw ms, the best of
//! each column marked, a banner when a device is simulated. `csv` and
//! `json` give one row per cell and one document (matrix_text.cc).
std::string FormatMatrixText(const SpecializationMatrix& matrix);
std::string FormatMatrixCsv(const SpecializationMatrix& matrix);
std::string FormatMatrixJson(const SpecializationMatrix& matrix);

}  // namespace ios::coordinator
