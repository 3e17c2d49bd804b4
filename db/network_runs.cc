#include "db/network_runs.h"

#include <cmath>

#include "common/stage_key_hash.h"
#include "db/profile_statements.h"

namespace ios::db::detail {
namespace {

// The columns every read takes, in ReadResult's order from `median_ms`.
constexpr const char* kColumns =
    "model, schedule, stages, predicted_ms, device_fingerprint, batch_size, settings_key, "
    "median_ms, spread_ms, samples, error, error_message, detail, "
    "strftime('%Y-%m-%dT%H:%M:%SZ', measured_at, 'unixepoch')";

NetworkRunRow ReadRow(const sqlite::Cursor& cursor) {
  NetworkRunRow row;
  row.model = cursor.Text(0);
  row.schedule = cursor.Text(1);
  row.stages = static_cast<int>(cursor.Int(2));
  row.predicted_ms = cursor.IsNull(3) ? NAN : cursor.Real(3);
  row.key.device_fingerprint = cursor.Text(4);
  row.key.batch_size = static_cast<int>(cursor.Int(5));
  row.key.settings_key = cursor.Text(6);
  row.result = ReadResult(cursor, 7);
  row.measured_at = cursor.Text(13);
  return row;
}

}  // namespace

NetworkRunTable::NetworkRunTable(sqlite3* db)
    : db_(db),
      lookup_(db, (std::string("SELECT ") + kColumns +
                   " FROM network_runs WHERE network_id = ?1 AND network_check = ?2 "
                   "AND device_fingerprint = ?3 AND batch_size = ?4 AND settings_key = ?5")
                      .c_str()),
      store_(db,
             "INSERT INTO network_runs(network_id, network_check, device_fingerprint, batch_size, "
             "settings_key, model, schedule, stages, predicted_ms, median_ms, spread_ms, samples, "
             "error, error_message, detail, measured_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
             "?9, ?10, ?11, ?12, ?13, ?14, ?15, CAST(strftime('%s', 'now') AS INTEGER)) "
             "ON CONFLICT(network_id, device_fingerprint, batch_size, settings_key) DO UPDATE SET "
             "network_check = excluded.network_check, model = excluded.model, "
             "schedule = excluded.schedule, stages = excluded.stages, "
             "predicted_ms = excluded.predicted_ms, median_ms = excluded.median_ms, "
             "spread_ms = excluded.spread_ms, samples = excluded.samples, error = excluded.error, "
             "error_message = excluded.error_message, detail = excluded.detail, "
             "measured_at = excluded.measured_at"),
      list_(db, (std::string("SELECT ") + kColumns +
                 " FROM network_runs WHERE ?1 = '' OR model = ?1 "
                 "ORDER BY measured_at, model, device_fingerprint, batch_size, schedule")
                    .c_str()) {}

std::optional<NetworkRunRow> NetworkRunTable::Lookup(const NetworkRunKey& key) {
  const StageKeyHash hash = HashStageKey(key.network_key);
  sqlite::Cursor cursor(lookup_);
  cursor.BindInt(1, hash.id)
      .BindInt(2, hash.check)
      .BindText(3, key.device_fingerprint)
      .BindInt(4, key.batch_size)
      .BindText(5, key.settings_key);
  if (!cursor.Next()) return std::nullopt;
  NetworkRunRow row = ReadRow(cursor);
  row.key.network_key = key.network_key;
  return row;
}

void NetworkRunTable::Store(const NetworkRunRow& row) {
  const StageKeyHash hash = HashStageKey(row.key.network_key);
  sqlite::Cursor cursor(store_);
  cursor.BindInt(1, hash.id)
      .BindInt(2, hash.check)
      .BindText(3, row.key.device_fingerprint)
      .BindInt(4, row.key.batch_size)
      .BindText(5, row.key.settings_key)
      .BindText(6, row.model)
      .BindText(7, row.schedule)
      .BindInt(8, row.stages);
  if (std::isfinite(row.predicted_ms)) {
    cursor.BindReal(9, row.predicted_ms);
  } else {
    cursor.BindNull(9);
  }
  const MeasureResult& r = row.result;
  cursor.BindReal(10, r.median_ms).BindReal(11, r.spread_ms).BindInt(12, r.samples);
  if (r.ok()) {
    cursor.BindNull(13);
  } else {
    cursor.BindText(13, ToString(r.error));
  }
  cursor.BindText(14, r.error_message).BindText(15, r.detail).Run();
}

std::vector<NetworkRunRow> NetworkRunTable::List(const std::string& model) {
  std::vector<NetworkRunRow> rows;
  sqlite::Cursor cursor(list_);
  cursor.BindText(1, model);
  while (cursor.Next()) rows.push_back(ReadRow(cursor));
  return rows;
}

int64_t NetworkRunTable::Forget(const ForgetFilter& filter) {
  // Built per call like ForgetMeasurements' DELETE: the filters present
  // decide its shape, and forgetting is rare.
  std::string sql = "DELETE FROM network_runs WHERE " + ForgetConditions(filter);
  if (!filter.device.empty()) {
    // Figures keep the fingerprint as text; a name is one the devices
    // table knows.
    sql +=
        " AND (device_fingerprint = ?1001 OR device_fingerprint IN "
        "(SELECT fingerprint FROM devices WHERE name = ?1001))";
  }
  if (!filter.model.empty()) sql += " AND model = ?1002";
  sqlite::Statement statement(db_, sql.c_str());
  sqlite::Cursor cursor(statement);
  BindForgetFilter(cursor, filter);
  cursor.Run();
  return static_cast<int64_t>(sqlite3_changes64(db_));
}

}  // namespace ios::db::detail
