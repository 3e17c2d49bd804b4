// What the farm knows of the link between two devices of one class: the
// query that times copies over it, the times per size, and the figures of
// the line latency + bytes / bandwidth fitted to them (hios::Link prices
// copies with those). Shared by backends, the wire protocol and the DB.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/measurement.h"

namespace ios {

//! How to time a link: copies of each size, `repeats` timed runs each.
struct LinkQuery {
  std::vector<int64_t> bytes;  // each in [1, kMaxLinkBytes]
  int repeats = 5;
  //! 1 KiB to 64 MiB in powers of 4 (9 sizes), 5 repeats.
  static LinkQuery Default();
  //! "r5-1024,4096,..." : the query's part of a stored link's key.
  std::string Key() const;
};

//! The largest copy a link query may ask for (a worker allocates it twice
//! and a staging buffer beside).
inline constexpr int64_t kMaxLinkBytes = int64_t{1} << 30;
inline constexpr int kMaxLinkSizes = 64;
inline constexpr int kMaxLinkRepeats = 1000;

//! One size's copies: the median and spread (max - min) of the repeats.
struct LinkSample {
  int64_t bytes = 0;
  double median_ms = 0;
  double spread_ms = 0;
};

//! A link as a worker announces it (schema::Hello): its kind ("nvlink",
//! "pcie", "host", "given"), figures, and whether they were measured here
//! or come from a model or preset.
struct LinkFigures {
  std::string kind;
  double gb_per_s = 0;  // 1e9 bytes per second
  double latency_us = 0;
  bool measured = false;
};

//! A backend's answer to a LinkQuery. A failure is a value (error set), as
//! for MeasureResult: the worker sends it back like any other answer.
struct LinkMeasurement {
  MeasureError error = MeasureError::kNone;
  std::string error_message;
  std::string kind;                     // what the figures describe, as LinkFigures::kind
  bool simulated = false;               // true: the figures are a model's, not timings
  std::vector<LinkSample> samples;      // one per size of the query, in its order
  double latency_us = 0, gb_per_s = 0;  // fitted (simulated: the model's)
  bool ok() const { return error == MeasureError::kNone; }
  //! The answer to a backend that cannot time links.
  static LinkMeasurement Unsupported(const std::string& why);
};

//! The fitted line: milliseconds = latency_us / 1000 + bytes / (gb_per_s * 1e6).
struct LinkFit {
  double latency_us = 0;
  double gb_per_s = 0;
};

//! Least squares of median_ms against bytes, each sample weighted by
//! 1 / median_ms^2 (relative residuals: small copies, which decide the
//! latency, count as much as large ones, which decide the bandwidth). A
//! negative intercept (noise on a link whose latency is below the timer's
//! reach) is fitted again through the origin: latency 0. Throws ios::Error
//! naming what was found when the samples do not define a line (fewer than
//! two distinct sizes, a time that is not finite and > 0) or when the time
//! does not grow with the size (bandwidth <= 0).
LinkFit FitLink(std::span<const LinkSample> samples);

}  // namespace ios
