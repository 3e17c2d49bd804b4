#include "schema/link_wire.h"

#include <string>

#include "schema/validate.h"

namespace ios::schema::detail {
namespace {

capnp::Text::Reader TextOf(const std::string& text) { return {text.c_str(), text.size()}; }
std::string ReadText(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

void CheckCount(size_t count, size_t max, const std::string& where) {
  if (count > max) {
    throw InvalidField(where + ": " + std::to_string(count) + " entries, at most " +
                       std::to_string(max));
  }
}

}  // namespace

void WriteHello(wire::Hello::Builder out, const Hello& hello) {
  out.setWorkerId(TextOf(hello.worker_id));
  out.setBackend(TextOf(hello.device.backend));
  out.setDeviceName(TextOf(hello.device.name));
  out.setFingerprint(TextOf(hello.device.fingerprint));
  out.setSimulated(hello.device.simulated);
  auto properties = out.initProperties(static_cast<unsigned>(hello.properties.size()));
  for (unsigned i = 0; i < properties.size(); ++i) {
    properties[i].setKey(TextOf(hello.properties[i].first));
    properties[i].setValue(TextOf(hello.properties[i].second));
  }
  out.setCapacity(hello.capacity);
  out.setHeartbeatMs(hello.heartbeat_ms);
  out.setSoftware(TextOf(hello.software));
  out.setDevices(hello.devices);
  auto links = out.initLinks(static_cast<unsigned>(hello.links.size()));
  for (unsigned i = 0; i < links.size(); ++i) {
    const LinkFigures& link = hello.links[i];
    links[i].setKind(TextOf(link.kind));
    links[i].setGbPerS(link.gb_per_s);
    links[i].setLatencyUs(link.latency_us);
    links[i].setMeasured(link.measured);
  }
}

Hello ReadHello(wire::Hello::Reader in) {
  Hello hello;
  hello.worker_id = ReadText(in.getWorkerId());
  hello.device.backend = ReadText(in.getBackend());
  hello.device.name = ReadText(in.getDeviceName());
  hello.device.fingerprint = ReadText(in.getFingerprint());
  hello.device.simulated = in.getSimulated();
  const auto properties = in.getProperties();
  CheckCount(properties.size(), kMaxProperties, "hello.properties");
  hello.properties.reserve(properties.size());
  for (const wire::Property::Reader property : properties) {
    hello.properties.emplace_back(ReadText(property.getKey()), ReadText(property.getValue()));
  }
  hello.capacity = in.getCapacity();
  hello.heartbeat_ms = in.getHeartbeatMs();
  hello.software = ReadText(in.getSoftware());
  hello.devices = in.getDevices();
  const auto links = in.getLinks();
  CheckCount(links.size(), kMaxLinks, "hello.links");
  for (const wire::LinkFigures::Reader link : links) {
    hello.links.push_back(
        {ReadText(link.getKind()), link.getGbPerS(), link.getLatencyUs(), link.getMeasured()});
  }
  return hello;
}

void WriteLinkQuery(wire::LinkQuery::Builder out, const LinkQuery& link) {
  auto bytes = out.initBytes(static_cast<unsigned>(link.bytes.size()));
  for (unsigned i = 0; i < bytes.size(); ++i) bytes.set(i, link.bytes[i]);
  out.setRepeats(link.repeats);
}

LinkQuery ReadLinkQuery(wire::StageQuery::Reader query) {
  if (query.hasStage()) throw InvalidField("query.stage: set beside query.link; expected one");
  const wire::LinkQuery::Reader in = query.getLink();
  const auto bytes = in.getBytes();
  CheckCount(bytes.size(), kMaxLinkSizes, "query.link.bytes");
  LinkQuery link;
  for (const int64_t size : bytes) link.bytes.push_back(size);
  link.repeats = in.getRepeats();
  return link;
}

void WriteLinkResult(wire::LinkResult::Builder out, const LinkMeasurement& link) {
  out.setKind(TextOf(link.kind));
  out.setSimulated(link.simulated);
  out.setLatencyUs(link.latency_us);
  out.setGbPerS(link.gb_per_s);
  auto samples = out.initSamples(static_cast<unsigned>(link.samples.size()));
  for (unsigned i = 0; i < samples.size(); ++i) {
    samples[i].setBytes(link.samples[i].bytes);
    samples[i].setMedianMs(link.samples[i].median_ms);
    samples[i].setSpreadMs(link.samples[i].spread_ms);
  }
}

LinkMeasurement ReadLinkResult(wire::LinkResult::Reader in) {
  LinkMeasurement link;
  link.kind = ReadText(in.getKind());
  link.simulated = in.getSimulated();
  link.latency_us = in.getLatencyUs();
  link.gb_per_s = in.getGbPerS();
  const auto samples = in.getSamples();
  CheckCount(samples.size(), kMaxLinkSizes, "result.ok.link.samples");
  for (const wire::LinkSample::Reader s : samples) {
    link.samples.push_back({s.getBytes(), s.getMedianMs(), s.getSpreadMs()});
  }
  return link;
}

}  // namespace ios::schema::detail
