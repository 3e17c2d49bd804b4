// Internal to the search (coordinator/search.cc, lazy_measure.cc): the
// profiling-DB side of the measure phase. Looks every candidate stage up
// once, then measures stages by id through a Measurer stream, committing
// results a few times a second (and when the stream ends, however it ends),
// and keeps the LatencyTable and its progress counts. What to measure is
// the caller's choice.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/stage.h"
#include "coordinator/search.h"

namespace ios::coordinator {

class MeasureSession {
 public:
  using ProgressFn = std::function<void(const MeasureProgress&)>;
  //! Which stages to measure next, given the ids whose results just
  //! arrived; none: nothing more.
  using NextFn = std::function<std::vector<int>(std::span<const int> arrived)>;

  //! Reads the stored result of every stage of `plan` for the measurer's
  //! device, batch and settings (a transient failure counts as missing).
  MeasureSession(const Graph& graph, const SearchPlan& plan, db::ProfileStore& store,
                 Measurer& measurer, const SearchOptions& options, ProgressFn progress);

  //! Stored or measured (a failure included).
  bool Known(int id) const { return known_[id] != 0; }
  const std::vector<double>& latency() const { return table_.latency_ms; }
  MeasureProgress& stats() { return table_.stats; }

  //! Measures `ids` (none known, none twice) and whatever `next` returns
  //! after each batch of results. Returns when all have a result, every
  //! one committed (on an exception too, as far as the DB allows).
  void Measure(const std::vector<int>& ids, const NextFn& next = {});

  //! Reports progress at most every 200 ms unless `force`.
  void Report(bool force);

  //! The table; the session is spent.
  LatencyTable Finish();

 private:
  //! Specs of `ids` for the stream.
  Measurer::MoreSpecs Prepare(const std::vector<int>& ids);
  //! Stores the results not committed yet in one transaction, and counts
  //! them (progress lines count committed results only: what an interrupt
  //! keeps).
  void Commit();

  const SearchPlan& plan_;
  db::ProfileStore& store_;
  Measurer& measurer_;
  const SearchOptions& options_;
  ProgressFn progress_;
  StageKeyer keyer_;
  DeviceInfo device_;
  std::string settings_key_;
  LatencyTable table_;
  std::vector<char> known_;
  // Of the running stream, by stream index: the stage id and its spec
  // (freed once its result is in).
  std::vector<int> stream_ids_;
  std::vector<std::unique_ptr<StageSpec>> stream_specs_;
  // Results in the table, not in the DB yet: stage ids and results.
  std::vector<int> pending_ids_;
  std::vector<MeasureResult> pending_;
  std::chrono::steady_clock::time_point start_, last_report_{}, last_commit_{};
  bool reported_ = false;
  int64_t commits_ = 0;
  double commit_s_ = 0;  // spent committing
};

}  // namespace ios::coordinator
