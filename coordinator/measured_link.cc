#include "coordinator/measured_link.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace ios::coordinator {
namespace {

using nlohmann::json;

// The settings key of a link row: no MeasureSettings key looks like it.
constexpr const char* kLinkSettings = "link";

db::NetworkRunKey KeyOf(const DeviceInfo& device, int devices, const LinkQuery& query) {
  return {"ios-link/v1|devices=" + std::to_string(devices) + "|" + query.Key(), device.fingerprint,
          1, kLinkSettings};
}

std::string ToJson(const LinkMeasurement& m) {
  json samples = json::array();
  for (const LinkSample& s : m.samples) samples.push_back({s.bytes, s.median_ms, s.spread_ms});
  return json{{"kind", m.kind},
              {"simulated", m.simulated},
              {"latency_us", m.latency_us},
              {"gb_per_s", m.gb_per_s},
              {"samples", samples}}
      .dump();
}

// A stored row's measurement; nullopt when the row is not one we can read
// (then the link is measured again and the row replaced).
std::optional<LinkMeasurement> FromJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    LinkMeasurement m;
    m.kind = j.at("kind").get<std::string>();
    m.simulated = j.at("simulated").get<bool>();
    m.latency_us = j.at("latency_us").get<double>();
    m.gb_per_s = j.at("gb_per_s").get<double>();
    for (const json& s : j.at("samples")) {
      m.samples.push_back({s.at(0).get<int64_t>(), s.at(1).get<double>(), s.at(2).get<double>()});
    }
    if (!(m.gb_per_s > 0) || !(m.latency_us >= 0)) return std::nullopt;
    return m;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

hios::Link LinkOf(const LinkMeasurement& m) {
  hios::Link link;
  link.kind = hios::LinkKind::kGiven;
  for (hios::LinkKind kind :
       {hios::LinkKind::kNvlink, hios::LinkKind::kPcie, hios::LinkKind::kHost}) {
    if (m.kind == hios::ToString(kind)) link.kind = kind;
  }
  link.latency_us = m.latency_us;
  link.gb_per_s = m.gb_per_s;
  return link;
}

}  // namespace

MeasuredLink MeasureOrReuseLink(db::ProfileStore& store, Measurer& measurer, int devices,
                                const LinkQuery& query) {
  const DeviceInfo& device = measurer.Device();
  const db::NetworkRunKey key = KeyOf(device, devices, query);
  if (const std::optional<db::NetworkRunRow> row = store.LookupNetworkRun(key);
      row && row->result.ok()) {
    if (std::optional<LinkMeasurement> m = FromJson(row->result.detail)) {
      return {LinkOf(*m), std::move(*m), true};
    }
  }
  LinkMeasurement m = measurer.MeasureLink(query);
  if (!m.ok()) {
    throw Error("--link measure: the link between two " + device.name +
                " devices could not be measured: " + m.error_message);
  }
  store.UpsertDevice(device);
  db::NetworkRunRow row;
  row.key = key;
  row.model = kLinkRunModel;
  row.schedule = "link between 2 of " + std::to_string(devices) + " devices";
  row.predicted_ms = NAN;
  row.result.median_ms = m.latency_us / 1000;  // an empty copy's cost
  row.result.samples = static_cast<int>(m.samples.size()) * query.repeats;
  row.result.detail = ToJson(m);
  store.StoreNetworkRun(row);
  return {LinkOf(m), std::move(m), false};
}

std::string FormatMeasuredLink(const MeasuredLink& link) {
  const LinkMeasurement& m = link.measured;
  std::string text;
  char line[200];
  std::snprintf(line, sizeof line, "Link (%s%s): %s, %.3g GB/s, %.3g us latency\n",
                m.simulated ? "simulated" : "measured",
                link.reused ? ", from the profiling DB" : "", m.kind.c_str(), m.gb_per_s,
                m.latency_us);
  text += line;
  text += "         bytes   median ms   spread ms     fit ms\n";
  for (const LinkSample& s : m.samples) {
    std::snprintf(line, sizeof line, "  %12lld  %10.4f  %10.4f  %9.4f\n",
                  static_cast<long long>(s.bytes), s.median_ms, s.spread_ms, link.link.Ms(s.bytes));
    text += line;
  }
  return text;
}

}  // namespace ios::coordinator
