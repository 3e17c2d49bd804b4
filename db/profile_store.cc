#include "db/profile_store.h"

#include <cctype>
#include <climits>
#include <filesystem>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "common/error.h"
#include "common/input_file.h"
#include "db/network_runs.h"
#include "db/profile_statements.h"
#include "db/schema.h"
#include "db/sqlite_util.h"
#include "db/stage_text.h"

namespace ios::db {
namespace {

using detail::ReadResult;
using detail::Statements;
using sqlite::Cursor;
using sqlite::Statement;

// Keys can be long; error messages quote a prefix.
std::string Abbreviate(const std::string& text, size_t limit = 120) {
  return text.size() <= limit ? text : text.substr(0, limit) + "...";
}

int64_t QueryInt(sqlite3* db, const char* sql) {
  Statement statement(db, sql);
  Cursor cursor(statement);
  return cursor.Next() ? cursor.Int(0) : 0;
}

class SqliteProfileStore final : public ProfileStore {
 public:
  SqliteProfileStore(const std::string& path, const OpenOptions& options)
      : path_(path), options_(options) {
    try {
      const int flags = options.mode == OpenMode::kReadOnly ? SQLITE_OPEN_READONLY
                        : options.mode == OpenMode::kReadWrite
                            ? SQLITE_OPEN_READWRITE
                            : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      db_ = options.mode == OpenMode::kReadOnly ? sqlite::OpenDbForReading(path)
                                                : sqlite::OpenDb(path, flags);
      IOS_SQLITE_CHECK(db(), sqlite3_extended_result_codes(db(), 1));
      // SQLite's own busy handler waits for most locks; RetryWhileBusy
      // covers the calls it returns from at once. Both stop at the budget.
      const auto budget_ms = std::min<int64_t>(options.busy_budget.count(), INT_MAX);
      IOS_SQLITE_CHECK(db(), sqlite3_busy_timeout(db(), static_cast<int>(budget_ms)));
      RegisterStageFunctions(db());
      if (options.mode != OpenMode::kReadOnly && sqlite3_db_readonly(db(), "main") == 1) {
        throw Error("cannot open profiling DB " + path + " for writing: the file is read-only");
      }
      PrepareSchema();
      statements_ = std::make_unique<Statements>(db());
      network_runs_ = std::make_unique<detail::NetworkRunTable>(db());
    } catch (const sqlite::SqliteError& e) {
      if (e.primary_code() == SQLITE_NOTADB) {
        throw Error(path + " is not an ios-farm profiling DB: not an SQLite database");
      }
      if (e.busy()) throw Error(BusyMessage("opening it", e));
      throw Error("cannot open profiling DB " + path + ": " + e.what());
    }
  }

  void UpsertDevice(const DeviceInfo& device) override {
    Waiting("registering a device", [&] {
      Cursor cursor(statements_->upsert_device);
      cursor.BindText(1, device.fingerprint)
          .BindText(2, device.backend)
          .BindText(3, device.name)
          .BindInt(4, device.simulated ? 1 : 0)
          .Run();
    });
  }

  void UpsertStage(const std::string& stage_key, const std::string& description) override {
    const StageKeyHash hash = HashStageKey(stage_key);
    const std::string text = PackStageText({stage_key, description});
    Waiting("registering a stage", [&] {
      {
        Cursor cursor(statements_->upsert_stage);
        cursor.BindInt(1, hash.id).BindInt(2, hash.check).BindBlob(3, text).Run();
      }
      CheckStage(stage_key, hash, /*must_exist=*/true);
    });
  }

