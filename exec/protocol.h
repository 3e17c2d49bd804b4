// The one measurement protocol every backend uses with its own timer.
#pragma once

#include <functional>

#include "common/measurement.h"

namespace ios::exec {

//! Runs what is being measured `runs` times and returns the elapsed time of
//! all of them in milliseconds, by the backend's own clock (steady_clock on
//! the CPU, CUDA events on a GPU, the model on the sim). May throw; the
//! protocol does not catch.
using TimedRuns = std::function<double(int runs)>;

//! IOS protocol: `settings.warmup` untimed runs (one call), then repeats of
//! `settings.number` runs; the result is the median and the spread (max -
//! min) of the repeat means over a window of the last `settings.repeat`
//! repeats, and the number of timed runs. Adaptive when
//! settings.max_repeat > settings.repeat: repeats continue until the
//! window's spread is at most settings.max_relative_spread of its median or
//! max_repeat repeats were taken; at the cap it reports the calmest window
//! seen (the smallest relative spread). Requires number >= 1, repeat >= 1.
MeasureResult RunProtocol(const MeasureSettings& settings, const TimedRuns& timed_runs);

}  // namespace ios::exec
