// ReportInput <-> JSON. The graph travels as IOS JSON (common/ios_json.h),
// the format every other file of the project stores graphs in.
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/ios_json.h"
#include "report/report.h"

namespace ios::report {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "ios-farm-report/v1";

// JSON has no NaN: "no figure" is null both ways.
json Ms(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json ToJson(const EndToEnd& e) {
  return {{"median_ms", Ms(e.median_ms)},
          {"spread_ms", Ms(e.spread_ms)},
          {"samples", e.samples},
          {"how", e.how},
          {"error", e.error},
          {"from_db", e.from_db},
          {"measured_at", e.measured_at}};
}

json ToJson(const StageRow& s) {
  return {{"strategy", ToString(s.strategy)},
          {"groups", s.groups},
          {"block", s.block},
          {"latency_ms", Ms(s.latency_ms)},
          {"source", ToString(s.source)},
          {"measured_at", s.measured_at},
          {"key_id", s.key_id},
          {"error", s.error},
          {"start_ms", Ms(s.start_ms)}};
}

json ToJson(const std::vector<StageRow>& stages) {
  json out = json::array();
  for (const StageRow& s : stages) out.push_back(ToJson(s));
  return out;
}

json ToJson(const ScheduleRow& r) {
  json out = {{"name", r.name},
              {"stages", ToJson(r.stages)},
              {"predicted_ms", Ms(r.predicted_ms)},
              {"peak_bytes", r.peak_bytes},
              {"returned", r.returned}};
  if (r.measured) out["measured"] = ToJson(*r.measured);
  return out;
}

json ToJson(const SearchFacts& f) {
  json parts = json::array();
  for (const PartRow& p : f.parts) {
    parts.push_back({{"block", p.block},
                     {"part", p.part},
                     {"piece", p.piece},
                     {"operators", p.operators},
                     {"width", p.width},
                     {"dp", p.dp},
                     {"unused", p.unused},
                     {"states", p.states},
                     {"transitions", p.transitions},
                     {"schedules", p.schedules},
                     {"stages", p.stages},
                     {"measured", p.measured},
                     {"stored", p.stored},
                     {"earlier", p.earlier},
                     {"skipped", p.skipped}});
  }
  return {{"parts", parts},
          {"warnings", f.warnings},
          {"distinct_stages", f.distinct_stages},
          {"stage_occurrences", f.stage_occurrences},
          {"measured", f.measured},
          {"reused", f.reused},
          {"failed", f.failed},
          {"skipped", f.skipped},
          {"lazy_rounds", f.lazy_rounds},
          {"bound_violations", f.bound_violations},
          {"parts_measured_in_full", f.parts_measured_in_full},
          {"enumerate_s", f.enumerate_s},
          {"measure_s", f.measure_s},
          {"solve_s", f.solve_s},
          {"verify_s", f.verify_s},
          {"passes_run", f.passes_run},
          {"passes_planned", f.passes_planned},
          {"measure_mode", f.measure_mode},
          {"settings_key", f.settings_key}};
}

json ToJson(const MultiDeviceView& m) {
  json devices = json::array();
  for (const DeviceStages& d : m.devices) {
    devices.push_back({{"name", d.name}, {"stages", ToJson(d.stages)}});
  }
  json transfers = json::array();
  for (const TransferRow& t : m.transfers) {
    transfers.push_back({{"producer", t.producer},
                         {"from", t.from},
                         {"to", t.to},
                         {"bytes", t.bytes},
                         {"start_ms", Ms(t.start_ms)},
                         {"finish_ms", Ms(t.finish_ms)}});
  }
  json out = {{"devices", devices},
              {"transfers", transfers},
              {"predicted_ms", Ms(m.predicted_ms)},
              {"one_device_kept", m.one_device_kept}};
  if (m.measured) out["measured"] = ToJson(*m.measured);
  return out;
}

json ToJson(const MatrixView& m) {
  json settings = json::array();
  for (const MatrixSetting& s : m.settings) {
    settings.push_back({{"batch", s.batch}, {"device", s.device}, {"simulated", s.simulated}});
  }
  json cells = json::array();
  for (const auto& row : m.cells) {
    json r = json::array();
    for (const MatrixCell& c : row) {
      r.push_back({{"predicted_ms", Ms(c.predicted_ms)},
                   {"measured_ms", Ms(c.measured_ms)},
                   {"source", c.source}});
    }
    cells.push_back(r);
  }
  return {{"settings", settings},
          {"extra_rows", m.extra_rows},
          {"cells", cells},
          {"stages_measured", m.stages_measured},
          {"runs_measured", m.runs_measured}};
}

// Reads one object, naming the path of each field in its errors.
class Reader {
 public:
  Reader(const json& value, std::string path, const std::string& where)
      : value_(value), path_(std::move(path)), where_(where) {
    if (!value_.is_object()) Fail(path_, "expected an object, found " + Found(value_));
  }

  bool Has(const char* key) const { return value_.contains(key); }
  Reader Object(const char* key) const { return Reader(Get(key), Path(key), where_); }
  const json& Array(const char* key) const {
    const json& v = Get(key);
    if (!v.is_array()) Fail(Path(key), "expected an array, found " + Found(v));
    return v;
  }
  std::string Path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& where() const { return where_; }

  // Absent fields keep their default: producers add fields over time.
  template <typename T>
  void Read(const char* key, T& out) const {
    if (!Has(key)) return;
    const json& v = value_.at(key);
    if constexpr (std::is_same_v<T, double>) {
      if (v.is_null()) {
        out = kNoFigure;
        return;
      }
      if (!v.is_number()) Fail(Path(key), "expected a number or null, found " + Found(v));
      out = v.get<double>();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) Fail(Path(key), "expected true or false, found " + Found(v));
      out = v.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) Fail(Path(key), "expected an integer, found " + Found(v));
      out = v.get<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) Fail(Path(key), "expected a string, found " + Found(v));
      out = v.get<std::string>();
    } else {
      try {
        out = v.get<T>();
      } catch (const json::exception&) {
        Fail(Path(key), "expected " + std::string(Expected<T>()) + ", found " + Found(v));
      }
    }
  }

  [[noreturn]] void Fail(const std::string& path, const std::string& what) const {
    throw Error(where_ + ": " + path + ": " + what);
  }

 private:
  template <typename T>
  static const char* Expected() {
    if constexpr (std::is_same_v<T, std::vector<std::string>>) return "an array of strings";
    return "an array of arrays of node ids";
  }
  static std::string Found(const json& v) {
    std::string text = v.dump();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return std::string(v.type_name()) + " " + text;
  }
  const json& Get(const char* key) const {
    if (!Has(key)) Fail(Path(key), "missing");
    return value_.at(key);
  }

  const json& value_;
  std::string path_;
  const std::string& where_;
};