  void LinkModelStages(const std::string& model, std::span<const StageKeyHash> stages,
                       const std::function<std::string(size_t i)>& key_of) override {
    RunInTransaction([&] {
      {
        Cursor cursor(statements_->upsert_model);
        cursor.BindText(1, model).Run();
      }
      Cursor id(statements_->model_id);
      id.BindText(1, model);
      if (!id.Next()) throw Error("profiling DB " + path_ + ": model '" + model + "' vanished");
      const int64_t model_id = id.Int(0);
      // A rerun links what is linked already: one read of the model's links
      // (with their stages' checks) instead of two statements per stage.
      std::unordered_map<int64_t, int64_t> linked;  // stage id -> key check
      {
        Cursor cursor(statements_->model_stage_checks);
        cursor.BindInt(1, model_id);
        while (cursor.Next()) linked.emplace(cursor.Int(0), cursor.Int(1));
      }
      for (size_t i = 0; i < stages.size(); ++i) {
        const StageKeyHash& hash = stages[i];
        const auto it = linked.find(hash.id);
        if (it != linked.end() && it->second == hash.check) continue;
        EnsureStage(hash, [&] { return key_of(i); });
        Cursor cursor(statements_->link_model_stage);
        cursor.BindInt(1, model_id).BindInt(2, hash.id).Run();
      }
    });
  }

  std::optional<MeasureResult> Lookup(const MeasurementKey& key) override {
    const StageKeyHash hash = HashStageKey(key.stage_key);
    return Waiting("looking a measurement up", [&]() -> std::optional<MeasureResult> {
      Cursor cursor(statements_->lookup);
      cursor.BindInt(1, hash.id)
          .BindInt(2, hash.check)
          .BindText(3, key.device_fingerprint)
          .BindInt(4, key.batch_size)
          .BindText(5, key.settings_key);
      if (!cursor.Next()) return std::nullopt;
      return ReadResult(cursor, 0);
    });
  }

  void ForEachMeasurement(
      const std::string& device_fingerprint, int batch_size, const std::string& settings_key,
      const std::function<void(const StageKeyHash& stage, const MeasureResult& result)>& visit)
      override {
    Waiting("reading the measurements of a device", [&] {
      Cursor cursor(statements_->slice);
      cursor.BindText(1, device_fingerprint).BindInt(2, batch_size).BindText(3, settings_key);
      while (cursor.Next()) visit({cursor.Int(0), cursor.Int(1)}, ReadResult(cursor, 2));
    });
  }

  void StoreMeasurements(const std::string& device_fingerprint, int batch_size,
                         const std::string& settings_key,
                         std::span<const StageMeasurement> measurements,
                         const std::function<std::string(size_t i)>& key_of) override {
    RunInTransaction([&] {
      const int64_t device_id = DeviceId(device_fingerprint);
      const int64_t settings_id = SettingsId(settings_key);
      for (size_t i = 0; i < measurements.size(); ++i) {
        const StageKeyHash& hash = measurements[i].stage;
        EnsureStage(hash, [&] { return key_of(i); });
        InsertMeasurement(hash, device_id, batch_size, settings_id, measurements[i].result);
      }
    });
  }

  void Store(const MeasurementKey& key, const MeasureResult& result) override {
    const StageKeyHash hash = HashStageKey(key.stage_key);
    // Outside a transaction the look-ups and the insert are separate
    // statements: a stage or device cannot disappear in between, since
    // nothing deletes them.
    Waiting("storing a measurement", [&] {
      if (!CheckStage(key.stage_key, hash, /*must_exist=*/false)) {
        throw Error("cannot store a measurement for unknown stage '" + Abbreviate(key.stage_key) +
                    "' in " + path_ + ": call UpsertStage first");
      }
      InsertMeasurement(hash, DeviceId(key.device_fingerprint), key.batch_size,
                        SettingsId(key.settings_key), result);
    });
  }

  int64_t DeviceId(const std::string& fingerprint) {
    Cursor device(statements_->device_id);
    device.BindText(1, fingerprint);
    if (!device.Next()) {
      throw Error("cannot store a measurement for unknown device '" + Abbreviate(fingerprint) +
                  "' in " + path_ + ": call UpsertDevice first");
    }
    return device.Int(0);
  }

  void InsertMeasurement(const StageKeyHash& hash, int64_t device_id, int batch_size,
                         int64_t settings_id, const MeasureResult& result) {
    Cursor cursor(statements_->store);
    cursor.BindInt(1, hash.id)
        .BindInt(2, device_id)
        .BindInt(3, batch_size)
        .BindInt(4, settings_id)
        .BindReal(5, result.median_ms)
        .BindReal(6, result.spread_ms)
        .BindInt(7, result.samples)
        .BindText(9, result.error_message)
        .BindText(10, result.detail);
    if (result.ok()) {
      cursor.BindNull(8);
    } else {
      cursor.BindText(8, ToString(result.error));
    }
    cursor.Run();  // autocommit, or the caller's RunInTransaction
  }

