#include "hios/link.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "common/error.h"

namespace ios::hios {

const char* ToString(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink:
      return "nvlink";
    case LinkKind::kPcie:
      return "pcie";
    case LinkKind::kHost:
      return "host";
    case LinkKind::kGiven:
      return "given";
  }
  return "?";
}

Link PresetLink(LinkKind kind) {
  switch (kind) {
    // NVIDIA V100 datasheet: 25 GB/s each way per NVLink 2.0 link; DGX-1
    // joins most GPU pairs with two. ~10 us: a peer copy's launch and event.
    case LinkKind::kNvlink:
      return {kind, 10, 50};
    // PCIe 3.0 x16 carries 15.75 GB/s each way; peer copies reach ~12.
    case LinkKind::kPcie:
      return {kind, 10, 12};
    // Two memcpys of one tensor through a staging buffer on one socket.
    case LinkKind::kHost:
      return {kind, 2, 5};
    case LinkKind::kGiven:
      break;
  }
  throw Error("link: a given link has no preset figures");
}

Link ParseLink(const std::string& text) {
  for (LinkKind kind : {LinkKind::kNvlink, LinkKind::kPcie, LinkKind::kHost}) {
    if (text == ToString(kind)) return PresetLink(kind);
  }
  double gbps = 0, us = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lf:%lf%c", &gbps, &us, &tail) == 2 && std::isfinite(gbps) &&
      std::isfinite(us) && gbps > 0 && us >= 0) {
    return {LinkKind::kGiven, us, gbps};
  }
  throw Error("link '" + text +
              "': expected nvlink, pcie, host, or GBPS:US (bandwidth > 0 in GB/s, latency >= 0 "
              "in microseconds, e.g. 12:10)");
}

std::string Describe(const Link& link) {
  char text[96];
  std::snprintf(text, sizeof text, "%s (%g GB/s, %g us)", ToString(link.kind), link.gb_per_s,
                link.latency_us);
  return text;
}

}  // namespace ios::hios
