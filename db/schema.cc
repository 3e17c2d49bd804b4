#include "db/schema.h"

#include <string>
#include <string_view>

#include "common/stage_key_hash.h"
#include "db/sqlite_util.h"
#include "db/stage_text.h"

namespace ios::db {
namespace {

// Version 2 (docs/profiling-db.md): a stage row is its key's hash (the row
// id, with a second hash to check it) and its key and description deflated
// (db/stage_text.h) instead of a ~1 KB key text, its unique index and a
// description; settings keys and model names are stored once each;
// measurements and model links are clustered on their keys (WITHOUT ROWID)
// instead of carrying a row id and a second index.
constexpr const char* kDevicesTable = R"sql(
CREATE TABLE devices(
  id          INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  backend     TEXT NOT NULL,
  name        TEXT NOT NULL,
  simulated   INTEGER NOT NULL CHECK (simulated IN (0, 1)),
  first_seen  TEXT NOT NULL
);
)sql";

constexpr const char* kSearchesTable = R"sql(
CREATE TABLE searches(
  id                 INTEGER PRIMARY KEY,
  model              TEXT NOT NULL,
  device_fingerprint TEXT NOT NULL,
  batch_size         INTEGER NOT NULL,
  settings_json      TEXT NOT NULL,
  schedule_json      TEXT NOT NULL,
  latency_ms         REAL NOT NULL,
  stages_measured    INTEGER NOT NULL,
  stages_reused      INTEGER NOT NULL,
  enumerate_s        REAL NOT NULL,
  measure_s          REAL NOT NULL,
  solve_s            REAL NOT NULL,
  started_at         TEXT NOT NULL
);
)sql";

// The tables version 2 adds or replaces, each named with `suffix` (the
// migration builds them beside the version 1 tables, then renames them).
std::string StageTablesV2(const std::string& suffix) {
  return "CREATE TABLE stages" + suffix + R"sql((
  id        INTEGER PRIMARY KEY,  -- HashStageKey(key).id
  key_check INTEGER NOT NULL,     -- HashStageKey(key).check
  text      BLOB NOT NULL         -- PackStageText(key, description)
);
CREATE TABLE settings(
  id           INTEGER PRIMARY KEY,
  settings_key TEXT NOT NULL UNIQUE
);
CREATE TABLE measurements)sql" +
         suffix + R"sql((
  stage_id      INTEGER NOT NULL REFERENCES stages(id),
  device_id     INTEGER NOT NULL REFERENCES devices(id),
  batch_size    INTEGER NOT NULL,
  settings_id   INTEGER NOT NULL REFERENCES settings(id),
  median_ms     REAL NOT NULL,
  spread_ms     REAL NOT NULL,
  samples       INTEGER NOT NULL,
  error         TEXT,
  error_message TEXT NOT NULL DEFAULT '',
  measured_at   INTEGER NOT NULL,  -- Unix time, seconds
  PRIMARY KEY (stage_id, device_id, batch_size, settings_id)
) WITHOUT ROWID;
CREATE TABLE models(
  id   INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
);
CREATE TABLE model_stages)sql" +
         suffix + R"sql((
  model_id INTEGER NOT NULL REFERENCES models(id),
  stage_id INTEGER NOT NULL REFERENCES stages(id),
  PRIMARY KEY (model_id, stage_id)
) WITHOUT ROWID;
)sql";
}

// Version 1 to 2, in place, inside the caller's transaction, with foreign
// key enforcement off. Every measurement, model link, device and search is
// kept; a hash collision between two stored keys fails the primary key and
// with it the whole migration (nothing changes).
constexpr const char* kMigrateV1ToV2 = R"sql(
INSERT INTO stages_v2(id, key_check, text)
  SELECT ios_stage_id(stage_key), ios_stage_check(stage_key),
         ios_pack_stage(stage_key, description) FROM stages;
INSERT INTO settings(settings_key) SELECT DISTINCT settings_key FROM measurements;
INSERT INTO measurements_v2
  SELECT ios_stage_id(s.stage_key), m.device_id, m.batch_size, st.id, m.median_ms, m.spread_ms,
         m.samples, m.error, m.error_message,
         COALESCE(CAST(strftime('%s', m.measured_at) AS INTEGER), 0)
  FROM measurements m JOIN stages s ON s.id = m.stage_id
  JOIN settings st ON st.settings_key = m.settings_key;
INSERT INTO models(name) SELECT DISTINCT model FROM model_stages;
INSERT INTO model_stages_v2
  SELECT mo.id, ios_stage_id(s.stage_key)
  FROM model_stages ms JOIN stages s ON s.id = ms.stage_id JOIN models mo ON mo.name = ms.model;
DROP TABLE model_stages;
DROP TABLE measurements;
DROP TABLE stages;
ALTER TABLE stages_v2 RENAME TO stages;
ALTER TABLE measurements_v2 RENAME TO measurements;
ALTER TABLE model_stages_v2 RENAME TO model_stages;
)sql";

// SQL functions over stage keys (db/stage_text.h), for the migration and
// for listing keys and descriptions: ios_stage_id(key), ios_stage_check(key),
// ios_pack_stage(key, description), ios_stage_key(text),
// ios_stage_description(text).
std::string_view TextArgument(sqlite3_value* value) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(value));
  return text == nullptr ? std::string_view()
                         : std::string_view(text, static_cast<size_t>(sqlite3_value_bytes(value)));
}

void StageIdFunction(sqlite3_context* context, int, sqlite3_value** argv) {
  sqlite3_result_int64(context, HashStageKey(TextArgument(argv[0])).id);
}