  void RunInTransaction(const std::function<void()>& body) override {
    // IMMEDIATE takes the write lock up front (waiting up to the busy
    // budget) instead of failing later when a read turns into a write.
    Transact("BEGIN IMMEDIATE", body);
  }

  void RunInReadTransaction(const std::function<void()>& body) override {
    // DEFERRED: a read snapshot only, so a long look-up of a big search
    // never holds other coordinators' commits back.
    Transact("BEGIN DEFERRED", body);
  }

  int64_t ForgetMeasurements(const ForgetFilter& filter) override {
    CheckForgetFilter(filter, "measurements");
    std::string sql = "DELETE FROM measurements WHERE " + detail::ForgetConditions(filter);
    if (!filter.device.empty()) {
      sql += " AND device_id IN (SELECT id FROM devices WHERE name = ?1001 OR fingerprint = ?1001)";
    }
    if (!filter.model.empty()) {
      sql +=
          " AND stage_id IN (SELECT ms.stage_id FROM model_stages ms JOIN models mo "
          "ON mo.id = ms.model_id WHERE mo.name = ?1002)";
    }
    return Waiting("forgetting measurements", [&] {
      Statement statement(db(), sql.c_str());
      Cursor cursor(statement);
      detail::BindForgetFilter(cursor, filter);
      cursor.Run();
      return static_cast<int64_t>(sqlite3_changes64(db()));
    });
  }

 private:
  // Gives the stage of `hash` a row if it has none, without a description
  // (its key packed only then, from key(): deflating every key of a rerun
  // costs seconds); throws when another key holds its hash.
  void EnsureStage(const StageKeyHash& hash, const std::function<std::string()>& key) {
    const StageRow row = FindStage(hash);
    if (row == StageRow::kCollides) throw Collision(key(), hash);
    if (row == StageRow::kPresent) return;
    Cursor cursor(statements_->insert_stage_if_missing);
    cursor.BindInt(1, hash.id).BindInt(2, hash.check).BindBlob(3, PackStageText({key(), ""}));
    cursor.Run();
  }

  // Refuses a filter that selects nothing or narrows good rows by kind.
  void CheckForgetFilter(const ForgetFilter& filter, const std::string& what) const {
    if (!filter.failures && !filter.successes) {
      throw Error("forgetting " + what + " in " + path_ +
                  ": say which (failures, successes or both)");
    }
    if (filter.successes && !filter.kinds.empty()) {
      throw Error("forgetting " + what + " in " + path_ +
                  ": failure kinds only narrow failures, not good " + what);
    }
  }

  // Runs body between `begin` and COMMIT (a savepoint when nested); rolls
  // back and rethrows when it throws.
  void Transact(const char* begin, const std::function<void()>& body) {
    const bool outermost = transaction_depth_ == 0;
    if (outermost) {
      Waiting("starting a transaction", [&] { sqlite::Exec(db(), begin); });
    } else {
      sqlite::Exec(db(), "SAVEPOINT ios_nested");
    }
    ++transaction_depth_;
    try {
      body();
      sqlite::Exec(db(), outermost ? "COMMIT" : "RELEASE ios_nested");
    } catch (...) {
      --transaction_depth_;
      // Not checked: SQLite may already have rolled back (e.g. after
      // SQLITE_FULL), and the body's exception is the one worth reporting.
      sqlite3_exec(db(), outermost ? "ROLLBACK" : "ROLLBACK TO ios_nested; RELEASE ios_nested",
                   nullptr, nullptr, nullptr);
      throw;
    }
    --transaction_depth_;
  }

