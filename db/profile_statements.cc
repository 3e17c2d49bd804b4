#include "db/profile_statements.h"

#include <cctype>
#include <string>
#include <string_view>

#include "common/error.h"
#include "db/stage_text.h"

namespace ios::db::detail {
namespace {

// measurements.error holds ToString(error) for a failed measurement and NULL
// for a good one. This is its inverse; tolerant of case, spaces and dashes.
// Unknown text (e.g. written by a newer build) still reads as a failure.
MeasureError ErrorFromText(std::string_view text) {
  std::string normalized;
  for (char c : text) {
    if (c == ' ' || c == '-') c = '_';
    normalized += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (MeasureError error : {MeasureError::kOutOfMemory, MeasureError::kUnsupported,
                             MeasureError::kBackendFailure, MeasureError::kTimeout}) {
    if (normalized == ToString(error)) return error;
  }
  return MeasureError::kBackendFailure;
}

}  // namespace

Statements::Statements(sqlite3* db)
    : upsert_device(db,
                    "INSERT INTO devices(fingerprint, backend, name, simulated, first_seen) "
                    "VALUES(?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%SZ', 'now')) "
                    "ON CONFLICT(fingerprint) DO UPDATE SET backend = excluded.backend, "
                    "name = excluded.name, simulated = excluded.simulated"),
      // A stage's text is replaced only when its check matches (the same
      // key): a colliding key must not overwrite another stage.
      upsert_stage(db,
                   "INSERT INTO stages(id, key_check, text) VALUES(?1, ?2, ?3) "
                   "ON CONFLICT(id) DO UPDATE SET text = excluded.text "
                   "WHERE key_check = excluded.key_check AND text <> excluded.text"),
      insert_stage_if_missing(db,
                              "INSERT INTO stages(id, key_check, text) VALUES(?1, ?2, ?3) "
                              "ON CONFLICT(id) DO NOTHING"),
      stage_check(db, "SELECT key_check FROM stages WHERE id = ?1"),
      upsert_model(db, "INSERT INTO models(name) VALUES(?1) ON CONFLICT(name) DO NOTHING"),
      model_id(db, "SELECT id FROM models WHERE name = ?1"),
      link_model_stage(db,
                       "INSERT INTO model_stages(model_id, stage_id) VALUES(?1, ?2) "
                       "ON CONFLICT(model_id, stage_id) DO NOTHING"),
      model_stage_checks(db,
                         "SELECT ms.stage_id, s.key_check FROM model_stages ms "
                         "JOIN stages s ON s.id = ms.stage_id WHERE ms.model_id = ?1"),
      device_id(db, "SELECT id FROM devices WHERE fingerprint = ?1"),
      upsert_settings(db,
                      "INSERT INTO settings(settings_key, protocol) VALUES(?1, ?2) "
                      "ON CONFLICT(settings_key) DO NOTHING"),
      settings_id(db, "SELECT id FROM settings WHERE settings_key = ?1"),
      lookup(db,
             "SELECT m.median_ms, m.spread_ms, m.samples, m.error, m.error_message, m.detail "
             "FROM measurements m JOIN stages s ON s.id = m.stage_id "
             "WHERE m.stage_id = ?1 AND s.key_check = ?2 "
             "AND m.device_id = (SELECT id FROM devices WHERE fingerprint = ?3) "
             "AND m.batch_size = ?4 "
             "AND m.settings_id = (SELECT id FROM settings WHERE settings_key = ?5)"),
      slice(db,
            "SELECT m.stage_id, s.key_check, m.median_ms, m.spread_ms, m.samples, m.error, "
            "m.error_message, m.detail FROM measurements m JOIN stages s ON s.id = m.stage_id "
            "WHERE m.device_id = (SELECT id FROM devices WHERE fingerprint = ?1) "
            "AND m.batch_size = ?2 "
            "AND m.settings_id = (SELECT id FROM settings WHERE settings_key = ?3)"),
      store(db,
            "INSERT INTO measurements(stage_id, device_id, batch_size, settings_id, "
            "median_ms, spread_ms, samples, error, error_message, detail, measured_at) "
            "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
            "CAST(strftime('%s', 'now') AS INTEGER)) "
            "ON CONFLICT(stage_id, device_id, batch_size, settings_id) DO UPDATE SET "
            "median_ms = excluded.median_ms, spread_ms = excluded.spread_ms, "
            "samples = excluded.samples, error = excluded.error, "
            "error_message = excluded.error_message, detail = excluded.detail, "
            "measured_at = excluded.measured_at"),
      record_search(db,
                    "INSERT INTO searches(model, device_fingerprint, batch_size, "
                    "settings_json, schedule_json, latency_ms, stages_measured, "
                    "stages_reused, enumerate_s, measure_s, solve_s, started_at, report) "
                    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
                    "COALESCE(NULLIF(?12, ''), strftime('%Y-%m-%dT%H:%M:%SZ', 'now')), ?13)"),
      devices(db,
              "SELECT d.fingerprint, d.backend, d.name, d.simulated, "
              "(SELECT count(*) FROM measurements m WHERE m.device_id = d.id) "
              "FROM devices d ORDER BY d.id"),
      stats(db,
            "SELECT (SELECT count(*) FROM devices), (SELECT count(*) FROM stages), "
            "(SELECT count(*) FROM measurements), "
            "(SELECT count(*) FROM measurements WHERE error IS NOT NULL), "
            "(SELECT count(*) FROM searches), "
            "(SELECT count(*) FROM (SELECT name FROM models "
            "UNION SELECT model FROM searches))"),
      searches(db,
               "SELECT model, device_fingerprint, settings_json, schedule_json, batch_size, "
               "latency_ms, stages_measured, stages_reused, enumerate_s, measure_s, solve_s, "
               "started_at, id, report FROM searches ORDER BY id"),
      models(db, "SELECT name FROM models UNION SELECT model FROM searches ORDER BY 1"),
      all_measurements(db, MeasurementsSql("").c_str()),
      model_measurements(db, MeasurementsSql("JOIN model_stages ms ON ms.stage_id = m.stage_id "
                                             "JOIN models mo ON mo.id = ms.model_id "
                                             "WHERE mo.name = ?1 ")
                                 .c_str()) {}

std::string Statements::MeasurementsSql(const std::string& filter) {
  return "SELECT ios_stage_key(s.text) AS stage_key, ios_stage_description(s.text), d.name, "
         "m.batch_size, st.settings_key, m.median_ms, m.spread_ms, m.samples, m.error, "
         "m.error_message, m.detail, strftime('%Y-%m-%dT%H:%M:%SZ', m.measured_at, 'unixepoch'), "
         "d.fingerprint, d.backend, st.protocol FROM measurements m "
         "JOIN stages s ON s.id = m.stage_id "
         "JOIN devices d ON d.id = m.device_id "
         "JOIN settings st ON st.id = m.settings_id " +
         filter + "ORDER BY d.name, d.id, stage_key, m.batch_size, st.settings_key";
}

MeasureResult ReadResult(const sqlite::Cursor& cursor, int first) {
  MeasureResult result;
  result.median_ms = cursor.Real(first);
  result.spread_ms = cursor.Real(first + 1);
  result.samples = static_cast<int>(cursor.Int(first + 2));
  if (!cursor.IsNull(first + 3)) result.error = ErrorFromText(cursor.Text(first + 3));
  result.error_message = cursor.Text(first + 4);
  result.detail = cursor.Text(first + 5);
  return result;
}

std::vector<SearchRecord> ReadSearches(Statements& statements) {
  std::vector<SearchRecord> rows;
  sqlite::Cursor cursor(statements.searches);
  while (cursor.Next()) {
    SearchRecord& row = rows.emplace_back();
    row.model = cursor.Text(0);
    row.device_fingerprint = cursor.Text(1);
    row.settings_json = cursor.Text(2);
    row.schedule_json = cursor.Text(3);
    row.batch_size = static_cast<int>(cursor.Int(4));
    row.latency_ms = cursor.Real(5);
    row.stages_measured = cursor.Int(6);
    row.stages_reused = cursor.Int(7);
    row.enumerate_s = cursor.Real(8);
    row.measure_s = cursor.Real(9);
    row.solve_s = cursor.Real(10);
    row.started_at = cursor.Text(11);
    row.id = cursor.Int(12);
    if (!cursor.IsNull(13)) {
      try {
        row.report_json = UnpackLongText(cursor.Blob(13));
      } catch (const Error& e) {
        throw Error("search " + std::to_string(row.id) + ": its stored report: " + e.what());
      }
    }
  }
  return rows;
}

std::vector<MeasurementRow> ReadMeasurements(Statements& statements, const std::string& model) {
  std::vector<MeasurementRow> rows;
  Statement& statement =
      model.empty() ? statements.all_measurements : statements.model_measurements;
  sqlite::Cursor cursor(statement);
  if (!model.empty()) cursor.BindText(1, model);
  while (cursor.Next()) {
    MeasurementRow& row = rows.emplace_back();
    row.stage_key = cursor.Text(0);
    row.stage_description = cursor.Text(1);
    row.device_name = cursor.Text(2);
    row.batch_size = static_cast<int>(cursor.Int(3));
    row.settings_key = cursor.Text(4);
    row.result = ReadResult(cursor, 5);
    row.measured_at = cursor.Text(11);
    row.device_fingerprint = cursor.Text(12);
    row.device_backend = cursor.Text(13);
    row.protocol = cursor.Text(14);
  }
  return rows;
}

std::string ForgetConditions(const ForgetFilter& filter) {
  std::string sql = filter.failures && filter.successes ? "1"
                    : filter.failures                   ? "error IS NOT NULL"
                                                        : "error IS NULL";
  if (!filter.kinds.empty()) {
    sql += " AND error IN (";
    for (size_t i = 0; i < filter.kinds.size(); ++i) sql += i == 0 ? "?" : ", ?";
    sql += ")";
  }
  return sql;
}

void BindForgetFilter(sqlite::Cursor& cursor, const ForgetFilter& filter) {
  for (size_t i = 0; i < filter.kinds.size(); ++i) {
    cursor.BindText(static_cast<int>(i) + 1, ToString(filter.kinds[i]));
  }
  if (!filter.device.empty()) cursor.BindText(1001, filter.device);
  if (!filter.model.empty()) cursor.BindText(1002, filter.model);
}

}  // namespace ios::db::detail
