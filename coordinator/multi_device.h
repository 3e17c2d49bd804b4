// One inference over several identical devices (HIOS, issue 23): the
// operators' and the window's stages priced through the farm and the
// profiling DB like any IOS stage, copies priced by a link model, and the
// HIOS schedule turned into the multi-device schedule file's form.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "coordinator/device_list.h"
#include "coordinator/measurer.h"
#include "coordinator/multi_schedule.h"
#include "coordinator/search.h"
#include "db/profile_store.h"
#include "hios/dag.h"
#include "hios/hios.h"
#include "hios/link.h"

namespace ios::coordinator {

struct MultiDeviceOptions {
  int devices = 2;  // identical devices of the measurer's class
  //! Their names in the schedule file (empty: the measurer's device name,
  //! repeated): cpu core groups differ in their cpus=.
  std::vector<std::string> names;
  hios::HiosOptions hios;
  hios::Link link = hios::PresetLink(hios::LinkKind::kNvlink);
  //! After the window, the IOS DP inside each device, kept per device where
  //! the whole schedule gets faster (the "compare both").
  bool device_dp = true;
};

//! `--devices` for a search: devices that measure alike, one of which the
//! farm measures on.
struct DeviceList {
  std::vector<std::string> names;  // ExpandDeviceList's
  std::string measure_on;          // a name --device takes: names[0]
  int count() const { return static_cast<int>(names.size()); }
};

//! ExpandDeviceList(text, cpus), then checks that the devices are
//! identical: equal names, or cpu devices that differ only in their cores
//! (cpus=) and not in their thread count. Throws ios::Error naming the text.
DeviceList ParseDeviceList(const std::string& text, const std::vector<int>& cpus);

//! Operators are nodes 1..N-1 of `graph` as hios ops 0..N-2; one edge per
//! (producer, consumer) pair, the network input (node 0) left out: every
//! device holds it before a run.
hios::Dag DagOfGraph(const Graph& graph);

//! Per device: what it runs and how long it is busy.
struct DeviceLoad {
  int operators = 0, stages = 0, merged_stages = 0;
  double busy_ms = 0;  // its stages' prices summed
};

struct MultiDeviceOutcome {
  MultiDeviceSchedule schedule;  // device names: the measurer's device, repeated
  hios::HiosResult hios;
  std::vector<Transfer> transfers;
  std::vector<DeviceLoad> loads;
  double transfer_ms = 0;  // every copy's link price summed
  //! The IOS DP inside devices (MultiDeviceOptions::device_dp): the
  //! latency with its stages where they won, on how many devices, and the
  //! segments it ran on.
  bool dp_ran = false;
  double dp_ms = 0, dp_s = 0;
  int dp_devices_improved = 0, dp_segments = 0, dp_segments_over_budget = 0;
  //! The schedule's predicted latency: HIOS's (after the DP inside devices
  //! when it ran), or the one-device schedule's after KeepOnOneDevice.
  double predicted_ms = 0;
  double multi_device_ms = 0;  // HIOS's (after the DP), whatever is kept
  bool one_device_kept = false;
  int64_t stages_measured = 0, stages_reused = 0, stages_failed = 0;
  double measure_s = 0;  // pricing operators and window candidates
  //! The kept schedule over time, for the report's lanes (a latency alone
  //! cannot say which device waits): per NodeId, its stage's predicted start
  //! and finish on its device (hios::Evaluate; NaN for node 0), and per
  //! transfers[i] its price on the link.
  std::vector<double> op_start_ms, op_finish_ms;
  std::vector<double> transfer_link_ms;
};

//! Prices every operator and every stage the window may ask for on the
//! measurer's device (stored results reused, misses measured and stored),
//! then runs HIOS. A stage that failed to measure is never chosen. Throws
//! ios::Error when an operator cannot be measured.
MultiDeviceOutcome ScheduleMultiDevice(
    const Graph& graph, const MultiDeviceOptions& options, const SearchOptions& search,
    db::ProfileStore& store, Measurer& measurer,
    const std::function<void(const MeasureProgress&)>& progress = {});

//! Replaces outcome.schedule by `single`'s stages all on device 0 (IOS's
//! merged and multi-group stages included), with no copies: what to run
//! when HIOS does not beat one device.
void KeepOnOneDevice(const Graph& graph, const Schedule& single, int batch_size,
                     MultiDeviceOutcome& outcome);

//! The per-device table the coordinator prints.
std::string FormatMultiDevice(const Graph& graph, const MultiDeviceOutcome& outcome,
                              const MultiDeviceOptions& options, bool simulated);

}  // namespace ios::coordinator
