#include "db/query_listings.h"

#include <cmath>
#include <map>
#include <vector>

#include "common/measurement.h"

namespace ios::db {
namespace {

const Column kSimulatedColumn{"simulated", true, "simulated", "no"};

// "ok", or the stored error's name (out_of_memory, timeout, ...).
std::string StatusText(const MeasureResult& result) {
  return result.ok() ? "ok" : ToString(result.error);
}

// Settings and schedules are stored as JSON text: nest them in JSON output
// when they parse, keep the text otherwise.
json JsonOrText(const std::string& text, Format format) {
  if (format != Format::kJson) return text;
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? json(text) : parsed;
}

// A failed measurement has no latency: shown as null / "-", never as 0.
json OkOrNull(const MeasureResult& result, double value) {
  return result.ok() ? json(value) : json(nullptr);
}

}  // namespace

Listing DevicesListing(ProfileStore& store) {
  Listing listing;
  listing.columns = {{"name"}, {"backend"}, kSimulatedColumn, {"measurements"}, {"fingerprint"}};
  for (const DeviceRow& device : store.Devices()) {
    listing.rows.push_back(
        {device.name, device.backend, device.simulated, device.measurements, device.fingerprint});
  }
  return listing;
}

Listing StatsListing(ProfileStore& store) {
  const Stats stats = store.GetStats();
  int64_t simulated_devices = 0;
  for (const DeviceRow& device : store.Devices()) simulated_devices += device.simulated;
  Listing listing;
  listing.vertical_table = true;
  // End-to-end figures are few (a handful per search): counted by listing.
  const size_t network_runs = store.NetworkRuns("").size();
  listing.columns = {{"devices"},      {"simulated_devices"},   {"stages"},
                     {"measurements"}, {"failed_measurements"}, {"searches"},
                     {"models"},       {"network_runs"}};
  listing.rows.push_back({stats.devices, simulated_devices, stats.stages, stats.measurements,
                          stats.failed_measurements, stats.searches, stats.models, network_runs});
  return listing;
}

Listing SearchesListing(ProfileStore& store, Format format) {
  std::map<std::string, DeviceRow> devices;
  for (DeviceRow& device : store.Devices()) devices[device.fingerprint] = device;
  Listing listing;
  listing.columns = {{"id"},
                     {"started_at"},
                     {"model"},
                     {"device"},
                     kSimulatedColumn,
                     {"batch_size"},
                     {"latency_ms"},
                     {"stages_measured"},
                     {"stages_reused"},
                     {"enumerate_s"},
                     {"measure_s"},
                     {"solve_s"},
                     {"device_fingerprint", false},
                     {"settings", false},
                     {"schedule", false},
                     // What `ios-db report` can show of it: searches recorded
                     // before schema 5 keep no report input.
                     {"report", true, "full", "partial"}};
  for (const SearchRecord& search : store.Searches()) {
    const auto device = devices.find(search.device_fingerprint);
    const bool known = device != devices.end();
    listing.rows.push_back({search.id, search.started_at, search.model,
                            known ? device->second.name : search.device_fingerprint,
                            known && device->second.simulated, search.batch_size, search.latency_ms,
                            search.stages_measured, search.stages_reused, search.enumerate_s,
                            search.measure_s, search.solve_s, search.device_fingerprint,
                            JsonOrText(search.settings_json, format),
                            JsonOrText(search.schedule_json, format), !search.report_json.empty()});
  }
  return listing;
}

Listing RunsListing(ProfileStore& store, const std::string& model) {
  std::map<std::string, DeviceRow> devices;
  for (DeviceRow& device : store.Devices()) devices[device.fingerprint] = device;
  Listing listing;
  listing.columns = {{"measured_at"},
                     {"model"},
                     {"schedule"},
                     {"device"},
                     kSimulatedColumn,
                     {"batch_size"},
                     {"settings"},
                     {"stages"},
                     {"predicted_ms"},
                     {"median_ms"},
                     {"spread_ms"},
                     {"samples"},
                     {"meas_pred"},
                     {"status"},
                     {"error_message"},
                     {"detail", false},
                     {"device_fingerprint", false}};
  const std::vector<NetworkRunRow> runs = store.NetworkRuns(model);
  for (const NetworkRunRow& run : runs) {
    const auto device = devices.find(run.key.device_fingerprint);
    const bool known = device != devices.end();
    const MeasureResult& result = run.result;
    // Unpriced (a stage failed) or unmeasured: null, never 0 or a NaN.
    const bool priced = std::isfinite(run.predicted_ms) && run.predicted_ms > 0;
    const json predicted = std::isfinite(run.predicted_ms) ? json(run.predicted_ms) : json(nullptr);
    listing.rows.push_back(
        {run.measured_at, run.model, run.schedule,
         known ? device->second.name : run.key.device_fingerprint,
         known && device->second.simulated, run.key.batch_size, run.key.settings_key, run.stages,
         predicted, OkOrNull(result, result.median_ms), OkOrNull(result, result.spread_ms),
         result.samples, result.ok() && priced ? json(result.median_ms / run.predicted_ms) : json(),
         StatusText(result),
         result.error_message.empty() ? json(nullptr) : json(result.error_message),
         result.detail.empty() ? json(nullptr) : json(result.detail), run.key.device_fingerprint});
  }
  return listing;
}

Listing MeasurementsListing(ProfileStore& store, const std::string& model,
                            const std::string& device, size_t limit, size_t* total) {
  std::map<std::string, bool> simulated;  // by fingerprint
  for (const DeviceRow& row : store.Devices()) simulated[row.fingerprint] = row.simulated;
  std::vector<MeasurementRow> rows = store.Measurements(model);
  if (!device.empty()) {
    std::erase_if(rows, [&](const MeasurementRow& row) {
      return row.device_name != device && row.device_fingerprint != device;
    });
  }
  *total = rows.size();
  if (limit > 0 && rows.size() > limit) rows.resize(limit);

  Listing listing;
  listing.columns = {{"device"},
                     kSimulatedColumn,
                     {"batch_size"},
                     {"settings"},
                     {"protocol"},
                     {"median_ms"},
                     {"spread_ms"},
                     {"samples"},
                     {"status"},
                     {"error_message"},
                     {"stage"},
                     {"measured_at"},
                     {"detail", false},
                     {"stage_key", false},
                     {"device_fingerprint", false},
                     {"backend", false}};
  for (const MeasurementRow& row : rows) {
    const MeasureResult& result = row.result;
    listing.rows.push_back(
        {row.device_name, simulated[row.device_fingerprint], row.batch_size, row.settings_key,
         row.protocol, OkOrNull(result, result.median_ms), OkOrNull(result, result.spread_ms),
         result.samples, StatusText(result),
         result.error_message.empty() ? json(nullptr) : json(result.error_message),
         row.stage_description, row.measured_at,
         result.detail.empty() ? json(nullptr) : json(result.detail), row.stage_key,
         row.device_fingerprint, row.device_backend});
  }
  return listing;
}

}  // namespace ios::db
