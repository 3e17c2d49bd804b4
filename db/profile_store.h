// The profiling DB: every stage latency ever measured, keyed by stage,
// device, batch size and measurement settings, plus the searches run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/measurement.h"
#include "common/stage_key_hash.h"
#include "db/stage_text.h"

namespace ios::db {

//! Everything a measurement is valid for.
struct MeasurementKey {
  std::string stage_key;           // StageSpec::Key()
  std::string device_fingerprint;  // DeviceInfo::fingerprint
  int batch_size = 1;
  std::string settings_key;  // MeasureSettings::Key() (includes dtype)
};

//! One result for ProfileStore::StoreMeasurements: its stage by the hash of
//! its key (HashStageKey).
struct StageMeasurement {
  StageKeyHash stage;
  MeasureResult result;
};

struct DeviceRow {
  std::string fingerprint, backend, name;
  bool simulated = false;
  int64_t measurements = 0;
};

struct MeasurementRow {
  std::string stage_key, stage_description, device_name, device_fingerprint, device_backend;
  int batch_size = 1;
  std::string settings_key;
  std::string protocol;  // the settings' StageProtocol, by name ("isolated", "executed")
  MeasureResult result;
  std::string measured_at;  // UTC, ISO 8601
};

struct SearchRecord {
  int64_t id = 0;  // read back by Searches(); RecordSearch ignores it and returns the new one
  std::string model, device_fingerprint, settings_json, schedule_json;
  int batch_size = 1;
  double latency_ms = 0;
  int64_t stages_measured = 0, stages_reused = 0;
  double enumerate_s = 0, measure_s = 0, solve_s = 0;
  std::string started_at;  // filled by the store when empty
  //! report::ToJson(input, /*with_graph=*/false) of the search's report
  //! (schema 5; stored packed). Empty: none (a search recorded before it).
  std::string report_json;
};

//! Everything an end-to-end figure of a network under a schedule is valid
//! for (the search's verification, docs/execution.md).
struct NetworkRunKey {
  std::string network_key;  // NetworkKey(spec): graph, stages, weight seed
  std::string device_fingerprint;
  int batch_size = 1;
  std::string settings_key;  // MeasureSettings::Key() of the end-to-end runs
};

//! A stored end-to-end figure.
struct NetworkRunRow {
  NetworkRunKey key;  // network_key left empty by listings (it is the whole graph)
  std::string model;
  std::string schedule;  // "ios", "greedy", "sequential", "alternative 1", a file
  int stages = 0;
  double predicted_ms = 0;  // what the DP's table priced it at; NaN: not priced
  MeasureResult result;
  std::string measured_at;  // UTC, ISO 8601; filled by the store
};

struct Stats {
  int64_t devices = 0, stages = 0, measurements = 0, failed_measurements = 0, searches = 0,
          models = 0;
};

//! Which measurements ForgetMeasurements (or end-to-end figures
//! ForgetNetworkRuns) drops: failures and/or good ones, narrowed by failure
//! kind, device and model (all given filters apply).
struct ForgetFilter {
  bool failures = false;            // drop failed measurements
  bool successes = false;           // drop good measurements
  std::vector<MeasureError> kinds;  // failures of these kinds only; empty: any kind
  std::string device;               // device name or fingerprint; empty: any device
  std::string model;                // stages `model` uses (figures: of `model`); empty: any
};

enum class OpenMode {
  kCreate,     //!< read-write; a missing or blank file gets the schema (coordinators)
  kReadWrite,  //!< read-write; the file must already be an ios-farm DB (ios-db forget)
  kReadOnly,   //!< SQLITE_OPEN_READONLY: never changes the file (ios-db queries)
};

//! How long a call waits for locks held by other processes before it gives
//! up with an ios::Error naming this budget. Far longer than any transaction
//! a coordinator holds: its longest, the look-up of every candidate stage of
//! a search, took 15 s for RandWire (139,429 stages) on a busy 2-core machine.
inline constexpr std::chrono::milliseconds kDefaultBusyBudget{std::chrono::minutes(5)};

struct OpenOptions {
  OpenMode mode = OpenMode::kCreate;
  std::chrono::milliseconds busy_budget = kDefaultBusyBudget;
};

//! SQLite store in WAL mode; schema version in PRAGMA user_version. Several
//! processes (coordinators, ios-db) may share one file: opening is race-free
//! and every call waits up to the busy budget for other writers. Not
//! thread-safe: one thread uses an instance.
class ProfileStore {
 public:
  //! Opens the DB at `path` (":memory:" for a private one) as `options.mode`
  //! says. Throws ios::Error naming the file if it is missing (except in
  //! kCreate mode), cannot be opened, is not an ios-farm DB, or has a newer
  //! schema version.
  static std::unique_ptr<ProfileStore> Open(const std::string& path,
                                            const OpenOptions& options = {});
  virtual ~ProfileStore() = default;

