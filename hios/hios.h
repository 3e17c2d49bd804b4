// HIOS end to end: map operators to devices (HIOS-LP or HIOS-MR), then
// merge stages inside each device with the sliding window, every step
// judged by THE evaluator (hios/schedule.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hios/costs.h"
#include "hios/dag.h"
#include "hios/schedule.h"
#include "hios/window.h"

namespace ios::hios {

enum class Mapper { kLp, kMr };
const char* ToString(Mapper mapper);
//! "lp" or "mr"; throws ios::Error naming the text otherwise.
Mapper ParseMapper(const std::string& text);

struct HiosOptions {
  Mapper mapper = Mapper::kLp;
  WindowOptions window;
};

struct HiosResult {
  MultiSchedule mapped;  // singletons in priority order, before the window
  MultiSchedule final;
  double mapped_ms = 0, final_ms = 0;
  //! Every op on device 0 in priority order: what one device gives
  //! without merging. When faster than the mapping, it is what the window
  //! starts from (`one_device_won`): more devices must never cost more.
  double one_device_ms = 0;
  bool one_device_won = false;
  double map_s = 0, window_s = 0;  // wall time of each phase
};

//! Called with every multi-op stage the window may price
//! (WindowCandidates) before the window runs: the farm measures them.
using PrefetchFn = std::function<void(const std::vector<std::vector<OpId>>&)>;

//! Throws ios::Error on a bad option. Thread-compatible.
HiosResult Schedule(const Dag& dag, const Costs& costs, const HiosOptions& options,
                    const PrefetchFn& prefetch = {});

}  // namespace ios::hios
