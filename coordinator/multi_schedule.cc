#include "coordinator/multi_schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/printable.h"

namespace ios::coordinator {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr const char* kFormat = "ios-farm-multi/v1";

std::string DeviceText(int d) { return "device " + std::to_string(d); }

std::string StageText(int d, int k) { return DeviceText(d) + " stage " + std::to_string(k); }

// Where each operator runs: its device, stage, group and place in the group.
struct Place {
  int device = -1, stage = -1, group = -1, position = -1;
};

std::vector<Place> PlaceOperators(const Graph& graph, const MultiDeviceSchedule& q,
                                  const std::string& where) {
  const auto n = static_cast<NodeId>(graph.nodes.size());
  std::vector<Place> place(graph.nodes.size());
  for (size_t d = 0; d < q.stages.size(); ++d) {
    for (size_t k = 0; k < q.stages[d].size(); ++k) {
      const Stage& stage = q.stages[d][k];
      const std::string at = where + ": " + StageText(static_cast<int>(d), static_cast<int>(k));
      if (stage.groups.empty()) throw Error(at + ": empty stage");
      std::vector<NodeId> members;
      for (size_t g = 0; g < stage.groups.size(); ++g) {
        if (stage.groups[g].empty()) throw Error(at + ": group " + std::to_string(g) + " is empty");
        for (size_t i = 0; i < stage.groups[g].size(); ++i) {
          const NodeId id = stage.groups[g][i];
          if (id <= 0 || id >= n) {
            throw Error(at + ": operator #" + std::to_string(id) + " does not exist");
          }
          const std::string node = "node " + Quoted(graph.node(id).name);
          Place& p = place[static_cast<size_t>(id)];
          if (p.device != -1) {
            throw Error(at + ": " + node + " is scheduled twice (also " +
                        StageText(p.device, p.stage) + ")");
          }
          if (q.device_of[static_cast<size_t>(id)] != static_cast<int>(d)) {
            throw Error(at + ": " + node + " is on " +
                        DeviceText(q.device_of[static_cast<size_t>(id)]) +
                        " by device_of, not on this device");
          }
          p = {static_cast<int>(d), static_cast<int>(k), static_cast<int>(g), static_cast<int>(i)};
          members.push_back(id);
        }
      }
      if (stage.strategy == Strategy::kMerge && members.size() > 1 && !CanMerge(graph, members)) {
        throw Error(at + ": a merge stage whose operators cannot be merged");
      }
    }
  }
  for (NodeId id = 1; id < n; ++id) {
    if (place[static_cast<size_t>(id)].device == -1) {
      throw Error(where + ": node " + Quoted(graph.node(id).name) + " is in no stage of " +
                  DeviceText(q.device_of[static_cast<size_t>(id)]));
    }
  }
  return place;
}

// A stage of the stage graph waits for another: the previous stage of its
// device (producer -1), or a tensor from another device.
struct Wait {
  int stage = 0;  // global stage index
  NodeId producer = -1;
};

// Kahn over the stages; on a cycle, throws naming it.
void CheckAcyclic(const Graph& graph, const MultiDeviceSchedule& q, const std::vector<Place>& place,
                  const std::string& where) {
  std::vector<int> first(q.stages.size() + 1, 0);
  for (size_t d = 0; d < q.stages.size(); ++d) {
    first[d + 1] = first[d] + static_cast<int>(q.stages[d].size());
  }
  const auto total = static_cast<size_t>(first.back());
  std::vector<std::vector<Wait>> waits(total);
  std::vector<std::pair<int, int>> of(total);  // global index -> (device, stage)
  for (size_t d = 0; d < q.stages.size(); ++d) {
    for (int k = 0; k < static_cast<int>(q.stages[d].size()); ++k) {
      const int s = first[d] + k;
      of[static_cast<size_t>(s)] = {static_cast<int>(d), k};
      if (k > 0) waits[static_cast<size_t>(s)].push_back({s - 1, -1});
    }
  }
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Place& c = place[static_cast<size_t>(id)];
    for (const Term& term : graph.node(id).inputs) {
      for (const Slice& slice : term) {
        if (slice.producer == 0) continue;
        const Place& p = place[static_cast<size_t>(slice.producer)];
        if (p.device == c.device) continue;
        waits[static_cast<size_t>(first[static_cast<size_t>(c.device)] + c.stage)].push_back(
            {first[static_cast<size_t>(p.device)] + p.stage, slice.producer});
      }
    }
  }
  std::vector<int> pending(total, 0);
  std::vector<std::vector<int>> next(total);
  for (size_t s = 0; s < total; ++s) {
    pending[s] = static_cast<int>(waits[s].size());
    for (const Wait& w : waits[s])
      next[static_cast<size_t>(w.stage)].push_back(static_cast<int>(s));
  }
  std::vector<int> ready;
  for (size_t s = 0; s < total; ++s) {
    if (pending[s] == 0) ready.push_back(static_cast<int>(s));
  }
  size_t done = 0;
  while (!ready.empty()) {
    const int s = ready.back();
    ready.pop_back();
    ++done;
    for (int t : next[static_cast<size_t>(s)]) {
      if (--pending[static_cast<size_t>(t)] == 0) ready.push_back(t);
    }
  }
  if (done == total) return;
  // Every stage left waits for another stage left: walk those waits until
  // one repeats, then name the cycle from there.
  int s = 0;
  while (pending[static_cast<size_t>(s)] == 0) ++s;
  std::vector<int> seen_at(total, -1);
  std::vector<Wait> walk;
  while (seen_at[static_cast<size_t>(s)] < 0) {
    seen_at[static_cast<size_t>(s)] = static_cast<int>(walk.size());
    for (const Wait& w : waits[static_cast<size_t>(s)]) {
      if (pending[static_cast<size_t>(w.stage)] > 0) {
        walk.push_back(w);
        s = w.stage;
        break;
      }
    }
  }
  const auto [d0, k0] = of[static_cast<size_t>(s)];
  std::string text = StageText(d0, k0);
  for (size_t i = static_cast<size_t>(seen_at[static_cast<size_t>(s)]); i < walk.size(); ++i) {
    const auto [d, k] = of[static_cast<size_t>(walk[i].stage)];
    text += walk[i].producer < 0 ? " runs after " + StageText(d, k)
                                 : " waits for " + Quoted(graph.node(walk[i].producer).name) +
                                       " from " + StageText(d, k);
    if (i + 1 < walk.size()) text += ", which";
  }
  throw Error(where +
              ": the devices would wait on each other for ever (a cycle of stages): " + text);
}

}  // namespace

