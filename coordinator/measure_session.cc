#include "coordinator/measure_session.h"

#include <spdlog/spdlog.h>

#include <limits>
#include <utility>

namespace ios::coordinator {
namespace {

using Clock = std::chrono::steady_clock;
// Results are committed at least this often while they arrive...
constexpr auto kCommitEvery = std::chrono::milliseconds(250);
// ...and in transactions of at most this many.
constexpr size_t kCommitMax = 8192;

}  // namespace

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
  // Nothing is written here: a stage's row is added with its result
  // (Commit), so a round costs the DB nothing until results come back.
  Measurer::MoreSpecs specs;
  specs.reserve(ids.size());
  for (int id : ids) {
    if (known_.at(id)) throw Error("MeasureSession: stage " + std::to_string(id) + " is known");
    known_[id] = 1;  // from now on: measured or being measured
    table_.measured_now[id] = true;
    auto spec = std::make_unique<StageSpec>(keyer_.Spec(plan_.StageOf(id)));
    specs.push_back(spec.get());
    stream_ids_.push_back(id);
    stream_specs_.push_back(std::move(spec));
  }
  return specs;
}

void MeasureSession::Commit() {
  if (pending_ids_.empty()) return;
  const auto start = Clock::now();
  std::vector<db::StageMeasurement> measurements;
  measurements.reserve(pending_ids_.size());
  for (size_t i = 0; i < pending_ids_.size(); ++i) {
    measurements.push_back({plan_.key_hashes[pending_ids_[i]], pending_[i]});
  }
  store_.StoreMeasurements(device_.fingerprint, options_.batch_size, settings_key_, measurements,
                           [&](size_t i) { return plan_.KeyOf(keyer_, pending_ids_[i]); });
  MeasureProgress& stats = table_.stats;
  for (const MeasureResult& result : pending_) {
    ++stats.measured;
    if (!result.ok()) ++stats.failed;
  }
  pending_ids_.clear();
  pending_.clear();
  last_commit_ = Clock::now();
  ++commits_;
  commit_s_ += std::chrono::duration<double>(last_commit_ - start).count();
}

void MeasureSession::Measure(const std::vector<int>& ids, const NextFn& next) {
  if (!reported_) Report(true);
  stream_ids_.clear();
  stream_specs_.clear();
  Measurer::MoreSpecs first = Prepare(ids);
  if (first.empty()) return;
  std::vector<int> arrived;
  last_commit_ = Clock::now();
  try {
    measurer_.MeasureStream(
        std::move(first), options_.batch_size, options_.settings,
        [&](std::span<const IndexedResult> results) {
          arrived.clear();
          for (const IndexedResult& r : results) {
            const int id = stream_ids_.at(r.index);
            stream_specs_.at(r.index).reset();
            arrived.push_back(id);
            if (r.result.ok()) {
              table_.latency_ms[id] = r.result.median_ms;
            } else {
              table_.failures[id] = {r.result.error, r.result.error_message};
            }
            pending_ids_.push_back(id);
            pending_.push_back(r.result);
          }
          Measurer::MoreSpecs more;
          if (next && !arrived.empty()) more = Prepare(next(arrived));
          // A transaction per delivery writes about a page of the DB per
          // result (stages sit in the B-trees by the hashes of their keys),
          // which on a fast device costs more than the measuring: results
          // are committed a few times a second instead. An interrupt loses
          // at most that much; the measurer calls back with none when it
          // has waited a while, so nothing stays uncommitted longer.
          if (Clock::now() - last_commit_ >= kCommitEvery || pending_.size() >= kCommitMax) {
            Commit();
            Report(false);
          }
          return more;
        });
  } catch (...) {
    // Keep what was measured; the failure that ended the stream is the one
    // worth reporting, not a DB that refuses this commit too.
    try {
      Commit();
    } catch (const std::exception& e) {
      spdlog::error("{} results measured but not stored: {}", pending_.size(), e.what());
    }
    throw;
  }
  Commit();
  spdlog::debug("measure session: {} results committed in {} transactions, {:.3f} s in the DB",
                table_.stats.measured, commits_, commit_s_);
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
