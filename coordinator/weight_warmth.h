// Whether a whole run of a network leaves its weights in the cache: what a
// search measuring StageProtocol::kExecuted stages tells the device
// (MeasureSettings::warm_weights; docs/execution.md, "How a stage is
// measured").
#pragma once

#include <cstdint>

#include "common/graph.h"
#include "common/measurement.h"

namespace ios::coordinator {

//! What a network keeps in the cache across a whole run, in float32 bytes.
struct NetworkFootprint {
  //! Every convolution's kernel and bias, chains' included.
  int64_t weight_bytes = 0;
  //! The most bytes one operator reads and writes at the batch size (its
  //! inputs' slices and its output; a chain: every element's output too).
  int64_t largest_step_bytes = 0;
};

//! The footprint of `graph` (shapes inferred) at `batch_size`. Throws
//! ios::Error naming the node when an input does not resolve.
NetworkFootprint FootprintOf(const Graph& graph, int batch_size);

//! The rule: a network's weights stay warm when all of them and its
//! largest step's activations fit the cache together, so no step of a run
//! evicts a weight before the next run reads it. `cache_bytes` 0 (unknown):
//! cold, the dearer assumption.
bool WeightsStayWarm(const NetworkFootprint& footprint, int64_t cache_bytes);

//! For kExecuted settings, sets `settings.warm_weights` by WeightsStayWarm
//! for `graph` at `batch_size` against `cache_bytes`, logs the figures and
//! returns true; leaves other settings alone and returns false.
bool DecideWeightWarmth(const Graph& graph, int batch_size, int64_t cache_bytes,
                        MeasureSettings& settings);
//! The same against the cache of the measuring `device`
//! (devices::StageCostFacts::cache_bytes). Part of the settings' key: a
//! search decides it before it looks anything up.
bool DecideWeightWarmth(const Graph& graph, int batch_size, const DeviceInfo& device,
                        MeasureSettings& settings);

}  // namespace ios::coordinator