void CheckMultiSchedule(const Graph& graph, const MultiDeviceSchedule& q,
                        const std::string& where) {
  if (q.devices.empty()) throw Error(where + ": devices: none");
  for (size_t d = 0; d < q.devices.size(); ++d) {
    if (q.devices[d].empty())
      throw Error(where + ": devices[" + std::to_string(d) + "]: empty name");
  }
  if (q.stages.size() != q.devices.size()) {
    throw Error(where + ": stages: " + std::to_string(q.stages.size()) + " stage lists for " +
                std::to_string(q.devices.size()) + " devices");
  }
  if (q.device_of.size() != graph.nodes.size()) {
    throw Error(where + ": device_of: " + std::to_string(q.device_of.size()) +
                " entries for a graph of " + std::to_string(graph.nodes.size()) + " nodes");
  }
  if (q.device_of[0] != -1) {
    throw Error(where + ": device_of: the input " + Quoted(graph.node(0).name) +
                " is given to every device that reads it, not placed (-1), got " +
                std::to_string(q.device_of[0]));
  }
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const int d = q.device_of[static_cast<size_t>(id)];
    if (d < 0 || d >= static_cast<int>(q.devices.size())) {
      throw Error(where + ": device_of: node " + Quoted(graph.node(id).name) + " is on device " +
                  std::to_string(d) + ", not one of the " + std::to_string(q.devices.size()));
    }
  }
  const std::vector<Place> place = PlaceOperators(graph, q, where);
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Place& c = place[static_cast<size_t>(id)];
    for (const Term& term : graph.node(id).inputs) {
      for (const Slice& slice : term) {
        if (slice.producer == 0) continue;
        const Place& p = place[static_cast<size_t>(slice.producer)];
        if (p.device != c.device) continue;
        const bool merge =
            q.stages[static_cast<size_t>(c.device)][static_cast<size_t>(c.stage)].strategy ==
            Strategy::kMerge;
        const bool before = p.stage < c.stage || (p.stage == c.stage && p.group == c.group &&
                                                  p.position < c.position && !merge);
        if (!before) {
          throw Error(where + ": " + StageText(c.device, c.stage) + ": node " +
                      Quoted(graph.node(id).name) + " does not run after its producer " +
                      Quoted(graph.node(slice.producer).name) + " (" +
                      StageText(p.device, p.stage) + ")");
        }
      }
    }
  }
  CheckAcyclic(graph, q, place, where);
}