  //! Registers (or refreshes) a device; idempotent.
  virtual void UpsertDevice(const DeviceInfo& device) = 0;
  //! Registers a stage and its readable description; idempotent. An empty
  //! description is derived from the key whenever the stage is read.
  virtual void UpsertStage(const std::string& stage_key, const std::string& description) = 0;
  //! Records that `model` uses the stages whose keys hash to `stages` (for
  //! `ios-db measurements --model`). A stage with no row yet gets one
  //! without a description, its key from `key_of(i)`, which is called only
  //! for those (a rerun's stages are all stored: nothing is rebuilt). Fast
  //! when the links exist: one read of the model's links, writes only for
  //! new ones.
  virtual void LinkModelStages(const std::string& model, std::span<const StageKeyHash> stages,
                               const std::function<std::string(size_t i)>& key_of) = 0;
  //! The same for stages given by their keys.
  void LinkModelStageKeys(const std::string& model, const std::vector<std::string>& stage_keys);

  //! The stored result for `key`, if any (errors are stored results too;
  //! whether a failure is reused is the caller's choice, see IsTransient).
  virtual std::optional<MeasureResult> Lookup(const MeasurementKey& key) = 0;
  //! Calls `visit` with every stored result of one device, batch size and
  //! settings, its stage named by the hash of its key (HashStageKey): a
  //! search's whole slice of the DB in one query, instead of one look-up per
  //! candidate stage (RandWire: 139,429 of them). A read the DB's busy
  //! handling restarts may visit a row again.
  virtual void ForEachMeasurement(
      const std::string& device_fingerprint, int batch_size, const std::string& settings_key,
      const std::function<void(const StageKeyHash& stage, const MeasureResult& result)>& visit) = 0;
  //! Stores (or replaces) one result and commits it before returning. The
  //! stage and device must have been upserted.
  virtual void Store(const MeasurementKey& key, const MeasureResult& result) = 0;
  //! Stores (or replaces) results of one device, batch size and settings in
  //! one transaction; a stage with no row yet gets one without a
  //! description, its key from `key_of(i)` (called only for those). The
  //! device must have been upserted. What a search commits as results come:
  //! four statements a result fewer than Store.
  virtual void StoreMeasurements(const std::string& device_fingerprint, int batch_size,
                                 const std::string& settings_key,
                                 std::span<const StageMeasurement> measurements,
                                 const std::function<std::string(size_t i)>& key_of) = 0;

  //! Runs body inside one transaction (commit on return, rollback on
  //! exception, which is rethrown). Calls may nest. A Store() inside body is
  //! committed with the transaction, not before it returns.
  virtual void RunInTransaction(const std::function<void()>& body) = 0;
  //! Runs body, which only reads, on one consistent snapshot without taking
  //! the write lock: other coordinators keep committing meanwhile (WAL).
  //! Fast for many look-ups in a row. body must not write.
  virtual void RunInReadTransaction(const std::function<void()>& body) = 0;

  //! Deletes the measurements `filter` selects (at least one of failures and
  //! successes must be set) and returns how many rows went. Stages, devices
  //! and searches stay.
  virtual int64_t ForgetMeasurements(const ForgetFilter& filter) = 0;

  //! The stored end-to-end figure for `key`, if any (a failure too).
  virtual std::optional<NetworkRunRow> LookupNetworkRun(const NetworkRunKey& key) = 0;
  //! Stores (or replaces) an end-to-end figure and commits it.
  virtual void StoreNetworkRun(const NetworkRunRow& row) = 0;
  //! Deletes the end-to-end figures `filter` selects, as ForgetMeasurements
  //! selects measurements (its model: the figures of that model, as
  //! NetworkRuns(model) lists them), and returns how many rows went.
  virtual int64_t ForgetNetworkRuns(const ForgetFilter& filter) = 0;
  //! Stored end-to-end figures, of one model or (empty) all, newest last,
  //! one device's together when a search stored them within a second.
  virtual std::vector<NetworkRunRow> NetworkRuns(const std::string& model) = 0;
  //! Records a finished search; returns its id.
  virtual int64_t RecordSearch(const SearchRecord& search) = 0;

  virtual std::vector<DeviceRow> Devices() = 0;
  virtual Stats GetStats() = 0;
  //! Every recorded search, oldest first, with its id and report. Throws
  //! ios::Error naming the search when a stored report is damaged.
  virtual std::vector<SearchRecord> Searches() = 0;
  //! Names of the models this DB knows (linked stages or recorded searches).
  virtual std::vector<std::string> Models() = 0;
  //! Measurements of the stages a model uses (empty model name: all).
  virtual std::vector<MeasurementRow> Measurements(const std::string& model) = 0;
};

}  // namespace ios::db
