#include "coordinator/schedule_json.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/printable.h"

namespace ios::coordinator {

using nlohmann::json;

namespace {

json NumberOrNull(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

//! The measurement settings recorded in an ios-farm schedule file searched
//! on a real device; nullopt for a simulated one (its settings mean nothing
//! on a real device) or when absent. Throws naming the field when malformed.
std::optional<MeasureSettings> ReadMeasureSettings(const json& doc, const std::string& path) {
  if (!doc.contains("settings") || !doc["settings"].is_object()) return std::nullopt;
  if (doc.contains("device") && doc["device"].is_object() &&
      doc["device"].value("simulated", false)) {
    return std::nullopt;
  }
  const json& js = doc["settings"];
  MeasureSettings settings;
  try {
    settings.warmup = js.at("warmup").get<int>();
    settings.number = js.at("number").get<int>();
    settings.repeat = js.at("repeat").get<int>();
    settings.dtype = js.at("dtype").get<std::string>();
    settings.max_repeat = js.value("max_repeat", 0);
    settings.max_relative_spread = js.value("max_relative_spread", 0.0);
    // A file written before protocols were recorded was measured isolated.
    const std::string protocol = js.value("protocol", std::string("isolated"));
    if (protocol == ToString(StageProtocol::kExecuted)) {
      settings.protocol = StageProtocol::kExecuted;
    } else if (protocol != ToString(StageProtocol::kIsolated)) {
      throw Error(path + ": settings.protocol: '" + protocol + "', expected isolated or executed");
    }
    settings.warm_weights = js.value("warm_weights", false);
  } catch (const json::exception& e) {
    throw Error(path + ": settings: " + e.what());
  }
  return settings;
}

}  // namespace

std::string ScheduleToJson(const Graph& graph, const Schedule& schedule, const ScheduleInfo& info,
                           JsonLayout layout) {
  json doc = json::object();
  doc["format"] = "ios-farm-schedule";
  doc["version"] = 1;
  doc["model"] = info.model;
  doc["device"] = {{"backend", info.device.backend},
                   {"name", info.device.name},
                   {"fingerprint", info.device.fingerprint},
                   {"simulated", info.device.simulated}};
  if (info.device.simulated) {
    doc["note"] = "latencies are simulated by an analytical model, not measured";
  }
  doc["batch_size"] = info.batch_size;
  const SearchOptions& o = info.options;
  doc["settings"] = {{"strategy", ToString(o.dp.strategies)},
                     {"r", o.dp.max_group_size},
                     {"s", o.dp.max_groups},
                     {"max_part_size", o.max_part_size},
                     {"max_dp_states", o.dp.max_states},
                     {"max_dp_transitions", o.dp.max_transitions},
                     {"max_dp_stages", o.dp.max_stages},
                     {"max_search_stages", o.max_search_stages},
                     {"warmup", o.settings.warmup},
                     {"number", o.settings.number},
                     {"repeat", o.settings.repeat},
                     {"max_repeat", o.settings.max_repeat},
                     {"max_relative_spread", o.settings.max_relative_spread},
                     {"dtype", o.settings.dtype},
                     {"protocol", ToString(o.settings.protocol)},
                     {"warm_weights", o.settings.warm_weights}};
  doc["latency_ms"] = NumberOrNull(schedule.latency_ms);
  json baselines = json::object();
  if (info.sequential_ms) baselines["sequential_ms"] = NumberOrNull(*info.sequential_ms);
  if (info.greedy_ms) baselines["greedy_ms"] = NumberOrNull(*info.greedy_ms);
  doc["baselines"] = baselines;
  // Peak activation memory as ios-run plans it at this batch, and the
  // budget or objective the search honoured (docs/memory.md).
  json memory = {
      {"peak_live_bytes", schedule.peak_bytes < 0 ? json(nullptr) : json(schedule.peak_bytes)},
      {"objective", ToString(o.memory.objective)}};
  if (o.memory.budget_bytes > 0) memory["budget_bytes"] = o.memory.budget_bytes;
  doc["memory"] = std::move(memory);
  int stage_count = 0;
  json blocks = json::array();
  for (const auto& block : schedule.blocks) {
    json stages = json::array();
    for (const ScheduledStage& s : block) {
      json groups = json::array();
      for (const auto& group : s.stage.groups) {
        json names = json::array();
        for (NodeId id : group) names.push_back(graph.node(id).name);
        groups.push_back(std::move(names));
      }
      stages.push_back({{"strategy", ToString(s.stage.strategy)},
                        {"groups", std::move(groups)},
                        {"latency_ms", NumberOrNull(s.latency_ms)}});
      ++stage_count;
    }
    blocks.push_back({{"stages", std::move(stages)}});
  }
  doc["stage_count"] = stage_count;
  doc["blocks"] = std::move(blocks);
  // How each part was solved: "exact", "cut" (a part of a block cut by
  // --max-part-size), or for a part over a DP budget "split" (its pieces
  // solved one after another) or "greedy".
  if (!schedule.parts.empty()) {
    json parts = json::array();
    bool exact = true;
    for (const PartSummary& p : schedule.parts) {
      exact = exact && p.schedule == PartSchedule::kExact;
      // A greedy schedule of a whole part that was cut has no piece; of a
      // whole block, no part either.
      parts.push_back({{"block", p.block},
                       {"part", p.part < 0 ? json(nullptr) : json(p.part)},
                       {"piece", p.alternative ? json(nullptr) : json(p.piece)},
                       {"dp", ToString(p.schedule)},
                       {"operators", p.operators},
                       {"first", graph.node(p.first).name},
                       {"last", graph.node(p.last).name}});
    }
    doc["exact"] = exact;
    doc["parts"] = std::move(parts);
  }
  doc["graph"] = json::parse(ToIosJson(graph));
  return layout == JsonLayout::kCompact ? doc.dump() : doc.dump(2) + "\n";
}

namespace {

// Every operator of each block once, in its own block, and after its
// producers: in an earlier stage, or earlier in the same group (a producer
// in another group of the same stage would run concurrently with it).
void CheckCoverage(const Graph& graph, const std::vector<std::vector<Stage>>& blocks,
                   const std::string& path) {
  struct Place {
    int stage = -1, group = -1, position = -1;
  };
  std::vector<Place> place(graph.nodes.size());
  int stage_number = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const std::vector<NodeId> ops = graph.blocks.at(b).Operators();
    for (const Stage& stage : blocks[b]) {
      for (size_t g = 0; g < stage.groups.size(); ++g) {
        for (size_t i = 0; i < stage.groups[g].size(); ++i) {
          const NodeId id = stage.groups[g][i];
          const std::string at =
              path + ": block " + std::to_string(b) + ": node " + Quoted(graph.node(id).name);
          if (place[id].stage != -1) throw Error(at + " is scheduled twice");
          if (std::find(ops.begin(), ops.end(), id) == ops.end()) {
            throw Error(at + " belongs to another block");
          }
          place[id] = {stage_number, static_cast<int>(g), static_cast<int>(i)};
        }
      }
      ++stage_number;
    }
  }
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    if (place[id].stage == -1) {
      throw Error(path + ": node " + Quoted(graph.node(id).name) + " is in no stage");
    }
    for (const Term& term : graph.node(id).inputs) {
      for (const Slice& s : term) {
        if (s.producer == 0) continue;
        const Place& p = place[s.producer];
        const Place& c = place[id];
        const bool before = p.stage < c.stage ||
                            (p.stage == c.stage && p.group == c.group && p.position < c.position);
        if (!before) {
          throw Error(path + ": node " + Quoted(graph.node(id).name) +
                      " does not run after its producer " + Quoted(graph.node(s.producer).name) +
                      " (same stage, different group, or later)");
        }
      }
    }
  }
}

}  // namespace