 public:
  std::optional<NetworkRunRow> LookupNetworkRun(const NetworkRunKey& key) override {
    return Waiting("looking an end-to-end figure up", [&] { return network_runs_->Lookup(key); });
  }
  void StoreNetworkRun(const NetworkRunRow& row) override {
    Waiting("storing an end-to-end figure", [&] { network_runs_->Store(row); });
  }
  int64_t ForgetNetworkRuns(const ForgetFilter& filter) override {
    CheckForgetFilter(filter, "end-to-end figures");
    return Waiting("forgetting end-to-end figures", [&] { return network_runs_->Forget(filter); });
  }
  std::vector<NetworkRunRow> NetworkRuns(const std::string& model) override {
    return Waiting("listing end-to-end figures", [&] { return network_runs_->List(model); });
  }

  int64_t RecordSearch(const SearchRecord& search) override {
    return Waiting("recording a search", [&] {
      Cursor cursor(statements_->record_search);
      cursor.BindText(1, search.model)
          .BindText(2, search.device_fingerprint)
          .BindInt(3, search.batch_size)
          .BindText(4, search.settings_json)
          .BindText(5, search.schedule_json)
          .BindReal(6, search.latency_ms)
          .BindInt(7, search.stages_measured)
          .BindInt(8, search.stages_reused)
          .BindReal(9, search.enumerate_s)
          .BindReal(10, search.measure_s)
          .BindReal(11, search.solve_s)
          .BindText(12, search.started_at);
      if (!search.report_json.empty()) cursor.BindBlob(13, PackLongText(search.report_json));
      cursor.Run();
      return static_cast<int64_t>(sqlite3_last_insert_rowid(db()));
    });
  }

  std::vector<DeviceRow> Devices() override {
    return Waiting("listing devices", [&] {
      std::vector<DeviceRow> rows;
      Cursor cursor(statements_->devices);
      while (cursor.Next()) {
        DeviceRow& row = rows.emplace_back();
        row.fingerprint = cursor.Text(0);
        row.backend = cursor.Text(1);
        row.name = cursor.Text(2);
        row.simulated = cursor.Int(3) != 0;
        row.measurements = cursor.Int(4);
      }
      return rows;
    });
  }

  Stats GetStats() override {
    return Waiting("counting", [&] {
      Stats stats;
      Cursor cursor(statements_->stats);
      if (cursor.Next()) {
        stats.devices = cursor.Int(0);
        stats.stages = cursor.Int(1);
        stats.measurements = cursor.Int(2);
        stats.failed_measurements = cursor.Int(3);
        stats.searches = cursor.Int(4);
        stats.models = cursor.Int(5);
      }
      return stats;
    });
  }

  std::vector<SearchRecord> Searches() override {
    return Waiting("listing searches", [&] { return ReadSearches(*statements_); });
  }

  std::vector<std::string> Models() override {
    return Waiting("listing models", [&] {
      std::vector<std::string> names;
      Cursor cursor(statements_->models);
      while (cursor.Next()) names.push_back(cursor.Text(0));
      return names;
    });
  }

  std::vector<MeasurementRow> Measurements(const std::string& model) override {
    return Waiting("listing measurements", [&] { return ReadMeasurements(*statements_, model); });
  }

 private:
  sqlite3* db() const { return db_.get(); }

  std::chrono::steady_clock::time_point Deadline() const {
    return std::chrono::steady_clock::now() + options_.busy_budget;
  }

  std::string BusyMessage(const std::string& what, const sqlite::SqliteError& e) const {
    return "profiling DB " + path_ + " stayed locked by another process for longer than the " +
           "busy budget (" + std::to_string(options_.busy_budget.count()) + " ms) while " + what +
           ": " + e.what();
  }

  // Runs one statement's worth of work (`body` must be safe to repeat). On
  // its own it waits and retries while other processes hold the DB, up to
  // the busy budget; inside a transaction the lock is already ours.
  template <typename Body>
  std::invoke_result_t<Body&> Waiting(const std::string& what, Body&& body) {
    if (transaction_depth_ > 0) return body();
    try {
      return sqlite::RetryWhileBusy(Deadline(), body);
    } catch (const sqlite::SqliteError& e) {
      if (e.busy()) throw Error(BusyMessage(what, e));
      throw;
    }
  }