std::string Indexed(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

EndToEnd EndToEndOf(const Reader& r) {
  EndToEnd e;
  r.Read("median_ms", e.median_ms);
  r.Read("spread_ms", e.spread_ms);
  r.Read("samples", e.samples);
  r.Read("how", e.how);
  r.Read("error", e.error);
  r.Read("from_db", e.from_db);
  r.Read("measured_at", e.measured_at);
  return e;
}

// parent[key], an array of objects, read one element at a time, so that an
// error names the element ("search.parts[3].width").
template <typename ReadOne>
auto ArrayOf(const Reader& parent, const char* key, ReadOne read_one) {
  std::vector<decltype(read_one(std::declval<const Reader&>()))> items;
  const json& array = parent.Array(key);
  items.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    items.push_back(read_one(Reader(array[i], Indexed(parent.Path(key), i), parent.where())));
  }
  return items;
}

std::vector<StageRow> StagesOf(const Reader& parent, const char* key) {
  std::vector<StageRow> stages;
  const json& array = parent.Array(key);
  for (size_t i = 0; i < array.size(); ++i) {
    const Reader r(array[i], Indexed(parent.Path(key), i), parent.where());
    StageRow s;
    std::string strategy = "parallel", source = "unpriced";
    r.Read("strategy", strategy);
    if (strategy == "merge") {
      s.strategy = Strategy::kMerge;
    } else if (strategy != "parallel") {
      r.Fail(r.Path("strategy"), "expected \"parallel\" or \"merge\", found \"" + strategy + "\"");
    }
    r.Read("groups", s.groups);
    r.Read("block", s.block);
    r.Read("latency_ms", s.latency_ms);
    r.Read("source", source);
    bool known = false;
    for (Source candidate : {Source::kMeasuredNow, Source::kStored, Source::kSkipped,
                             Source::kFailed, Source::kUnpriced}) {
      if (source == ToString(candidate)) {
        s.source = candidate;
        known = true;
      }
    }
    if (!known) r.Fail(r.Path("source"), "unknown source \"" + source + "\"");
    r.Read("measured_at", s.measured_at);
    r.Read("key_id", s.key_id);
    r.Read("error", s.error);
    r.Read("start_ms", s.start_ms);
    stages.push_back(std::move(s));
  }
  return stages;
}

