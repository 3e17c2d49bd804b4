// Internal to db/: the profiling DB's schema (docs/profiling-db.md), the
// in-place migrations to it, and the SQL functions over stage keys that
// both use. ProfileStore (profile_store.cc) decides when to run them.
#pragma once

#include <sqlite3.h>

#include <cstdint>

namespace ios::db {

// "IOSF": marks a file as an ios-farm profiling DB (PRAGMA application_id).
inline constexpr int64_t kApplicationId = 0x494F5346;
inline constexpr int64_t kSchemaVersion = 5;

//! Registers ios_stage_id(key), ios_stage_check(key), ios_pack_stage(key,
//! description), ios_stage_key(text) and ios_stage_description(text) on
//! the connection (db/stage_text.h in SQL).
void RegisterStageFunctions(sqlite3* db);

//! The current schema in a blank file, and our application id. Runs inside
//! the caller's transaction.
void CreateSchema(sqlite3* db);

//! Version 1 to 2 in place, inside the caller's transaction, with foreign
//! key enforcement off (it drops and renames tables others refer to).
//! Throws when two stored keys collide: nothing changes then.
void MigrateV1ToV2(sqlite3* db);

//! Version 2 to 3 in place (measurements gain `detail`), inside the
//! caller's transaction.
void MigrateV2ToV3(sqlite3* db);

//! Version 3 to 4 in place, inside the caller's transaction: settings gain
//! `protocol` ('isolated' for every row so far), and network_runs keeps the
//! end-to-end figures of networks under schedules.
void MigrateV3ToV4(sqlite3* db);

//! Version 4 to 5 in place, inside the caller's transaction: searches gain
//! `report` (the search's report input, packed; NULL for older rows).
void MigrateV4ToV5(sqlite3* db);

}  // namespace ios::db