std::vector<Transfer> MultiTransfers(const Graph& graph, const MultiDeviceSchedule& q,
                                     int batch_size) {
  std::vector<Transfer> transfers;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Node& node = graph.node(id);
    for (const Term& term : node.inputs) {
      for (const Slice& slice : term) {
        if (slice.producer == 0) continue;
        const int from = q.device_of.at(static_cast<size_t>(slice.producer));
        const int to = q.device_of.at(static_cast<size_t>(id));
        if (from == to) continue;
        const Shape& s = graph.node(slice.producer).output;
        transfers.push_back({slice.producer, from, to,
                             int64_t{4} * batch_size * int64_t{s.c} * int64_t{s.h} * s.w});
      }
    }
  }
  std::sort(transfers.begin(), transfers.end(), [](const Transfer& a, const Transfer& b) {
    return std::pair(a.producer, a.to) < std::pair(b.producer, b.to);
  });
  transfers.erase(std::unique(transfers.begin(), transfers.end()), transfers.end());
  return transfers;
}

MultiDeviceSchedule SingletonMultiSchedule(const Graph& graph, std::vector<int> device_of,
                                           int devices) {
  MultiDeviceSchedule q;
  q.devices.resize(static_cast<size_t>(std::max(devices, 0)));
  q.stages.resize(q.devices.size());
  for (NodeId id = 1; id < static_cast<NodeId>(device_of.size()); ++id) {
    const int d = device_of[static_cast<size_t>(id)];
    if (d < 0 || d >= devices) {
      throw Error("SingletonMultiSchedule: node " + Quoted(graph.node(id).name) + " on device " +
                  std::to_string(d) + " of " + std::to_string(devices));
    }
    q.stages[static_cast<size_t>(d)].push_back({Strategy::kParallel, {{id}}});
  }
  q.device_of = std::move(device_of);
  return q;
}

namespace {

ordered_json NumberOrNull(const std::optional<double>& x) {
  return x && std::isfinite(*x) ? ordered_json(*x) : ordered_json(nullptr);
}

ordered_json TransfersJson(const Graph& graph, const std::vector<Transfer>& transfers) {
  ordered_json list = ordered_json::array();
  for (const Transfer& t : transfers) {
    list.push_back({{"producer", graph.node(t.producer).name},
                    {"from", t.from},
                    {"to", t.to},
                    {"bytes", t.bytes}});
  }
  return list;
}

}  // namespace

std::string MultiScheduleToJson(const Graph& graph, const MultiDeviceSchedule& q,
                                const MultiScheduleInfo& info) {
  CheckMultiSchedule(graph, q, "multi-device schedule of " + graph.name);
  ordered_json doc = ordered_json::object();
  doc["format"] = kFormat;
  doc["model"] = info.model;
  doc["batch_size"] = info.batch_size;
  doc["mapper"] = info.mapper;
  doc["window"] = info.window;
  doc["streams"] = info.streams;
  doc["simulated"] = info.simulated;
  doc["predicted_ms"] = NumberOrNull(info.predicted_ms);
  doc["baselines"] = {{"single_device_ms", NumberOrNull(info.single_device_ms)},
                      {"sequential_ms", NumberOrNull(info.sequential_ms)}};
  doc["devices"] = q.devices;
  ordered_json device_of = ordered_json::object();
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    device_of[graph.node(id).name] = q.device_of[static_cast<size_t>(id)];
  }
  doc["device_of"] = std::move(device_of);
  ordered_json stages = ordered_json::array();
  for (const std::vector<Stage>& list : q.stages) {
    ordered_json device = ordered_json::array();
    for (const Stage& stage : list) {
      ordered_json groups = ordered_json::array();
      for (const auto& group : stage.groups) {
        ordered_json names = ordered_json::array();
        for (NodeId id : group) names.push_back(graph.node(id).name);
        groups.push_back(std::move(names));
      }
      device.push_back({{"strategy", ToString(stage.strategy)}, {"groups", std::move(groups)}});
    }
    stages.push_back(std::move(device));
  }
  doc["stages"] = std::move(stages);
  doc["transfers"] = TransfersJson(graph, MultiTransfers(graph, q, info.batch_size));
  doc["graph"] = ordered_json::parse(ToIosJson(graph));
  return doc.dump(2) + "\n";
}

