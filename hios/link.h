// The price of moving a tensor between two devices: latency + bytes /
// bandwidth, per kind of link. Presets are public figures (docs/hios.md
// cites them), used by simulated devices and when the user names a kind.
#pragma once

#include <cstdint>
#include <string>

namespace ios::hios {

enum class LinkKind { kNvlink, kPcie, kHost, kGiven };

struct Link {
  LinkKind kind = LinkKind::kGiven;
  double latency_us = 0;
  double gb_per_s = 1;  // 1e9 bytes per second
  //! Milliseconds to move `bytes` one way.
  double Ms(int64_t bytes) const {
    return latency_us / 1000 + static_cast<double>(bytes) / (gb_per_s * 1e6);
  }
};

const char* ToString(LinkKind kind);

//! NVLink 2.0 between two V100s (two links: 50 GB/s each way), PCIe 3.0
//! x16 (12 GB/s achieved of 15.75), host memory between core groups of one
//! cpu (a copy into and one out of a staging buffer).
Link PresetLink(LinkKind kind);

//! "nvlink", "pcie", "host", or "GBPS:US" (bandwidth in GB/s, latency in
//! microseconds, e.g. "12:10"). Throws ios::Error naming the text and what
//! is expected.
Link ParseLink(const std::string& text);

//! "nvlink (50 GB/s, 10 us)".
std::string Describe(const Link& link);

}  // namespace ios::hios