void StageCheckFunction(sqlite3_context* context, int, sqlite3_value** argv) {
  sqlite3_result_int64(context, HashStageKey(TextArgument(argv[0])).check);
}

void PackStageFunction(sqlite3_context* context, int, sqlite3_value** argv) {
  try {
    const std::string packed =
        PackStageText({std::string(TextArgument(argv[0])), std::string(TextArgument(argv[1]))});
    sqlite3_result_blob(context, packed.data(), static_cast<int>(packed.size()), SQLITE_TRANSIENT);
  } catch (const std::exception& e) {
    sqlite3_result_error(context, e.what(), -1);
  }
}

template <bool kKey>
void UnpackStageFunction(sqlite3_context* context, int, sqlite3_value** argv) {
  try {
    const auto* bytes = static_cast<const char*>(sqlite3_value_blob(argv[0]));
    const StageText text = UnpackStageText(std::string_view(
        bytes == nullptr ? "" : bytes, static_cast<size_t>(sqlite3_value_bytes(argv[0]))));
    const std::string& out = kKey ? text.key : text.description;
    sqlite3_result_text(context, out.data(), static_cast<int>(out.size()), SQLITE_TRANSIENT);
  } catch (const std::exception& e) {
    sqlite3_result_error(context, e.what(), -1);
  }
}

}  // namespace

void RegisterStageFunctions(sqlite3* db) {
  constexpr int kFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
  struct Function {
    const char* name;
    int arguments;
    void (*body)(sqlite3_context*, int, sqlite3_value**);
  };
  for (const Function& f : {Function{"ios_stage_id", 1, StageIdFunction},
                            Function{"ios_stage_check", 1, StageCheckFunction},
                            Function{"ios_pack_stage", 2, PackStageFunction},
                            Function{"ios_stage_key", 1, UnpackStageFunction<true>},
                            Function{"ios_stage_description", 1, UnpackStageFunction<false>}}) {
    IOS_SQLITE_CHECK(db, sqlite3_create_function_v2(db, f.name, f.arguments, kFlags, nullptr,
                                                    f.body, nullptr, nullptr, nullptr));
  }
}

// Version 3 adds what the backend chose to run a stage (cuda: convolution
// algorithms) to each measurement; older rows have none.
constexpr const char* kMigrateV2ToV3 =
    "ALTER TABLE measurements ADD COLUMN detail TEXT NOT NULL DEFAULT ''";

// Version 4 names each settings row's StageProtocol (ProtocolOfSettingsKey).
// Every row before it was measured isolated, and its key says so (no
// "-executed-" suffix), so a search measuring as executed never reads it.
// It also keeps the end-to-end figures of the schedules a search verified
// (or ios-coordinator --evaluate priced): few rows, so device and settings
// are stored as text. The network is identified by the hash of its
// NetworkKey, like a stage.
constexpr const char* kMigrateV3ToV4 = R"sql(
ALTER TABLE settings ADD COLUMN protocol TEXT NOT NULL DEFAULT 'isolated';
CREATE TABLE network_runs(
  network_id         INTEGER NOT NULL,  -- HashStageKey(NetworkKey).id
  network_check      INTEGER NOT NULL,  -- HashStageKey(NetworkKey).check
  device_fingerprint TEXT NOT NULL,
  batch_size         INTEGER NOT NULL,
  settings_key       TEXT NOT NULL,
  model              TEXT NOT NULL,
  schedule           TEXT NOT NULL,
  stages             INTEGER NOT NULL,
  predicted_ms       REAL,              -- NULL: not priced by a DP table
  median_ms          REAL NOT NULL,
  spread_ms          REAL NOT NULL,
  samples            INTEGER NOT NULL,
  error              TEXT,              -- NULL for a good figure
  error_message      TEXT NOT NULL,
  detail             TEXT NOT NULL,
  measured_at        INTEGER NOT NULL,  -- unix seconds
  PRIMARY KEY (network_id, device_fingerprint, batch_size, settings_key)
) WITHOUT ROWID;
)sql";

// Version 5 keeps what a search's HTML report shows beyond the returned
// schedule (baselines, alternatives, per-part DP sizes, skipped stages,
// warnings): report::ToJson of its ReportInput without the graph (the
// schedule JSON beside it carries that), packed by PackLongText. Older rows
// have NULL: their reports are partial (ios-db report says what is missing).
constexpr const char* kMigrateV4ToV5 = "ALTER TABLE searches ADD COLUMN report BLOB";

void CreateSchema(sqlite3* db) {
  sqlite::Exec(db, kDevicesTable);
  sqlite::Exec(db, StageTablesV2("").c_str());
  sqlite::Exec(db, kSearchesTable);
  MigrateV2ToV3(db);
  MigrateV3ToV4(db);
  MigrateV4ToV5(db);
  sqlite::Exec(db, ("PRAGMA application_id = " + std::to_string(kApplicationId)).c_str());
}

void MigrateV1ToV2(sqlite3* db) {
  sqlite::Exec(db, StageTablesV2("_v2").c_str());
  sqlite::Exec(db, kMigrateV1ToV2);
}

void MigrateV2ToV3(sqlite3* db) { sqlite::Exec(db, kMigrateV2ToV3); }

void MigrateV3ToV4(sqlite3* db) { sqlite::Exec(db, kMigrateV3ToV4); }

void MigrateV4ToV5(sqlite3* db) { sqlite::Exec(db, kMigrateV4ToV5); }

}  // namespace ios::db
