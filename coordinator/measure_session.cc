#include "coordinator/measure_session.h"

#include <limits>
#include <utility>

namespace ios::coordinator {

MeasureSession::MeasureSession(const Graph& graph, const SearchPlan& plan, db::ProfileStore& store,
                               Measurer& measurer, const SearchOptions& options,
                               ProgressFn progress)
    : plan_(plan),
      store_(store),
      measurer_(measurer),
      options_(options),
      progress_(std::move(progress)),
      keyer_(graph),
      device_(measurer.Device()),
      settings_key_(options.settings.Key()),
      start_(std::chrono::steady_clock::now()) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const size_t n = plan.stage_count();
  table_.latency_ms.assign(n, kInf);
  table_.measured_now.assign(n, false);
  table_.skipped.assign(n, false);
  table_.stats.total = static_cast<int64_t>(n);
  known_.assign(n, 0);
  store_.UpsertDevice(device_);
  MeasureProgress& stats = table_.stats;
  // One read of the device's slice of the DB, matched against the plan by
  // the hashes of its keys (the plan's own identity of a stage).
  store_.ForEachMeasurement(device_.fingerprint, options.batch_size, settings_key_,
                            [&](const StageKeyHash& stage, const MeasureResult& stored) {
                              const int id = plan.IdOfHash(stage);
                              if (id < 0) return;      // not ours
                              if (known_[id]) return;  // seen before a retried read
                              // A transient failure (timeout, lost worker, backend failure) is
                              // kept for diagnosis but measured again; OOM and unsupported are
                              // reused.
                              if (!stored.ok() && IsTransient(stored.error)) return;
                              known_[id] = 1;
                              ++stats.reused;
                              if (stored.ok()) {
                                table_.latency_ms[id] = stored.median_ms;
                              } else {
                                ++stats.failed;
                                table_.failures[id] = {stored.error, stored.error_message};
                              }
                            });
  stats.workers = measurer_.ActiveWorkers();
  // The first report waits for the first Measure(): the caller may still
  // mark the session lazy, which changes how progress is shown.
}

Measurer::MoreSpecs MeasureSession::Prepare(const std::vector<int>& ids) {
  // Specs and keys are built before the write lock is taken: other
  // coordinators sharing the DB wait only for the inserts. No description is
  // stored: the DB derives it from the key (db/stage_text.h).
  Measurer::MoreSpecs specs;
  std::vector<std::string> keys;
  specs.reserve(ids.size());
  keys.reserve(ids.size());
  for (int id : ids) {
    if (known_.at(id)) throw Error("MeasureSession: stage " + std::to_string(id) + " is known");
    known_[id] = 1;  // from now on: measured or being measured
    table_.measured_now[id] = true;
    auto spec = std::make_unique<StageSpec>(keyer_.Spec(plan_.StageOf(id)));
    keys.push_back(spec->Key());
    specs.push_back(spec.get());
    stream_ids_.push_back(id);
    stream_specs_.push_back(std::move(spec));
  }
  store_.RunInTransaction([&] {
    for (const std::string& key : keys) store_.UpsertStage(key, "");
  });
  return specs;
}

void MeasureSession::Measure(const std::vector<int>& ids, const NextFn& next) {
  if (!reported_) Report(true);
  stream_ids_.clear();
  stream_specs_.clear();
  Measurer::MoreSpecs first = Prepare(ids);
  if (first.empty()) return;
  MeasureProgress& stats = table_.stats;
  std::vector<int> arrived;
  measurer_.MeasureStream(std::move(first), options_.batch_size, options_.settings,
                          [&](std::span<const IndexedResult> results) {
                            // One transaction for whatever has arrived: each result is committed
                            // as soon as the previous commit allows.
                            store_.RunInTransaction([&] {
                              for (const IndexedResult& r : results) {
                                const int id = stream_ids_.at(r.index);
                                store_.Store({plan_.KeyOf(keyer_, id), device_.fingerprint,
                                              options_.batch_size, settings_key_},
                                             r.result);
                              }
                            });
                            arrived.clear();
                            for (const IndexedResult& r : results) {
                              const int id = stream_ids_.at(r.index);
                              stream_specs_.at(r.index).reset();
                              arrived.push_back(id);
                              ++stats.measured;
                              if (r.result.ok()) {
                                table_.latency_ms[id] = r.result.median_ms;
                              } else {
                                ++stats.failed;
                                table_.failures[id] = {r.result.error, r.result.error_message};
                              }
                            }
                            Measurer::MoreSpecs more;
                            if (next) more = Prepare(next(arrived));
                            Report(false);
                            return more;
                          });
  stream_ids_.clear();
  stream_specs_.clear();
}

void MeasureSession::Report(bool force) {
  if (!progress_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_report_ < std::chrono::milliseconds(200)) return;
  last_report_ = now;
  reported_ = true;
  MeasureProgress& stats = table_.stats;
  stats.elapsed_s = std::chrono::duration<double>(now - start_).count();
  stats.workers = measurer_.ActiveWorkers();
  progress_(stats);
}

LatencyTable MeasureSession::Finish() {
  table_.stats.finished = true;
  Report(true);
  return std::move(table_);
}

}  // namespace ios::coordinator