ScheduleRow ScheduleOf(const Reader& r) {
  ScheduleRow s;
  r.Read("name", s.name);
  s.stages = StagesOf(r, "stages");
  r.Read("predicted_ms", s.predicted_ms);
  r.Read("peak_bytes", s.peak_bytes);
  r.Read("returned", s.returned);
  if (r.Has("measured")) s.measured = EndToEndOf(r.Object("measured"));
  return s;
}

SearchFacts SearchOf(const Reader& r) {
  SearchFacts f;
  f.parts = ArrayOf(r, "parts", [](const Reader& p) {
    PartRow row;
    p.Read("block", row.block);
    p.Read("part", row.part);
    p.Read("piece", row.piece);
    p.Read("operators", row.operators);
    p.Read("width", row.width);
    p.Read("dp", row.dp);
    p.Read("unused", row.unused);
    p.Read("states", row.states);
    p.Read("transitions", row.transitions);
    p.Read("schedules", row.schedules);
    p.Read("stages", row.stages);
    p.Read("measured", row.measured);
    p.Read("stored", row.stored);
    p.Read("earlier", row.earlier);
    p.Read("skipped", row.skipped);
    return row;
  });
  r.Read("warnings", f.warnings);
  r.Read("distinct_stages", f.distinct_stages);
  r.Read("stage_occurrences", f.stage_occurrences);
  r.Read("measured", f.measured);
  r.Read("reused", f.reused);
  r.Read("failed", f.failed);
  r.Read("skipped", f.skipped);
  r.Read("lazy_rounds", f.lazy_rounds);
  r.Read("bound_violations", f.bound_violations);
  r.Read("parts_measured_in_full", f.parts_measured_in_full);
  r.Read("enumerate_s", f.enumerate_s);
  r.Read("measure_s", f.measure_s);
  r.Read("solve_s", f.solve_s);
  r.Read("verify_s", f.verify_s);
  r.Read("passes_run", f.passes_run);
  r.Read("passes_planned", f.passes_planned);
  r.Read("measure_mode", f.measure_mode);
  r.Read("settings_key", f.settings_key);
  return f;
}

MultiDeviceView MultiOf(const Reader& r) {
  MultiDeviceView m;
  m.devices = ArrayOf(r, "devices", [](const Reader& d) {
    DeviceStages row;
    d.Read("name", row.name);
    row.stages = StagesOf(d, "stages");
    return row;
  });
  m.transfers = ArrayOf(r, "transfers", [](const Reader& t) {
    TransferRow row;
    t.Read("producer", row.producer);
    t.Read("from", row.from);
    t.Read("to", row.to);
    t.Read("bytes", row.bytes);
    t.Read("start_ms", row.start_ms);
    t.Read("finish_ms", row.finish_ms);
    return row;
  });
  r.Read("predicted_ms", m.predicted_ms);
  r.Read("one_device_kept", m.one_device_kept);
  if (r.Has("measured")) m.measured = EndToEndOf(r.Object("measured"));
  return m;
}

MatrixView MatrixOf(const Reader& r) {
  MatrixView m;
  m.settings = ArrayOf(r, "settings", [](const Reader& s) {
    MatrixSetting row;
    s.Read("batch", row.batch);
    s.Read("device", row.device);
    s.Read("simulated", row.simulated);
    return row;
  });
  r.Read("extra_rows", m.extra_rows);
  const json& rows = r.Array("cells");
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string row_path = Indexed(r.Path("cells"), i);
    if (!rows[i].is_array()) r.Fail(row_path, "expected an array of cells");
    m.cells.emplace_back();
    for (size_t j = 0; j < rows[i].size(); ++j) {
      const Reader c(rows[i][j], Indexed(row_path, j), r.where());
      MatrixCell cell;
      c.Read("predicted_ms", cell.predicted_ms);
      c.Read("measured_ms", cell.measured_ms);
      c.Read("source", cell.source);
      m.cells.back().push_back(cell);
    }
  }
  r.Read("stages_measured", m.stages_measured);
  r.Read("runs_measured", m.runs_measured);
  return m;
}

}  // namespace

const char* ToString(Source source) {
  switch (source) {
    case Source::kMeasuredNow:
      return "measured";
    case Source::kStored:
      return "stored";
    case Source::kSkipped:
      return "skipped";
    case Source::kFailed:
      return "failed";
    case Source::kUnpriced:
      break;
  }
  return "unpriced";
}

double CellMs(const MatrixCell& cell) {
  return std::isfinite(cell.measured_ms) ? cell.measured_ms : cell.predicted_ms;
}

