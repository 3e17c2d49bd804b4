#include "coordinator/specialize.h"

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "coordinator/pricing.h"
#include "coordinator/weight_warmth.h"

namespace ios::coordinator {
namespace {

std::string Describe(const MatrixSetting& s) {
  return "batch " + std::to_string(s.batch) + " on " + s.device;
}

// What one setting searches and prices with: the base options at its
// batch, its device's settings and the weight warmth for both.
SearchOptions OptionsFor(const Graph& graph, const SearchOptions& base, int batch,
                         const SpecializeDevice& device) {
  SearchOptions options = base;
  options.batch_size = batch;
  options.settings = device.settings;
  DecideWeightWarmth(graph, batch, device.measurer->Device(), options.settings);
  options.verify.settings = device.verify_settings;
  return options;
}

// The first failure of a priced schedule, for the cell's error.
std::string FirstFailure(const LatencyTable& table) {
  for (const auto& [id, failure] : table.failures) {
    return std::string(ToString(failure.error)) + ": " + failure.message;
  }
  return "a stage has no latency";
}

}  // namespace

const char* ToString(CellSource source) {
  switch (source) {
    case CellSource::kMeasuredNow:
      return "measured";
    case CellSource::kStored:
      return "db";
    case CellSource::kPredicted:
      return "predicted";
    case CellSource::kFailed:
      return "failed";
  }
  return "?";
}

bool SpecializationMatrix::MeasuredColumn(size_t column) const {
  bool any = false;
  for (const std::vector<MatrixCell>& row : cells) {
    const MatrixCell& cell = row.at(column);
    if (!std::isfinite(cell.predicted_ms)) continue;
    if (!std::isfinite(cell.measured_ms)) return false;
    any = true;
  }
  return any;
}

double SpecializationMatrix::Figure(size_t row, size_t column) const {
  const MatrixCell& cell = cells.at(row).at(column);
  const double ms = MeasuredColumn(column) ? cell.measured_ms : cell.predicted_ms;
  return std::isfinite(ms) ? ms : NAN;
}

int SpecializationMatrix::BestRow(size_t column) const {
  int best = -1;
  for (size_t row = 0; row < cells.size(); ++row) {
    const double ms = Figure(row, column);
    if (!std::isfinite(ms)) continue;
    if (best < 0 || ms < Figure(best, column)) best = static_cast<int>(row);
  }
  return best;
}

double SpecializationMatrix::Normalised(size_t row, size_t column) const {
  const int best = BestRow(column);
  if (best < 0) return NAN;
  return Figure(row, column) / Figure(best, column);
}

bool SpecializationMatrix::AnySimulated() const {
  for (const MatrixSetting& s : settings) {
    if (s.simulated) return true;
  }
  return false;
}

SpecializationMatrix RunSpecialization(const Graph& graph, const std::string& model,
                                       const std::vector<int>& batches,
                                       const std::vector<SpecializeDevice>& devices,
                                       const SearchOptions& base, db::ProfileStore& store,
                                       const SpecializeHooks& hooks) {
  if (batches.empty() || devices.empty()) {
    throw Error("specialize: no batch size or no device to compare");
  }
  // A repeated setting would be a row and column twice: say so instead.
  if (std::set<int>(batches.begin(), batches.end()).size() != batches.size()) {
    throw Error("specialize: a batch size is given twice");
  }
  std::set<std::string> names;
  for (const SpecializeDevice& d : devices) {
    if (d.measurer == nullptr) throw Error("specialize: device '" + d.name + "' has no measurer");
    if (!names.insert(d.name).second) {
      throw Error("specialize: device '" + d.name + "' is given twice");
    }
  }
  const auto note = [&hooks](const std::string& line) {
    if (hooks.note) hooks.note(line);
  };

  SpecializationMatrix matrix;
  matrix.model = model;
  std::vector<SearchOptions> options;  // per setting
  std::vector<const SpecializeDevice*> device_of;
  for (const SpecializeDevice& d : devices) {
    for (const int batch : batches) {
      matrix.settings.push_back({batch, d.name, d.measurer->Device().simulated});
      matrix.devices.push_back(d.measurer->Device());
      options.push_back(OptionsFor(graph, base, batch, d));
      device_of.push_back(&d);
    }
  }
  const size_t n = matrix.settings.size();

  // The schedule each setting is optimised for. On a warm DB a search
  // measures nothing: its stages and its verification's runs are stored.
  std::vector<Schedule> schedules;
  for (size_t i = 0; i < n; ++i) {
    note("search " + std::to_string(i + 1) + " of " + std::to_string(n) + ": " +
         Describe(matrix.settings[i]));
    const SearchOutcome outcome =
        RunSearch(graph, model, options[i], store, *device_of[i]->measurer, hooks.progress,
                  hooks.plan_progress);
    matrix.stages_measured += outcome.table.stats.measured;
    for (const VerifiedSchedule& c : outcome.verification.candidates) {
      if (!c.reused) ++matrix.runs_measured;
    }
    schedules.push_back(outcome.Returned());
    matrix.returned.push_back(outcome.ReturnedName());
    if (hooks.searched) hooks.searched(i, outcome);
  }

  // Every schedule at every setting, a column at a time (one device's
  // farm, one batch size's settings).
  matrix.cells.assign(n, std::vector<MatrixCell>(n));
  matrix.own.resize(n);
  for (size_t j = 0; j < n; ++j) {
    note("pricing " + std::to_string(n) + " schedules at " + Describe(matrix.settings[j]));
    Measurer& measurer = *device_of[j]->measurer;
    for (size_t i = 0; i < n; ++i) {
      MatrixCell& cell = matrix.cells[i][j];
      PricedSchedule priced = PriceBlocks(graph, BlockStagesOf(schedules[i]), options[j], store,
                                          measurer, hooks.progress);
      matrix.stages_measured += priced.table.stats.measured;
      std::optional<VerifiedSchedule> run;
      cell.predicted_ms = priced.schedule.latency_ms;
      if (!std::isfinite(cell.predicted_ms)) {
        cell.predicted_ms = NAN;
        cell.source = CellSource::kFailed;
        cell.error = FirstFailure(priced.table);
      } else {
        cell.source = CellSource::kPredicted;
      }
      if (cell.source == CellSource::kPredicted && options[j].verify.enabled) {
        // Keyed as the search keys its candidates: the diagonal's figure
        // is the one its search stored.
        run = VerifySchedule(graph, model, "optimised for " + Describe(matrix.settings[i]),
                             priced.schedule, options[j], measurer.Device(), store, measurer);
        if (!run->reused) ++matrix.runs_measured;
        if (run->measured.ok()) {
          cell.measured_ms = run->measured.median_ms;
          cell.source = run->reused ? CellSource::kStored : CellSource::kMeasuredNow;
        } else {
          cell.error =
              std::string(ToString(run->measured.error)) + ": " + run->measured.error_message;
        }
      }
      // The diagonal is each schedule where it was chosen: kept whole for
      // a report's timeline.
      if (i == j) matrix.own[i] = {std::move(priced), std::move(run)};
    }
  }
  return matrix;
}

}  // namespace ios::coordinator
