#include "run/run_prediction.h"

#include <cmath>
#include <cstdio>

#include "common/printable.h"
#include "coordinator/pricing.h"
#include "coordinator/schedule_json.h"
#include "coordinator/search.h"
#include "coordinator/weight_warmth.h"
#include "db/profile_store.h"
#include "devices/linked.h"

namespace ios::run {

Prediction Predict(const PredictionInputs& in) {
  auto store = db::ProfileStore::Open(in.db);
  auto measurer = coordinator::MakeLocalMeasurer(devices::LinkedRegistry().OpenBackend(in.device));
  coordinator::SearchOptions options;
  options.batch_size = in.batch;
  if (in.settings) {
    options.settings = *in.settings;
  } else {
    options.settings = DefaultMeasureSettings(devices::LinkedRegistry().TimingOf(in.device));
    coordinator::DecideWeightWarmth(in.graph, in.batch, measurer->Device(), options.settings);
  }
  const coordinator::PricedSchedule pricing =
      coordinator::PriceBlocks(in.graph, {in.stages}, options, *store, *measurer);
  const coordinator::LatencyTable& table = pricing.table;
  const coordinator::Schedule& priced = pricing.schedule;
  // Keyed as the search's verification keys what it runs (coordinator/
  // verify.cc): the stages in order, the verification's weight seed and
  // settings. This run's own figure is not stored under that key: its
  // timing (--runs, --warmup, not adaptive) and weights (--seed, a file's)
  // are not the verification's.
  const DeviceInfo& device = measurer->Device();
  const coordinator::VerifyOptions verify;
  const db::NetworkRunKey key{
      NetworkKey(coordinator::NetworkOf(in.graph, priced, verify.weight_seed)), device.fingerprint,
      in.batch,
      coordinator::DefaultVerifySettings(devices::LinkedRegistry().TimingOf(in.device)).Key()};
  Prediction prediction;
  prediction.latency_ms = priced.latency_ms;
  prediction.measured = table.stats.measured;
  prediction.reused = table.stats.reused;
  prediction.failed = table.stats.failed;
  prediction.simulated = device.simulated;
  for (const coordinator::ScheduledStage& s : priced.blocks.front()) {
    const auto id = static_cast<size_t>(s.stage_id);
    const double ms = table.latency_ms[id];
    prediction.stage_ms.push_back(std::isfinite(ms) ? ms : NAN);
    prediction.stage_measured.push_back(table.measured_now[id]);
  }
  prediction.search_run = store->LookupNetworkRun(key);
  return prediction;
}

std::string SearchRunText(const db::NetworkRunRow& run) {
  const MeasureResult& m = run.result;
  // The schedule may be a file name and the message a worker's: escaped.
  const std::string stored = "stored " + run.measured_at + " as " + Printable(run.schedule);
  if (!m.ok()) {
    return std::string(ToString(m.error)) + ": " + Printable(m.error_message) + " (" + stored + ")";
  }
  char median[32], spread[32];
  std::snprintf(median, sizeof median, "%.3f", m.median_ms);
  std::snprintf(spread, sizeof spread, "%.3f", m.spread_ms);
  return std::string(median) + " ms (" + stored + ": spread " + spread + " ms, " +
         std::to_string(m.samples) + " runs, " + run.key.settings_key + ")";
}

nlohmann::json SearchRunJson(const std::optional<db::NetworkRunRow>& run) {
  if (!run) return nullptr;
  const MeasureResult& m = run->result;
  return {{"median_ms", m.ok() ? nlohmann::json(m.median_ms) : nlohmann::json(nullptr)},
          {"spread_ms", m.ok() ? nlohmann::json(m.spread_ms) : nlohmann::json(nullptr)},
          {"samples", m.samples},
          {"status", m.ok() ? "ok" : ToString(m.error)},
          {"error_message", m.error_message},
          {"schedule", run->schedule},
          {"settings", run->key.settings_key},
          {"measured_at", run->measured_at}};
}

}  // namespace ios::run