bool IsMultiScheduleFile(const std::string& path) {
  try {
    const json doc = json::parse(ReadJsonInputFile(path, "schedule"));
    return doc.is_object() && doc.contains("format") && doc["format"] == kFormat;
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

std::optional<double> OptionalNumber(const json& object, const char* field,
                                     const std::string& where) {
  if (!object.contains(field) || object[field].is_null()) return std::nullopt;
  if (!object[field].is_number()) throw Error(where + ": " + field + ": not a number");
  return object[field].get<double>();
}

NodeId OperatorNamed(const Graph& graph, const std::string& name, const std::string& where) {
  const std::optional<NodeId> id = graph.Find(name);
  if (!id) throw Error(where + ": unknown operator " + Quoted(name));
  if (*id == 0) {
    throw Error(where + ": " + Quoted(name) +
                " is the network input, given to every device that reads it, not placed");
  }
  return *id;
}

}  // namespace

LoadedMultiSchedule LoadMultiSchedule(const std::string& path) {
  const std::string text = ReadJsonInputFile(path, "schedule");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kFormat) {
    throw Error(path + ": format: expected \"" + kFormat + "\"");
  }
  LoadedMultiSchedule loaded;
  MultiDeviceSchedule& q = loaded.schedule;
  MultiScheduleInfo& info = loaded.info;
  try {
    if (!doc.contains("graph")) throw Error(path + ": graph: missing field");
    loaded.graph = ParseIosJson(doc["graph"].dump(), path + " (graph)").graph;
    const Graph& graph = loaded.graph;
    info.model = doc.value("model", graph.name);
    info.batch_size = doc.value("batch_size", 1);
    if (info.batch_size < 1) throw Error(path + ": batch_size: must be >= 1");
    info.mapper = doc.value("mapper", "");
    info.window = doc.value("window", 0);
    info.streams = doc.value("streams", 0);
    info.simulated = doc.value("simulated", false);
    info.predicted_ms = OptionalNumber(doc, "predicted_ms", path);
    if (doc.contains("baselines") && doc["baselines"].is_object()) {
      info.single_device_ms = OptionalNumber(doc["baselines"], "single_device_ms", path);
      info.sequential_ms = OptionalNumber(doc["baselines"], "sequential_ms", path);
    }
    q.devices = doc.at("devices").get<std::vector<std::string>>();
    q.device_of.assign(graph.nodes.size(), -2);
    q.device_of[0] = -1;
    for (const auto& [name, device] : doc.at("device_of").items()) {
      const NodeId id = OperatorNamed(graph, name, path + ": device_of");
      q.device_of[static_cast<size_t>(id)] = device.get<int>();
    }
    for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
      if (q.device_of[static_cast<size_t>(id)] == -2) {
        throw Error(path + ": device_of: node " + Quoted(graph.node(id).name) + " has no device");
      }
    }
    const json& lists = doc.at("stages");
    if (!lists.is_array()) throw Error(path + ": stages: expected a list per device");
    for (size_t d = 0; d < lists.size(); ++d) {
      q.stages.emplace_back();
      for (size_t k = 0; k < lists[d].size(); ++k) {
        const json& js = lists[d].at(k);
        const std::string at = path + ": " + StageText(static_cast<int>(d), static_cast<int>(k));
        const std::string strategy = js.at("strategy").get<std::string>();
        if (strategy != "parallel" && strategy != "merge") {
          throw Error(at + ": unknown strategy " + Quoted(strategy));
        }
        Stage stage{strategy == "merge" ? Strategy::kMerge : Strategy::kParallel, {}};
        for (const auto& group : js.at("groups").get<std::vector<std::vector<std::string>>>()) {
          std::vector<NodeId> ids;
          for (const std::string& name : group) ids.push_back(OperatorNamed(graph, name, at));
          stage.groups.push_back(std::move(ids));
        }
        q.stages.back().push_back(std::move(stage));
      }
    }
    CheckMultiSchedule(graph, q, path);
    if (doc.contains("transfers")) {
      const std::vector<Transfer> derived = MultiTransfers(graph, q, info.batch_size);
      const json expected = json::parse(TransfersJson(graph, derived).dump());
      const json& listed = doc["transfers"];
      if (listed != expected) {
        size_t i = 0;
        while (listed.is_array() && i < listed.size() && i < expected.size() &&
               listed[i] == expected[i]) {
          ++i;
        }
        const std::string want = i < expected.size() ? expected[i].dump() : "no more";
        throw Error(path + ": transfers[" + std::to_string(i) + "]: expected " + want + " (" +
                    std::to_string(derived.size()) +
                    " copies follow from device_of at batch size " +
                    std::to_string(info.batch_size) + "); remove the list to have it derived");
      }
    }
  } catch (const json::exception& e) {
    throw Error(path + ": unexpected structure (" + e.what() + ")");
  }
  return loaded;
}

}  // namespace ios::coordinator
