#include "common/link_measurement.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "common/error.h"

namespace ios {

LinkQuery LinkQuery::Default() {
  LinkQuery query;
  for (int64_t bytes = 1024; bytes <= (int64_t{64} << 20); bytes *= 4) query.bytes.push_back(bytes);
  return query;
}

std::string LinkQuery::Key() const {
  std::string key = "r" + std::to_string(repeats) + "-";
  for (size_t i = 0; i < bytes.size(); ++i) key += (i ? "," : "") + std::to_string(bytes[i]);
  return key;
}

LinkMeasurement LinkMeasurement::Unsupported(const std::string& why) {
  LinkMeasurement m;
  m.error = MeasureError::kUnsupported;
  m.error_message = why;
  return m;
}

LinkFit FitLink(std::span<const LinkSample> samples) {
  std::set<int64_t> sizes;
  for (const LinkSample& s : samples) {
    if (!(std::isfinite(s.median_ms) && s.median_ms > 0) || s.bytes <= 0) {
      char text[160];
      std::snprintf(text, sizeof text,
                    "link fit: the copy of %lld bytes took %g ms; expected a size > 0 and a "
                    "finite time > 0",
                    static_cast<long long>(s.bytes), s.median_ms);
      throw Error(text);
    }
    sizes.insert(s.bytes);
  }
  if (sizes.size() < 2) {
    throw Error("link fit: " + std::to_string(sizes.size()) +
                " distinct copy sizes; a latency and a bandwidth need at least 2");
  }
  // Weighted sums in MiB (x) and ms (y): the normal equations of
  // min sum w (a + b x - y)^2 stay well conditioned across 1 KiB .. 1 GiB.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const LinkSample& s : samples) {
    const double x = static_cast<double>(s.bytes) / (1 << 20), y = s.median_ms;
    const double w = 1 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double det = sw * sxx - sx * sx;
  double slope = (sw * sxy - sx * sy) / det;  // ms per MiB
  double intercept = (sy - slope * sx) / sw;  // ms
  if (intercept < 0) {
    slope = sxy / sxx;
    intercept = 0;
  }
  if (!(std::isfinite(slope) && slope > 0)) {
    char text[200];
    std::snprintf(text, sizeof text,
                  "link fit: the copy time does not grow with the size (%g ms per MiB), which "
                  "would be a bandwidth <= 0; the timings are too noisy or the sizes too small",
                  slope);
    throw Error(text);
  }
  // slope ms per MiB: bytes / (gb_per_s * 1e6) ms, so gb_per_s = 2^20 / (slope * 1e6).
  return {intercept * 1000, static_cast<double>(1 << 20) / (slope * 1e6)};
}

}  // namespace ios
