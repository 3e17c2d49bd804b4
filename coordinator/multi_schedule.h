// A schedule of one inference over several devices (HIOS, issue 23): which
// device runs each operator, each device's stages in run order, and the
// copies between devices that follow from them; and its file,
// "ios-farm-multi/v1" (docs/run.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"

namespace ios::coordinator {

struct MultiDeviceSchedule {
  //! A name per device index ("cpu,threads=1,cpus=0", "sim:v100").
  std::vector<std::string> devices;
  //! Per NodeId: the device index that runs it; -1 for the input node 0,
  //! which every device reading it is given before a run.
  std::vector<int> device_of;
  //! Per device: its stages in run order. Stages are those of a single
  //! device (common/stage.h); HIOS's concurrent stages are kParallel with
  //! one group per operator.
  std::vector<std::vector<Stage>> stages;
};

//! What a multi-device schedule file records besides the schedule.
struct MultiScheduleInfo {
  std::string model;
  int batch_size = 1;
  std::string mapper;  // "lp", "mr", or "" (given by hand)
  int window = 0, streams = 0;
  bool simulated = false;  // the predicted figures come from a model
  std::optional<double> predicted_ms, single_device_ms, sequential_ms;
};

//! One copy of a tensor between devices: the producer's whole output, once
//! per receiving device however many of its operators read it.
struct Transfer {
  NodeId producer = -1;
  int from = -1, to = -1;
  int64_t bytes = 0;  // float32 at the batch size
  friend bool operator==(const Transfer&, const Transfer&) = default;
};

//! The copies `schedule` needs, ordered by producer, then receiving device.
//! Requires device_of to cover the graph (CheckMultiSchedule).
std::vector<Transfer> MultiTransfers(const Graph& graph, const MultiDeviceSchedule& schedule,
                                     int batch_size);

//! Checks that `schedule` can run: device names given, device_of covering
//! the graph (-1 exactly for node 0), every operator in exactly one stage
//! of the device device_of names, each device's stages in dependency order
//! (a producer on the same device in an earlier stage or earlier in the same
//! group), merge stages mergeable, and the graph of stages (each device's
//! run order plus the copies between devices) acyclic: otherwise devices
//! would wait on each other for ever. Throws ios::Error starting with
//! `where` (a file name) and naming the device, stage and node at fault.
void CheckMultiSchedule(const Graph& graph, const MultiDeviceSchedule& schedule,
                        const std::string& where);

//! Each operator alone in a stage, every device's operators in the graph's
//! (topological) order: a schedule by hand for tests and baselines.
//! `device_of` as in MultiDeviceSchedule; device names are left empty for
//! the caller to fill (MultiScheduleToJson refuses empty names).
MultiDeviceSchedule SingletonMultiSchedule(const Graph& graph, std::vector<int> device_of,
                                           int devices);

//! The "ios-farm-multi/v1" file: the graph (IOS JSON, as the single-device
//! file embeds it), device names, device_of by node name, per-device stage
//! lists in the single-device file's stage objects, the transfers at the
//! batch size, and `info`. Throws ios::Error when CheckMultiSchedule fails.
std::string MultiScheduleToJson(const Graph& graph, const MultiDeviceSchedule& schedule,
                                const MultiScheduleInfo& info);

struct LoadedMultiSchedule {
  Graph graph;
  MultiDeviceSchedule schedule;
  MultiScheduleInfo info;
};

//! Whether `path` holds an "ios-farm-multi/v1" document (false for anything
//! else, unreadable files included: the loader that follows says why).
bool IsMultiScheduleFile(const std::string& path);

//! Reads a file MultiScheduleToJson wrote and checks it (CheckMultiSchedule;
//! a "transfers" list, when present, must be the one device_of implies).
//! Throws ios::Error naming the file, the field and what is wrong.
LoadedMultiSchedule LoadMultiSchedule(const std::string& path);

}  // namespace ios::coordinator
