// One inference over several devices (HIOS, issue 23): each device plays its
// part of a multi-device schedule on a thread of its own, and tensors cross
// between devices as real copies through host staging buffers; GPUs instead
// play the whole run from one thread with peer copies between their streams
// (devices/cuda/cuda_multi.h). What ios-run does with a multi-device
// schedule file, as a library.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/measurement.h"
#include "coordinator/device_list.h"
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
  //! The devices copied between themselves, the run enqueued from one
  //! thread (cuda: peer copies, events across GPUs); else host staging.
  bool device_copies = false;
  Timing timing;  // only when timed
};

//! Runs `schedule` of `graph`. Where every device is a cuda device, they
//! play the run themselves (devices/cuda/cuda_multi.h): one host thread
//! enqueues every device's stages and the peer copies between them, and
//! times runs by the GPUs' clocks; options.drop and transfer_timeout do not
//! apply (nothing waits on the host). Otherwise device d (`devices[d]`, borrowed; one per
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

// ios-run's --devices grammar lives with ios-coordinator's (one grammar).
using coordinator::ExpandDeviceList;
using coordinator::ProcessCpus;

}  // namespace ios::run