double Normalised(const MatrixView& matrix, size_t row, size_t column) {
  const double value = CellMs(matrix.cells.at(row).at(column));
  double best = kNoFigure;
  for (const auto& r : matrix.cells) {
    if (column >= r.size()) continue;
    const double v = CellMs(r[column]);
    if (std::isfinite(v) && v > 0 && !(v >= best)) best = v;
  }
  if (!std::isfinite(value) || !std::isfinite(best)) return kNoFigure;
  return value / best;
}

std::string ToJson(const ReportInput& input, bool with_graph) {
  json out = {{"format", kFormat},
              {"title", input.title},
              {"tool", input.tool},
              {"version", input.version},
              {"generated_at", input.generated_at},
              {"model", input.model},
              {"device",
               {{"backend", input.device.backend},
                {"name", input.device.name},
                {"fingerprint", input.device.fingerprint},
                {"simulated", input.device.simulated}}},
              {"batch", input.batch},
              {"notes", input.notes}};
  json alone = json::array();
  for (double v : input.op_alone_ms) alone.push_back(Ms(v));
  out["op_alone_ms"] = alone;
  json schedules = json::array();
  for (const ScheduleRow& s : input.schedules) schedules.push_back(ToJson(s));
  out["schedules"] = schedules;
  if (input.search) out["search"] = ToJson(*input.search);
  if (input.multi) out["multi"] = ToJson(*input.multi);
  if (input.matrix) out["matrix"] = ToJson(*input.matrix);
  json by_count = json::object();
  for (const auto& [count, labels] : input.lanes.by_count) {
    by_count[std::to_string(count)] = labels;
  }
  out["lanes"] = {{"kind", input.lanes.kind}, {"by_count", by_count}};
  if (with_graph && !input.graph.nodes.empty()) {
    out["graph"] = json::parse(ToIosJson(input.graph));
  }
  // A node name that is not valid UTF-8 must not fail the whole report.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

ReportInput FromJson(std::string_view text, const std::string& where) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(where + ": not JSON: " + e.what());
  }
  const Reader r(doc, "", where);
  std::string format;
  r.Read("format", format);
  if (format != kFormat) {
    r.Fail("format", std::string("expected \"") + kFormat + "\", found \"" + format + "\"");
  }
  ReportInput in;
  r.Read("title", in.title);
  r.Read("tool", in.tool);
  r.Read("version", in.version);
  r.Read("generated_at", in.generated_at);
  r.Read("model", in.model);
  if (r.Has("device")) {
    const Reader d = r.Object("device");
    d.Read("backend", in.device.backend);
    d.Read("name", in.device.name);
    d.Read("fingerprint", in.device.fingerprint);
    d.Read("simulated", in.device.simulated);
  }
  r.Read("batch", in.batch);
  r.Read("notes", in.notes);
  if (r.Has("op_alone_ms")) {
    const json& alone = r.Array("op_alone_ms");
    for (size_t i = 0; i < alone.size(); ++i) {
      if (alone[i].is_null()) {
        in.op_alone_ms.push_back(kNoFigure);
      } else if (alone[i].is_number()) {
        in.op_alone_ms.push_back(alone[i].get<double>());
      } else {
        r.Fail(Indexed("op_alone_ms", i), "expected a number or null");
      }
    }
  }
  if (r.Has("schedules")) in.schedules = ArrayOf(r, "schedules", ScheduleOf);
  if (r.Has("search")) in.search = SearchOf(r.Object("search"));
  if (r.Has("multi")) in.multi = MultiOf(r.Object("multi"));
  if (r.Has("matrix")) in.matrix = MatrixOf(r.Object("matrix"));
  if (r.Has("lanes")) {
    const Reader lanes = r.Object("lanes");
    lanes.Read("kind", in.lanes.kind);
    if (lanes.Has("by_count")) {
      const Reader by_count = lanes.Object("by_count");
      for (const auto& [key, labels] : doc["lanes"]["by_count"].items()) {
        int count = 0;
        try {
          count = std::stoi(key);
        } catch (const std::exception&) {
          lanes.Fail(by_count.Path(key.c_str()), "expected a lane count as the key");
        }
        by_count.Read(key.c_str(), in.lanes.by_count[count]);
      }
    }
  }
  if (r.Has("graph")) {
    // ParseIosJson names its own fields; prefix ours so the path is whole.
    in.graph = ParseIosJson(doc["graph"].dump(), where + ": graph").graph;
  }
  return in;
}

}  // namespace ios::report
