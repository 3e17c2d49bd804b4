#include "db/stored_report.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "common/ios_json.h"
#include "common/stage.h"
#include "common/stage_key_hash.h"

namespace ios::db {
namespace {

using nlohmann::json;

std::string SearchName(const SearchRecord& search) { return "search " + std::to_string(search.id); }

// A JSON column the coordinator wrote; `what` names it in errors.
json ParseColumn(const SearchRecord& search, const std::string& text, const std::string& what) {
  if (!json::accept(text)) {
    throw Error(SearchName(search) + ": its " + what + " is not JSON");
  }
  return json::parse(text);
}

// The stored time stamps are "YYYY-MM-DDTHH:MM:SSZ" (UTC); 0 when not one.
int64_t UnixSeconds(const std::string& iso) {
  std::tm tm{};
  char zone = 0;
  if (std::sscanf(iso.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &zone) != 7 ||
      zone != 'Z') {
    return 0;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm));
}

double NumberOr(const json& doc, const char* field, double otherwise) {
  const auto it = doc.find(field);
  return it != doc.end() && it->is_number() ? it->get<double>() : otherwise;
}

std::string TextOr(const json& doc, const char* field, const std::string& otherwise) {
  const auto it = doc.find(field);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

// The graph every report of `search` draws: the one its schedule JSON
// carries (ios-coordinator stores it there since schema 1).
Graph GraphOf(const SearchRecord& search, const json& schedule) {
  const auto graph = schedule.find("graph");
  if (graph == schedule.end() || !graph->is_object()) {
    throw Error(SearchName(search) + ": its schedule JSON has no 'graph' (IOS JSON) to draw");
  }
  return ParseIosJson(graph->dump(), SearchName(search) + "'s schedule JSON: graph").graph;
}

// When each stage of the search's slice of the DB was measured, by stage
// key: the stages of `search.model` on its device, batch and settings.
std::map<std::string, int64_t> MeasuredAt(ProfileStore& store, const SearchRecord& search,
                                          const std::string& settings_key) {
  std::map<std::string, int64_t> at;
  for (const MeasurementRow& row : store.Measurements(search.model)) {
    if (row.device_fingerprint == search.device_fingerprint &&
        row.batch_size == search.batch_size && row.settings_key == settings_key &&
        row.result.ok()) {
      at[row.stage_key] = UnixSeconds(row.measured_at);
    }
  }
  return at;
}

// The returned schedule as the schedule JSON has it: per block, stages of
// groups of node names, each with the DP table's latency (null: unpriced).
std::vector<report::StageRow> StagesOf(const SearchRecord& search, const json& schedule,
                                       const Graph& graph,
                                       const std::map<std::string, int64_t>& measured_at) {
  const auto blocks = schedule.find("blocks");
  if (blocks == schedule.end() || !blocks->is_array()) {
    throw Error(SearchName(search) + ": its schedule JSON has no 'blocks'");
  }
  StageKeyer keyer(graph);
  std::vector<report::StageRow> rows;
  for (size_t b = 0; b < blocks->size(); ++b) {
    const json& stages = (*blocks)[b].value("stages", json::array());
    for (size_t k = 0; k < stages.size(); ++k) {
      const std::string where = SearchName(search) + "'s schedule JSON: blocks[" +
                                std::to_string(b) + "].stages[" + std::to_string(k) + "]";
      const json& stage = stages[k];
      report::StageRow row;
      row.block = static_cast<int>(b);
      row.strategy = TextOr(stage, "strategy", "") == ToString(Strategy::kMerge)
                         ? Strategy::kMerge
                         : Strategy::kParallel;
      for (const json& group : stage.value("groups", json::array())) {
        std::vector<NodeId>& ids = row.groups.emplace_back();
        for (const json& name : group) {
          const std::optional<NodeId> id =
              name.is_string() ? graph.Find(name.get<std::string>()) : std::nullopt;
          if (!id) throw Error(where + ": names " + name.dump() + ", not a node of its graph");
          ids.push_back(*id);
        }
      }
      row.latency_ms = NumberOr(stage, "latency_ms", report::kNoFigure);
      if (std::isfinite(row.latency_ms)) {
        row.source = report::Source::kStored;
      } else {
        row.error = "no latency stored with the schedule (a stage that failed to measure)";
      }
      // The key is what the DB knows the stage by; a made-up stage the
      // keyer refuses just goes without.
      try {
        const std::string& key = keyer.Key(Stage{row.strategy, row.groups});
        row.key_id = std::to_string(HashStageKey(key).id);
        if (const auto it = measured_at.find(key); it != measured_at.end()) {
          row.measured_at = it->second;
        }
      } catch (const Error&) {
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

// The end-to-end figure the search's verification stored for the returned
// schedule, if the DB still holds that one: same model, device, batch,
// schedule name and stage count, priced as the search priced it, measured
// after it started. A later search of the same network replaces the row
// with one that still fits; a different network never matches.
std::optional<report::EndToEnd> VerifiedFigure(ProfileStore& store, const SearchRecord& search,
                                               const std::string& name, size_t stages) {
  const int64_t started = UnixSeconds(search.started_at);
  for (const NetworkRunRow& run : store.NetworkRuns(search.model)) {
    const bool same_price =
        std::isfinite(run.predicted_ms) && std::abs(run.predicted_ms - search.latency_ms) <=
                                               1e-9 * std::max(1.0, std::abs(search.latency_ms));
    if (run.key.device_fingerprint != search.device_fingerprint ||
        run.key.batch_size != search.batch_size || run.schedule != name ||
        run.stages != static_cast<int>(stages) || !same_price ||
        UnixSeconds(run.measured_at) < started) {
      continue;
    }
    report::EndToEnd e;
    e.from_db = true;
    e.measured_at = UnixSeconds(run.measured_at);
    e.samples = run.result.samples;
    e.how = "the search's verification";
    if (run.result.ok()) {
      e.median_ms = run.result.median_ms;
      e.spread_ms = run.result.spread_ms;
    } else {
      e.error =
          run.result.error_message.empty() ? ToString(run.result.error) : run.result.error_message;
    }
    return e;
  }
  return std::nullopt;
}

std::string Ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g ms", ms);
  return text;
}

// A report rebuilt from what a schema 4 row holds (docs/report.md).
report::ReportInput PartialReport(ProfileStore& store, const SearchRecord& search,
                                  const json& schedule, Graph graph, const Renderer& renderer) {
  const json settings = search.settings_json.empty()
                            ? json::object()
                            : ParseColumn(search, search.settings_json, "settings JSON");
  report::ReportInput input;
  input.tool = renderer.tool;
  input.version = renderer.version;
  input.generated_at = renderer.generated_at;
  input.model = search.model;
  input.batch = search.batch_size;
  const json device = schedule.value("device", json::object());
  input.device.backend = TextOr(device, "backend", "");
  input.device.name = TextOr(device, "name", search.device_fingerprint);
  input.device.fingerprint = search.device_fingerprint;
  input.device.simulated = device.value("simulated", false);
  input.lanes.kind = input.device.backend;

  const std::string settings_key = TextOr(settings, "settings", "");
  report::ScheduleRow returned;
  returned.name = TextOr(settings, "returned", "ios");
  returned.returned = true;
  returned.stages = StagesOf(search, schedule, graph, MeasuredAt(store, search, settings_key));
  returned.predicted_ms = search.latency_ms;
  if (const json memory = schedule.value("memory", json::object());
      memory.contains("peak_live_bytes") && memory["peak_live_bytes"].is_number_integer()) {
    returned.peak_bytes = memory["peak_live_bytes"].get<int64_t>();
  }
  returned.measured = VerifiedFigure(store, search, returned.name, returned.stages.size());
  input.schedules.push_back(std::move(returned));

  report::SearchFacts facts;
  facts.measured = search.stages_measured;
  facts.reused = search.stages_reused;
  facts.enumerate_s = search.enumerate_s;
  facts.measure_s = search.measure_s;
  facts.solve_s = search.solve_s;
  facts.measure_mode = TextOr(settings, "measure", "");
  facts.settings_key = settings_key;
  facts.bound_violations = static_cast<int64_t>(NumberOr(settings, "bound_violations", 0));
  facts.parts_measured_in_full =
      static_cast<int64_t>(NumberOr(settings, "parts_measured_in_full", 0));
  for (const json& part : schedule.value("parts", json::array())) {
    report::PartRow row;
    row.block = static_cast<int>(NumberOr(part, "block", 0));
    row.part = static_cast<int>(NumberOr(part, "part", -1));
    row.piece = static_cast<int>(NumberOr(part, "piece", -1));
    row.operators = static_cast<int>(NumberOr(part, "operators", 0));
    row.dp = TextOr(part, "dp", "");
    facts.parts.push_back(std::move(row));
  }
  input.search = std::move(facts);

  std::string totals;
  const json baselines = schedule.value("baselines", json::object());
  for (const char* name : {"sequential", "greedy"}) {
    const double ms = NumberOr(baselines, (std::string(name) + "_ms").c_str(), report::kNoFigure);
    if (std::isfinite(ms))
      totals += (totals.empty() ? "" : ", ") + std::string(name) + " " + Ms(ms);
  }
  input.notes.push_back(
      "Partial report: " + SearchName(search) + " was recorded before schema 5, " +
      "which keeps a search's whole report. Missing: the sequential and greedy schedules' " +
      "stages" + (totals.empty() ? "" : " (their totals: " + totals + ")") +
      ", any other schedule the search verified, each part's DP size and its stages " +
      "measured, reused and skipped by bounds, the verification time and the search's " +
      "warnings.");
  input.graph = std::move(graph);
  return input;
}

}  // namespace

SearchRecord FindSearch(ProfileStore& store, const SearchQuery& query, const std::string& db_path) {
  std::vector<SearchRecord> searches = store.Searches();
  if (query.id > 0) {
    for (SearchRecord& search : searches) {
      if (search.id == query.id) return std::move(search);
    }
    throw NoSuchSearch("no search with id " + std::to_string(query.id) + " in " + db_path +
                       " (see ios-db searches)");
  }
  std::map<std::string, std::string> names;  // device name by fingerprint
  for (const DeviceRow& device : store.Devices()) names[device.fingerprint] = device.name;
  const SearchRecord* latest = nullptr;
  for (const SearchRecord& search : searches) {
    const auto name = names.find(search.device_fingerprint);
    const bool device = query.device.empty() || search.device_fingerprint == query.device ||
                        (name != names.end() && name->second == query.device);
    if (search.model == query.model && (query.batch == 0 || search.batch_size == query.batch) &&
        device && (latest == nullptr || search.id > latest->id)) {
      latest = &search;
    }
  }
  if (latest == nullptr) {
    std::string what = "no search of model '" + query.model + "'";
    if (query.batch > 0) what += " at batch " + std::to_string(query.batch);
    if (!query.device.empty()) what += " on device '" + query.device + "'";
    throw NoSuchSearch(what + " in " + db_path + " (see ios-db searches)");
  }
  return *latest;
}

report::ReportInput StoredReportInput(ProfileStore& store, const SearchRecord& search,
                                      const Renderer& renderer) {
  const json schedule = ParseColumn(search, search.schedule_json, "schedule JSON");
  Graph graph = GraphOf(search, schedule);
  if (search.report_json.empty()) {
    try {
      return PartialReport(store, search, schedule, std::move(graph), renderer);
    } catch (const json::exception& e) {
      // A member of the wrong type (value() on a non-object, say).
      throw Error(SearchName(search) + ": its schedule or settings JSON: " + e.what());
    }
  }
  // FromJson's errors name this source, then the field.
  report::ReportInput input =
      report::FromJson(search.report_json, SearchName(search) + "'s stored report");
  input.graph = std::move(graph);
  return input;
}

std::string RenderStoredReport(ProfileStore& store, const SearchRecord& search,
                               const Renderer& renderer) {
  const report::ReportInput input = StoredReportInput(store, search, renderer);
  try {
    return report::RenderHtml(input);
  } catch (const Error& e) {
    throw Error(SearchName(search) + ": its report does not fit its graph: " + e.what());
  }
}

}  // namespace ios::db