  // application_id, user_version and the number of schema objects, read
  // in one transaction: never from both sides of another process's schema
  // creation (which once made a fresh DB look like another application's).
  struct SchemaState {
    int64_t application_id = 0, version = 0, objects = 0;
    bool blank() const { return application_id == 0 && version == 0 && objects == 0; }
  };
  SchemaState ReadSchemaState() {
    SchemaState state;
    Transact("BEGIN", [&] {
      // The first read of the file: fails with SQLITE_NOTADB for other files.
      state.application_id = QueryInt(db(), "PRAGMA application_id");
      state.version = QueryInt(db(), "PRAGMA user_version");
      state.objects = QueryInt(db(), "SELECT count(*) FROM sqlite_schema");
    });
    return state;
  }

  // Refuses a file of another application or of a newer schema version.
  void CheckOurs(const SchemaState& state) const {
    if (state.application_id != kApplicationId && !state.blank()) {
      throw Error(path_ + " is not an ios-farm profiling DB: an SQLite database of another " +
                  "application (application_id " + std::to_string(state.application_id) + ")");
    }
    if (state.version > kSchemaVersion) {
      throw Error(path_ + " has profiling DB schema version " + std::to_string(state.version) +
                  ", newer than the version this build supports (" +
                  std::to_string(kSchemaVersion) + "); use a newer ios-farm");
    }
  }

  // Checks that the file is ours and current; in kCreate mode creates the
  // schema in a blank file and switches it to WAL. Safe when several
  // processes open one fresh file at once: the check-and-create is one
  // IMMEDIATE transaction, and every step retries while others hold locks.
  void PrepareSchema() {
    const auto deadline = Deadline();
    const SchemaState state = sqlite::RetryWhileBusy(deadline, [&] { return ReadSchemaState(); });
    CheckOurs(state);
    if (options_.mode != OpenMode::kCreate) {
      sqlite::Exec(db(), "PRAGMA foreign_keys = ON");
      // Opened to read or to forget: never create or convert anything.
      if (state.blank()) {
        throw Error(path_ + " is not an ios-farm profiling DB: an SQLite database without " +
                    "the ios-farm schema");
      }
      if (state.version != kSchemaVersion) {
        throw Error(path_ + " has profiling DB schema version " + std::to_string(state.version) +
                    "; open it with ios-coordinator once to upgrade it to version " +
                    std::to_string(kSchemaVersion));
      }
      return;
    }
    bool migrated = false;
    if (state.version != kSchemaVersion) {
      // Foreign keys are still off here: the migration drops and renames
      // tables that others refer to (the pragma is a no-op in a transaction).
      sqlite::RetryWhileBusy(deadline, [&] {
        Transact("BEGIN IMMEDIATE", [&] {
          // Another process may have created or upgraded the schema since
          // the check above.
          const SchemaState now = ReadSchemaState();
          CheckOurs(now);
          if (now.version == kSchemaVersion) return;
          if (now.blank()) {
            CreateSchema(db());
          } else if (now.version >= 1 && now.version <= 4) {
            if (now.version == 1) MigrateV1ToV2(db());
            if (now.version <= 2) MigrateV2ToV3(db());
            if (now.version <= 3) MigrateV3ToV4(db());
            MigrateV4ToV5(db());
            migrated = now.version == 1;  // only version 1's rewrite leaves space to give back
          } else {
            throw Error(path_ + " has profiling DB schema version " + std::to_string(now.version) +
                        ", which this build cannot upgrade");
          }
          sqlite::Exec(db(), ("PRAGMA user_version = " + std::to_string(kSchemaVersion)).c_str());
        });
      });
    }
    sqlite::Exec(db(), "PRAGMA foreign_keys = ON");
    if (migrated && path_ != ":memory:") {
      // Give the space of the old keys back (best effort: another process
      // reading the file makes VACUUM wait or fail, and then the file only
      // stays larger than it needs to be).
      try {
        sqlite::Exec(db(), "VACUUM");
      } catch (const sqlite::SqliteError&) {
      }
    }
    if (path_ != ":memory:") {
      // Readers (ios-db) may run while coordinators write. Switching needs
      // the file to itself, and SQLite answers SQLITE_BUSY at once rather
      // than wait for that; a file already in WAL mode is left as it is.
      sqlite::RetryWhileBusy(deadline, [&] { sqlite::Exec(db(), "PRAGMA journal_mode = WAL"); });
    }
    // In WAL mode NORMAL loses no committed data when the process dies; only
    // a power loss can cost the last commits.
    sqlite::Exec(db(), "PRAGMA synchronous = NORMAL");
    sqlite::Exec(db(), "PRAGMA cache_size = -65536");
  }