LoadedSchedule LoadSchedule(const std::string& path) {
  // The model loader's checks: a FIFO, /dev/zero or a huge file is refused
  // before anything is read.
  const std::string text = ReadJsonInputFile(path, "schedule");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(path + ": not valid JSON (" + e.what() + ")");
  }
  LoadedSchedule loaded;
  try {
    std::vector<std::vector<std::vector<std::vector<std::string>>>> names;
    std::vector<std::vector<Strategy>> strategies;
    if (doc.is_object() && doc.value("format", "") == "ios-farm-schedule") {
      loaded.origin = "ios-farm";
      if (!doc.contains("graph")) throw Error(path + ": graph: missing field");
      loaded.graph = ParseIosJson(doc["graph"].dump(), path + " (graph)").graph;
      loaded.settings = ReadMeasureSettings(doc, path);
      const json& blocks = doc.at("blocks");
      for (const json& jb : blocks) {
        names.emplace_back();
        strategies.emplace_back();
        for (const json& js : jb.at("stages")) {
          const std::string strategy = js.at("strategy").get<std::string>();
          if (strategy != "parallel" && strategy != "merge") {
            throw Error(path + ": stages: unknown strategy '" + strategy + "'");
          }
          strategies.back().push_back(strategy == "merge" ? Strategy::kMerge : Strategy::kParallel);
          names.back().push_back(js.at("groups").get<std::vector<std::vector<std::string>>>());
        }
      }
    } else {
      loaded.origin = "ios-reference";
      IosModel model = ParseIosJson(text, path);
      if (!model.HasSchedule()) throw Error(path + ": the file has no stages to evaluate");
      loaded.graph = std::move(model.graph);
      names = std::move(model.stages);
      for (const auto& block : names) strategies.emplace_back(block.size(), Strategy::kParallel);
    }
    if (names.size() != loaded.graph.blocks.size()) {
      throw Error(path + ": " + std::to_string(names.size()) + " scheduled blocks for a graph of " +
                  std::to_string(loaded.graph.blocks.size()));
    }
    for (size_t b = 0; b < names.size(); ++b) {
      std::vector<Stage> stages;
      for (size_t s = 0; s < names[b].size(); ++s) {
        Stage stage{strategies[b][s], {}};
        for (const auto& group : names[b][s]) {
          std::vector<NodeId> ids;
          for (const std::string& name : group) {
            auto id = loaded.graph.Find(name);
            if (!id || *id == 0) {
              throw Error(path + ": block " + std::to_string(b) + " stage " + std::to_string(s) +
                          ": unknown operator " + Quoted(name));
            }
            ids.push_back(*id);
          }
          if (ids.empty()) throw Error(path + ": block " + std::to_string(b) + ": empty group");
          stage.groups.push_back(std::move(ids));
        }
        if (stage.groups.empty()) {
          throw Error(path + ": block " + std::to_string(b) + " stage " + std::to_string(s) +
                      ": empty stage");
        }
        if (stage.strategy == Strategy::kMerge) {
          std::vector<NodeId> all;
          for (const auto& g : stage.groups) all.insert(all.end(), g.begin(), g.end());
          if (!CanMerge(loaded.graph, all)) {
            throw Error(path + ": block " + std::to_string(b) + " stage " + std::to_string(s) +
                        ": these operators cannot be merged");
          }
        }
        stages.push_back(std::move(stage));
      }
      loaded.blocks.push_back(std::move(stages));
    }
  } catch (const json::exception& e) {
    throw Error(path + ": unexpected structure (" + e.what() + ")");
  }
  CheckCoverage(loaded.graph, loaded.blocks, path);
  return loaded;
}

}  // namespace ios::coordinator
