#include "db/measurement_import.h"

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/stage_key.h"
#include "db/stage_text.h"

namespace ios::db {
namespace {

using json = nlohmann::json;

struct Row {
  DeviceInfo device;
  std::string stage_key, description, settings;
  int batch_size = 1;
  MeasureResult result;
};

class RowReader {
 public:
  RowReader(const json& row, const std::string& where) : row_(row), where_(where) {}

  std::string Text(const char* field, bool nullable = false) const {
    const json& value = Field(field);
    if (nullable && value.is_null()) return "";
    if (!value.is_string()) Fail(field, nullable ? "a string or null" : "a string");
    return value.get<std::string>();
  }
  double Number(const char* field, bool nullable) const {
    const json& value = Field(field);
    if (nullable && value.is_null()) return 0;
    if (!value.is_number()) Fail(field, nullable ? "a number or null" : "a number");
    return value.get<double>();
  }
  int64_t Whole(const char* field, int64_t least) const {
    const json& value = Field(field);
    if (!value.is_number_integer() || value.get<int64_t>() < least) {
      Fail(field, "a whole number of at least " + std::to_string(least));
    }
    return value.get<int64_t>();
  }
  bool Flag(const char* field) const {
    const json& value = Field(field);
    if (!value.is_boolean()) Fail(field, "true or false");
    return value.get<bool>();
  }
  [[noreturn]] void Fail(const char* field, const std::string& expected) const {
    throw Error(where_ + ": field '" + field + "': expected " + expected);
  }

 private:
  const json& Field(const char* field) const {
    const auto it = row_.find(field);
    if (it == row_.end()) Fail(field, "to be present (export with ios-db --format json export)");
    return *it;
  }
  const json& row_;
  std::string where_;
};

MeasureError ParseStatus(const RowReader& reader, const std::string& status) {
  if (status == "ok") return MeasureError::kNone;
  for (MeasureError error : {MeasureError::kOutOfMemory, MeasureError::kUnsupported,
                             MeasureError::kBackendFailure, MeasureError::kTimeout}) {
    if (status == ToString(error)) return error;
  }
  reader.Fail("status",
              "ok, out_of_memory, unsupported, backend_failure or timeout, not '" + status + "'");
}

// The header `ios-db export` writes first in CSV: its first column, then
// the stage key among the others.
bool LooksLikeCsvExport(const std::string& text) {
  const std::string_view first_line = std::string_view(text).substr(0, text.find('\n'));
  return first_line.starts_with("device,") &&
         first_line.find(",stage_key") != std::string_view::npos;
}

// A key that does not parse, or is not in canonical form, can never match a
// stage a search asks for: refused rather than stored as dead weight.
void CheckStageKey(const RowReader& reader, const std::string& key) {
  std::string problem;
  try {
    if (ParseStageKey(key).Key() != key) problem = "it parses but is not in canonical form";
  } catch (const Error& e) {
    problem = e.what();
  }
  if (!problem.empty()) reader.Fail("stage_key", "a canonical stage key (" + problem + ")");
}

std::vector<Row> ParseRows(const std::string& text, const std::string& source) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& e) {
    if (LooksLikeCsvExport(text)) {
      throw Error(source +
                  ": this looks like a CSV export; import takes the JSON export (ios-db --format "
                  "json export -o FILE.json)");
    }
    throw Error(source + ": not JSON (" + e.what() + ")");
  }
  if (!document.is_array()) {
    throw Error(source + ": expected a JSON array of measurements (ios-db --format json export)");
  }
  std::vector<Row> rows;
  rows.reserve(document.size());
  for (size_t i = 0; i < document.size(); ++i) {
    const std::string where = source + ": row " + std::to_string(i + 1);
    if (!document[i].is_object()) throw Error(where + ": expected an object");
    const RowReader reader(document[i], where);
    Row& row = rows.emplace_back();
    row.device.name = reader.Text("device");
    row.device.fingerprint = reader.Text("device_fingerprint");
    row.device.backend = reader.Text("backend");
    row.device.simulated = reader.Flag("simulated");
    row.stage_key = reader.Text("stage_key");
    row.description = reader.Text("stage");
    row.settings = reader.Text("settings");
    row.batch_size = static_cast<int>(reader.Whole("batch_size", 1));
    row.result.error = ParseStatus(reader, reader.Text("status"));
    const bool ok = row.result.ok();
    row.result.median_ms = reader.Number("median_ms", !ok);
    row.result.spread_ms = reader.Number("spread_ms", !ok);
    row.result.samples = static_cast<int>(reader.Whole("samples", 0));
    row.result.error_message = reader.Text("error_message", true);
    // Exports of schema 2 have no detail.
    if (document[i].contains("detail")) row.result.detail = reader.Text("detail", true);
    CheckStageKey(reader, row.stage_key);
    if (row.device.fingerprint.empty()) reader.Fail("device_fingerprint", "a fingerprint");
    if (ok && !(row.result.median_ms >= 0)) reader.Fail("median_ms", "a latency >= 0");
  }
  return rows;
}

//! The fingerprint rows must have: `device` itself, or that of the device
//! of that name this DB knows.
std::string ReceivingFingerprint(ProfileStore& store, const std::string& device) {
  std::string found;
  for (const DeviceRow& row : store.Devices()) {
    if (row.fingerprint == device) return device;
    if (row.name == device) {
      if (!found.empty() && found != row.fingerprint) {
        throw Error("import: several devices are named '" + device +
                    "' here; give the fingerprint (ios-db devices --format json)");
      }
      found = row.fingerprint;
    }
  }
  if (found.empty() && device.find('|') == std::string::npos) {
    throw Error("import: no device named '" + device +
                "' in this DB; give the fingerprint your searches use (ios-db devices, or the "
                "worker's log)");
  }
  return found.empty() ? device : found;
}

}  // namespace

ImportReport ImportMeasurements(ProfileStore& store, const std::string& text,
                                const std::string& source, const ImportRequest& request) {
  if (!request.force && (request.device.empty() || request.settings.empty())) {
    throw Error(
        "import: say which measurements this DB's searches use, --device and --settings, or "
        "take every row as it is with --force");
  }
  const std::vector<Row> rows = ParseRows(text, source);
  const std::string fingerprint =
      request.device.empty() ? "" : ReceivingFingerprint(store, request.device);
  ImportReport report;
  report.rows = static_cast<int64_t>(rows.size());
  store.RunInTransaction([&] {
    for (const Row& row : rows) {
      if (!request.force && row.device.fingerprint != fingerprint) {
        ++report.refused["device fingerprint differs (" + row.device.name + ")"];
        continue;
      }
      if (!request.force && row.settings != request.settings) {
        ++report.refused["settings differ (" + row.settings + ")"];
        continue;
      }
      const MeasurementKey key{row.stage_key, row.device.fingerprint, row.batch_size, row.settings};
      if (store.Lookup(key)) {
        ++report.present;
        continue;
      }
      store.UpsertDevice(row.device);
      // A description the key implies is not stored (it is derived on read).
      store.UpsertStage(row.stage_key,
                        row.description == DescribeStageKey(row.stage_key) ? "" : row.description);
      store.Store(key, row.result);
      ++report.imported;
    }
  });
  return report;
}

}  // namespace ios::db