  // Whether the stage of `key` is stored; throws when its row belongs to
  // another key (a 63-bit hash collision: never mix two stages' results),
  // or, with `must_exist`, when it is missing.
  // Whether the stages table has a row for `hash`, and whether it is this
  // key's (its check matches) or another's.
  enum class StageRow { kMissing, kPresent, kCollides };
  StageRow FindStage(const StageKeyHash& hash) {
    Cursor cursor(statements_->stage_check);
    cursor.BindInt(1, hash.id);
    if (!cursor.Next()) return StageRow::kMissing;
    return cursor.Int(0) == hash.check ? StageRow::kPresent : StageRow::kCollides;
  }

  Error Collision(const std::string& key, const StageKeyHash& hash) const {
    return Error("profiling DB " + path_ + ": the key of stage '" + Abbreviate(key) +
                 "' collides with another stored stage's (hash " + std::to_string(hash.id) +
                 "); this stage cannot be stored in this DB");
  }

  bool CheckStage(const std::string& key, const StageKeyHash& hash, bool must_exist) {
    switch (FindStage(hash)) {
      case StageRow::kPresent:
        return true;
      case StageRow::kCollides:
        throw Collision(key, hash);
      case StageRow::kMissing:
        break;
    }
    if (must_exist) {
      throw Error("profiling DB " + path_ + ": stage '" + Abbreviate(key) + "' was not stored");
    }
    return false;
  }

  int64_t SettingsId(const std::string& settings_key) {
    {
      Cursor cursor(statements_->upsert_settings);
      cursor.BindText(1, settings_key)
          .BindText(2, ToString(ProtocolOfSettingsKey(settings_key)))
          .Run();
    }
    Cursor cursor(statements_->settings_id);
    cursor.BindText(1, settings_key);
    if (!cursor.Next()) throw Error("profiling DB " + path_ + ": settings row vanished");
    return cursor.Int(0);
  }

  std::string path_;
  OpenOptions options_;
  sqlite::DbHandle db_;
  std::unique_ptr<Statements> statements_;                 // after db_: finalized before it closes
  std::unique_ptr<detail::NetworkRunTable> network_runs_;  // likewise
  int transaction_depth_ = 0;
};

}  // namespace

std::unique_ptr<ProfileStore> ProfileStore::Open(const std::string& path,
                                                 const OpenOptions& options) {
  if (path.empty()) throw Error("profiling DB path is empty");
  // SQLite would say "unable to open database file" with its own source
  // location; a directory given for the DB deserves a plain sentence.
  if (std::error_code error; std::filesystem::is_directory(path, error)) {
    throw Error(path + ": is a directory, not a profiling DB file");
  }
  if (path != ":memory:") {
    std::error_code error;
    if (std::filesystem::exists(path, error)) {
      // SQLite would block on a FIFO and read a device without end.
      CheckInputFile(path, "profiling DB", kAnySize);
    } else if (options.mode != OpenMode::kCreate) {
      throw Error("no profiling DB at " + path);
    }
  }
  return std::make_unique<SqliteProfileStore>(path, options);
}

void ProfileStore::LinkModelStageKeys(const std::string& model,
                                      const std::vector<std::string>& stage_keys) {
  std::vector<StageKeyHash> hashes;
  hashes.reserve(stage_keys.size());
  for (const std::string& key : stage_keys) hashes.push_back(HashStageKey(key));
  LinkModelStages(model, hashes, [&](size_t i) { return stage_keys[i]; });
}

}  // namespace ios::db
