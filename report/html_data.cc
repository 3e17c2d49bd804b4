// The checks RenderHtml makes and the data blob its page draws from.
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "report/html_parts.h"
#include "report/layout.h"

namespace ios::report::detail {
namespace {

using nlohmann::json;

json Ms(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// Coordinates need no more than a microsecond's precision; rounding keeps
// the blob of a 2,000-operator report small.
json Round(double v) {
  if (!std::isfinite(v)) return nullptr;
  return std::round(v * 1e6) / 1e6;
}

std::string Where(const std::string& path, const char* field, size_t i) {
  return path + "." + field + "[" + std::to_string(i) + "]";
}

// Checks that `stages` name operators of `graph`, counting each in `seen`.
void CheckStages(const Graph& graph, const std::vector<StageRow>& stages, const std::string& path,
                 std::vector<int>& seen) {
  const int n = static_cast<int>(graph.nodes.size());
  for (size_t k = 0; k < stages.size(); ++k) {
    const StageRow& stage = stages[k];
    const std::string at = Where(path, "stages", k);
    if (stage.groups.empty())
      throw Error("report: " + at + ".groups: empty (a stage runs something)");
    if (!graph.blocks.empty() &&
        (stage.block < 0 || stage.block >= static_cast<int>(graph.blocks.size()))) {
      throw Error("report: " + at + ".block: " + std::to_string(stage.block) +
                  " is not a block of graph " + graph.name + " (0.." +
                  std::to_string(graph.blocks.size() - 1) + ")");
    }
    for (size_t g = 0; g < stage.groups.size(); ++g) {
      if (stage.groups[g].empty()) {
        throw Error("report: " + Where(at, "groups", g) + ": empty group");
      }
      for (size_t i = 0; i < stage.groups[g].size(); ++i) {
        const NodeId v = stage.groups[g][i];
        const std::string field = Where(at, "groups", g) + "[" + std::to_string(i) + "]";
        if (v < 1 || v >= n) {
          throw Error("report: " + field + ": node " + std::to_string(v) +
                      " is not an operator of graph " + graph.name + " (1.." +
                      std::to_string(n - 1) + ")");
        }
        if (++seen[static_cast<size_t>(v)] > 1) {
          throw Error("report: " + field + ": operator " + graph.node(v).name +
                      " is in two stages");
        }
      }
    }
  }
}

void CheckCovered(const Graph& graph, const std::vector<int>& seen, const std::string& path) {
  for (size_t v = 1; v < seen.size(); ++v) {
    if (seen[v] == 0) {
      throw Error("report: " + path + ": operator " + graph.nodes[v].name + " (node " +
                  std::to_string(v) + ") is in no stage");
    }
  }
}

json StageJson(const StageRow& s) {
  return json::array({ToString(s.strategy), s.block, Ms(s.latency_ms), ToString(s.source),
                      s.measured_at, s.key_id, s.error});
}

// Boxes as arrays, not objects: a 2,000-operator schedule has 2,000 of them.
json TimelineJson(const TimelineLayout& t) {
  json stages = json::array(), ops = json::array(), links = json::array();
  for (const StageBox& s : t.stages) {
    stages.push_back({s.device, s.stage, Round(s.start_ms), Round(s.width_ms), s.first_row, s.rows,
                      s.merged ? 1 : 0, s.estimated ? 1 : 0});
  }
  for (const OpBox& o : t.ops) {
    ops.push_back({o.nodes, o.device, o.stage, o.row, Round(o.start_ms), Round(o.width_ms)});
  }
  for (const LinkBox& l : t.links) {
    links.push_back({l.transfer, Round(l.start_ms), Round(l.width_ms)});
  }
  return {{"rows", t.rows},
          {"first_row", t.device_first_row},
          {"dev_rows", t.device_rows},
          {"total", Round(t.total_ms)},
          {"stages", stages},
          {"ops", ops},
          {"links", links}};
}

// What timeline row r is on the device: lane r of every stage with more than
// r lanes. Lane names depend on a stage's lane count (on cuda a lone lane
// runs on stream 0, lane 0 of several on stream 1), so a row can be
// different lanes in different stages; it is then named after the lane count
// most of its stages have (ties: the larger count, the parallel one) and
// marked mixed, and its tip lists every name with its stage count.
// [[label, mixed 0|1, tip], ...] per row.
json RowNamesJson(const ScheduleRow& schedule, int rows, const LaneNames& names) {
  const auto name = [&](int lanes, int lane) {
    const auto it = names.by_count.find(lanes);
    if (it != names.by_count.end() && static_cast<size_t>(lane) < it->second.size() &&
        !it->second[static_cast<size_t>(lane)].empty()) {
      return it->second[static_cast<size_t>(lane)];
    }
    return "lane " + std::to_string(lane);
  };
  json out = json::array();
  for (int r = 0; r < rows; ++r) {
    std::map<int, int> stages_with;  // lane count -> stages that have row r
    for (const StageRow& stage : schedule.stages) {
      const int lanes =
          stage.strategy == Strategy::kMerge ? 1 : static_cast<int>(stage.groups.size());
      if (lanes > r) ++stages_with[lanes];
    }
    int common = 0, most = -1;
    std::map<std::string, int> by_name;  // name -> stages, sorted for a stable tip
    for (const auto& [lanes, count] : stages_with) {
      if (count >= most) common = lanes, most = count;
      by_name[name(lanes, r)] += count;
    }
    std::string tip =
        "row " + std::to_string(r) + " = lane " + std::to_string(r) + " of each stage";
    for (const auto& [label, count] : by_name) {
      tip += "\n" + label + ": " + std::to_string(count) + (count == 1 ? " stage" : " stages");
    }
    out.push_back({stages_with.empty() ? "lane " + std::to_string(r) : name(common, r),
                   by_name.size() > 1 ? 1 : 0, tip});
  }
  return out;
}

json EndToEndJson(const std::optional<EndToEnd>& e) {
  if (!e) return nullptr;
  return {{"median", Ms(e->median_ms)}, {"spread", Ms(e->spread_ms)},
          {"samples", e->samples},      {"how", e->how},
          {"error", e->error},          {"from_db", e->from_db},
          {"at", e->measured_at}};
}

}  // namespace

void CheckInput(const ReportInput& input) {
  const Graph& graph = input.graph;
  if (graph.nodes.empty()) throw Error("report: graph: empty (a report needs the graph)");
  const size_t n = graph.nodes.size();
  if (!input.op_alone_ms.empty() && input.op_alone_ms.size() != n) {
    throw Error("report: op_alone_ms: " + std::to_string(input.op_alone_ms.size()) +
                " entries, expected 0 or one per node (" + std::to_string(n) + ")");
  }
  int returned = 0;
  for (size_t s = 0; s < input.schedules.size(); ++s) {
    const std::string path =
        "schedules[" + std::to_string(s) + "] (" + input.schedules[s].name + ")";
    std::vector<int> seen(n, 0);
    CheckStages(graph, input.schedules[s].stages, path, seen);
    CheckCovered(graph, seen, path);
    returned += input.schedules[s].returned ? 1 : 0;
  }
  if (returned > 1)
    throw Error("report: schedules: " + std::to_string(returned) +
                " marked returned, expected at most 1");
  if (input.multi) {
    std::vector<int> seen(n, 0);
    const auto& devices = input.multi->devices;
    for (size_t d = 0; d < devices.size(); ++d) {
      CheckStages(graph, devices[d].stages, Where("multi", "devices", d), seen);
    }
    CheckCovered(graph, seen, "multi.devices");
    for (size_t t = 0; t < input.multi->transfers.size(); ++t) {
      const TransferRow& transfer = input.multi->transfers[t];
      const int count = static_cast<int>(devices.size());
      const std::string at = "report: " + Where("multi", "transfers", t);
      if (transfer.from < 0 || transfer.from >= count || transfer.to < 0 || transfer.to >= count) {
        throw Error(at + ": devices " + std::to_string(transfer.from) + " -> " +
                    std::to_string(transfer.to) + ", expected 0.." + std::to_string(count - 1));
      }
      if (transfer.producer < 0 || transfer.producer >= static_cast<int>(n)) {
        throw Error(at + ".producer: node " + std::to_string(transfer.producer) +
                    " is not in the graph");
      }
    }
  }
  if (input.matrix) {
    const MatrixView& m = *input.matrix;
    const size_t rows = m.settings.size() + m.extra_rows.size();
    if (m.cells.size() != rows) {
      throw Error("report: matrix.cells: " + std::to_string(m.cells.size()) +
                  " rows, expected one per setting and extra row (" + std::to_string(rows) + ")");
    }
    for (size_t r = 0; r < rows; ++r) {
      if (m.cells[r].size() != m.settings.size()) {
        throw Error("report: matrix.cells[" + std::to_string(r) +
                    "]: " + std::to_string(m.cells[r].size()) +
                    " cells, expected one per setting (" + std::to_string(m.settings.size()) + ")");
      }
    }
  }
}

std::string PageData(const ReportInput& input) {
  const Graph& graph = input.graph;
  const GraphLayout layout = LayOutGraph(graph);
  json ops = json::array();
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    const Node& node = graph.nodes[v];
    const double alone = v < input.op_alone_ms.size() ? input.op_alone_ms[v] : kNoFigure;
    ops.push_back({node.name, KindName(node.op), Describe(node.op), ShapeText(node.output),
                   layout.layer[v], Round(layout.x[v]), Ms(alone)});
  }
  json edges = json::array();
  for (const auto& [from, to] : layout.edges) edges.push_back(from), edges.push_back(to);
  json schedules = json::array();
  for (const ScheduleRow& s : input.schedules) {
    json stages = json::array();
    std::vector<int> stage_of(graph.nodes.size(), -1);
    for (size_t k = 0; k < s.stages.size(); ++k) {
      stages.push_back(StageJson(s.stages[k]));
      for (const auto& group : s.stages[k].groups) {
        for (NodeId v : group) stage_of[static_cast<size_t>(v)] = static_cast<int>(k);
      }
    }
    const TimelineLayout timeline = LayOutTimeline(s, input.op_alone_ms);
    schedules.push_back({{"name", s.name},
                         {"predicted", Ms(s.predicted_ms)},
                         {"measured", EndToEndJson(s.measured)},
                         {"returned", s.returned},
                         {"stages", stages},
                         {"stage_of", stage_of},
                         {"tl", TimelineJson(timeline)},
                         {"rows", RowNamesJson(s, timeline.rows, input.lanes)}});
  }
  json lanes = json::object();
  for (const auto& [count, labels] : input.lanes.by_count) lanes[std::to_string(count)] = labels;
  json data = {{"model", input.model},
               {"device", input.device.name},
               {"simulated", input.device.simulated},
               {"batch", input.batch},
               {"ops", ops},
               {"edges", edges},
               {"layers", layout.layers},
               {"width", layout.width},
               {"schedules", schedules},
               {"lane_kind", input.lanes.kind},
               {"lanes", lanes}};
  if (input.multi) {
    const MultiDeviceView& m = *input.multi;
    json devices = json::array(), transfers = json::array(), stages = json::array();
    for (const DeviceStages& d : m.devices) {
      devices.push_back(d.name);
      json rows = json::array();
      for (const StageRow& s : d.stages) rows.push_back(StageJson(s));
      stages.push_back(rows);
    }
    for (const TransferRow& t : m.transfers) {
      transfers.push_back({t.producer, t.from, t.to, t.bytes});
    }
    data["multi"] = {{"devices", devices},
                     {"stages", stages},
                     {"transfers", transfers},
                     {"predicted", Ms(m.predicted_ms)},
                     {"measured", EndToEndJson(m.measured)},
                     {"kept", m.one_device_kept},
                     {"tl", TimelineJson(LayOutMultiDevice(m, input.op_alone_ms))}};
  }
  // error_handler::replace: a node name that is not valid UTF-8 must not
  // make the whole report fail.
  const std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (char c : text) {
    // These only occur inside JSON strings, where \uXXXX means the same.
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace ios::report::detail
