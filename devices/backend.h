// The measurement seam: something that can build a stage and time it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/link_measurement.h"
#include "common/measurement.h"
#include "common/network_spec.h"
#include "common/stage.h"

namespace ios::devices {

//! Builds and times stages on one device. Not thread-safe: one thread owns a
//! backend (a GPU times one stage at a time; concurrent timings corrupt each
//! other).
class Backend {
 public:
  virtual ~Backend() = default;
  //! The device this backend measures on; stable for its lifetime.
  virtual const DeviceInfo& Device() const = 0;
  //! Times `stage` at `batch_size`. Expected failures (out of memory, an
  //! unsupported op) are returned as a result with an error, never thrown.
  //! kTimeout is the worker's own (a measurement it gave up): a backend's
  //! time limit is a kBackendFailure.
  virtual MeasureResult Measure(const StageSpec& stage, int batch_size,
                                const MeasureSettings& settings) = 0;
  //! Times `network` end to end under its schedule at `batch_size`, with
  //! seeded weights and input, the way ios-run runs it (a GPU replays it as
  //! one CUDA graph); settings.protocol does not apply (it is a stage's).
  //! Failures are results, as for Measure. Default: unsupported.
  virtual MeasureResult MeasureNetwork(const NetworkSpec& network, int batch_size,
                                       const MeasureSettings& settings);
  //! Identical devices of Device()'s class this backend owns (a worker's
  //! --devices); a link query needs two.
  virtual int Devices() const { return 1; }
  //! The links between its devices as a worker announces them: measured
  //! figures once MeasureLink has succeeded, else a model's or a preset's;
  //! empty with one device or nothing known. Unlike the rest, safe to call
  //! from any thread while another measures (a worker's hello reads it).
  virtual std::vector<LinkFigures> Links() const { return {}; }
  //! Times copies of each of `query`'s sizes from one of its devices to
  //! another and fits the link's latency and bandwidth (FitLink). Failures
  //! (one device, a fit refused) are values, never thrown. Default:
  //! unsupported.
  virtual LinkMeasurement MeasureLink(const LinkQuery& query);
  //! True once the device can run nothing more in this process (a sticky
  //! CUDA error, exec::DeviceLostError): the worker answers the query that
  //! met it and exits non-zero, so a supervisor starts a fresh process.
  virtual bool Lost() const { return false; }
};

//! Settings a backend may take from the command line.
struct BackendOptions {
  int gpu = 0;  // device ordinal (cuda)
  //! sim only: sleep this long per measurement, standing in for a real
  //! device's cost in scaling benchmarks; reported latencies are unchanged.
  double sim_delay_ms = 0;
  //! Identical devices the backend owns (a worker's --devices): the cpu
  //! splits this process's cores into that many groups, the simulator
  //! models that many GPUs on one link. 1: a single device.
  int devices = 1;
};

//! What a device class tells about every stage it runs, as far as its
//! fingerprint says (lazy measurement bounds unmeasured stages with it,
//! docs/search-cost.md).
struct StageCostFacts {
  //! What every operator costs one after another whatever runs
  //! concurrently, in ms: on the simulator one host thread launches every
  //! kernel of a stage (launch_us each, each operator at least one
  //! kernel). 0: nothing known.
  double serial_op_ms = 0;
  //! How many operators can make progress at once: the cpu backend's
  //! thread budget (a lane never runs faster on fewer threads, and there
  //! are no more threads than that). 0: no limit known (a GPU overlaps
  //! small kernels freely).
  int max_parallelism = 0;
  //! The least time an operator keeps the whole device busy, in ms, given
  //! as a one-operator stage at a batch size: no concurrent stage runs in
  //! less than stage_fixed_ms plus the sum of its operators' work. On the
  //! simulator: its kernels' full-GPU work (concurrent kernels never make
  //! more than one full GPU's progress together, Rates() in devices/sim/sim_model.cc),
  //! and the first launch and the closing synchronisation. Empty: nothing
  //! known (a real device's work would need its peak throughput).
  std::function<double(const StageSpec& op, int batch_size)> operator_work_ms;
  double stage_fixed_ms = 0;
  //! Bytes of the last-level cache one core sees (cpu: from its
  //! fingerprint's llc_kib, read from sysfs); against it the search decides
  //! whether a network's weights stay warm (MeasureSettings::warm_weights).
  //! 0: not known (weights are taken as cold).
  int64_t cache_bytes = 0;
  //! Whether an operator inside a multi-operator group costs at least what
  //! it costs measured alone less the per-stage overhead, so that a group
  //! costs at least the sum of its operators less one overhead per extra
  //! operator (coordinator/stage_bounds.h). True only where the measuring
  //! protocol makes it so: the simulator, whose operators cost the same
  //! wherever they run. Not on the cpu, under either protocol: measured
  //! isolated, an operator alone reads a cold input, one inside a chain the
  //! input just written (chains came out 6-17% below such sums); measured
  //! as executed, 54 of Inception V3's 127 chains still came out below
  //! them, by up to 32% (docs/search-cost.md).
  bool chain_discount_sound = false;
};

}  // namespace ios::devices
