#include "exec/protocol.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "common/error.h"

namespace ios::exec {
namespace {

struct RepeatWindow {
  double median = 0, spread = 0;
  double Relative() const {
    return median > 0 ? spread / median : std::numeric_limits<double>::infinity();
  }
};

RepeatWindow Summarize(std::vector<double> means) {
  std::sort(means.begin(), means.end());
  const size_t n = means.size();
  const double median = n % 2 == 1 ? means[n / 2] : (means[n / 2 - 1] + means[n / 2]) / 2;
  return {median, means.back() - means.front()};
}

}  // namespace

MeasureResult RunProtocol(const MeasureSettings& settings, const TimedRuns& timed_runs) {
  if (settings.number < 1 || settings.repeat < 1 || settings.warmup < 0) {
    throw Error("measurement settings: number and repeat must be >= 1 and warmup >= 0 (got " +
                settings.Key() + ")");
  }
  if (settings.warmup > 0) timed_runs(settings.warmup);
  const size_t window = static_cast<size_t>(settings.repeat);
  const int cap = std::max(settings.repeat, settings.max_repeat);
  std::vector<double> means;
  means.reserve(static_cast<size_t>(cap));
  MeasureResult result;
  RepeatWindow calmest{0, std::numeric_limits<double>::infinity()};
  bool have_calmest = false;
  for (int taken = 0; taken < cap; ++taken) {
    means.push_back(timed_runs(settings.number) / settings.number);
    result.samples += settings.number;
    if (means.size() < window) continue;
    const RepeatWindow last =
        Summarize({means.end() - static_cast<std::ptrdiff_t>(window), means.end()});
    if (!have_calmest || last.Relative() < calmest.Relative()) {
      calmest = last;
      have_calmest = true;
    }
    // Non-adaptive settings stop at `repeat`; adaptive ones once calm.
    if (cap == settings.repeat || last.Relative() <= settings.max_relative_spread) {
      calmest = last;
      break;
    }
  }
  result.median_ms = calmest.median;
  result.spread_ms = calmest.spread;
  return result;
}

}  // namespace ios::exec
