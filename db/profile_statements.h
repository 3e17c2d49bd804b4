// Private to db/profile_store.cc: every SQL statement the profiling store
// runs (prepared once per connection) and how stored rows read back.
#pragma once

#include <sqlite3.h>

#include <string>
#include <vector>

#include "common/measurement.h"
#include "db/profile_store.h"
#include "db/sqlite_util.h"

namespace ios::db::detail {

using sqlite::Statement;

struct Statements {
  explicit Statements(sqlite3* db);
  //! The listing of measurements, narrowed by `filter` (joins and WHERE).
  static std::string MeasurementsSql(const std::string& filter);

  Statement upsert_device, upsert_stage, insert_stage_if_missing, stage_check, upsert_model,
      model_id, link_model_stage, model_stage_checks, device_id, upsert_settings, settings_id,
      lookup, slice, store, record_search, devices, stats, searches, models, all_measurements,
      model_measurements;
};

//! The conditions every forgetting DELETE shares (tables with an `error`
//! column): good and/or failed rows, failures narrowed by kind (parameters
//! ?1..?k). The caller adds its own device (?1001) and model (?1002)
//! conditions; BindForgetFilter binds all of them.
std::string ForgetConditions(const ForgetFilter& filter);
void BindForgetFilter(sqlite::Cursor& cursor, const ForgetFilter& filter);

//! Reads columns [first, first + 6) laid out as median, spread, samples,
//! error, error_message, detail.
MeasureResult ReadResult(const sqlite::Cursor& cursor, int first);

//! Every recorded search, oldest first.
std::vector<SearchRecord> ReadSearches(Statements& statements);
//! The measurements of the stages `model` uses (empty: all).
std::vector<MeasurementRow> ReadMeasurements(Statements& statements, const std::string& model);

}  // namespace ios::db::detail
