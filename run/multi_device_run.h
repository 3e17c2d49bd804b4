// One inference over several devices (HIOS, issue 23): each device plays its
// part of a multi-device schedule on a thread of its own, and tensors cross
// between devices as real copies through host staging buffers. What
// ios-run does with a multi-device schedule file, as a library.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/measurement.h"
#include "coordinator/multi_schedule.h"
#include "exec/device.h"
#include "exec/weights.h"
#include "run/network_run.h"

namespace ios::run {

struct MultiRunOptions {
  int batch = 1;
  //! Longest a device waits for a tensor from another device before the
  //! run fails naming the copy: a lost copy never hangs a run. A wait
  //! includes the producer's own work, hence the generous default.
  std::chrono::milliseconds transfer_timeout{std::chrono::minutes(2)};
  //! Test seam: copies for which it returns true are never delivered, as
  //! if lost on the way. Null: every copy is delivered.
  std::function<bool(const coordinator::Transfer&)> drop;
};

//! What one device ran.
struct DeviceRunSummary {
  std::string name;
  int operators = 0, stages = 0, steps = 0;
  int received = 0, sent = 0;  // copies
  exec::MemoryPlanSummary memory;
};

struct MultiDeviceExecution {
  std::vector<float> output;  // the network's output, batch x c x h x w
  Shape output_shape;
  std::vector<DeviceRunSummary> devices;
  std::vector<coordinator::Transfer> transfers;
  Timing timing;  // only when timed
};

//! Runs `schedule` of `graph`: device d (`devices[d]`, borrowed; one per
//! schedule.devices) plays schedule.stages[d] as one program
//! (exec::BuildDeviceProgram), prepared and run on a thread of its own
//! pinned to the device's HostCpus(). Before each piece of its stages a
//! device waits for the tensors it reads from other devices and writes
//! them in; after it, it reads out what other devices need and hands it
//! over. A run starts on every device at once, after all have finished the
//! previous one. Writes `input` (batch x input shape) once, runs once and
//! reads the output; then, when `timing` is given, times whole runs (first
//! device starting to last finishing) with the shared protocol. Throws
//! ios::Error when the schedule does not check (coordinator::
//! CheckMultiSchedule), a device cannot run a program in pieces, or a
//! device fails (its message, naming the device) or waits longer than
//! options.transfer_timeout for a copy (naming it); the other devices are
//! stopped first.
MultiDeviceExecution ExecuteMultiDevice(const std::vector<exec::Device*>& devices,
                                        const Graph& graph,
                                        const coordinator::MultiDeviceSchedule& schedule,
                                        const exec::WeightStore& weights,
                                        std::span<const float> input, const MeasureSettings* timing,
                                        const MultiRunOptions& options = {});

//! The cores this process may run on (sched_getaffinity), ascending; never
//! empty.
std::vector<int> ProcessCpus();

//! Device names from ios-run's --devices: ';'-separated names (a name may
//! itself hold ',': "cpu,threads=1"), each either a device name or BASExN,
//! N devices of BASE. For the cpu, "cpuxN" (or "cpu,cache=...xN") gives
//! each of N devices its own share of `cpus`, contiguous and as equal as
//! can be ("cpu,threads=1,cpus=0", "cpu,threads=1,cpus=1" for cpux2 on
//! cores 0 and 1). Throws ios::Error naming the item: an empty one, N
//! outside 1..64, a cpu BASE that sets threads or cpus itself, or more cpu
//! devices than cores.
std::vector<std::string> ExpandDeviceList(const std::string& list, const std::vector<int>& cpus);

}  // namespace ios::run
