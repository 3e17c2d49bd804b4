#include "coordinator/multi_device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "common/error.h"
#include "coordinator/multi_device_dp.h"

namespace ios::coordinator {
namespace {

int64_t OutputBytes(const Graph& graph, NodeId node, int batch) {
  const Shape& s = graph.node(node).output;
  return int64_t{batch} * s.c * s.h * s.w * 4;
}

}  // namespace

DeviceList ParseDeviceList(const std::string& text, const std::vector<int>& cpus) {
  DeviceList list;
  list.names = ExpandDeviceList(text, cpus);
  // A cpu share is named by its cores too; what it measures is the rest.
  auto measured_as = [](const std::string& name) {
    const size_t at = name.find(",cpus=");
    if (at == std::string::npos) return name;
    const size_t end = name.find(',', at + 1);
    return name.substr(0, at) + (end == std::string::npos ? "" : name.substr(end));
  };
  for (const std::string& name : list.names) {
    if (measured_as(name) != measured_as(list.names[0])) {
      throw Error("--devices '" + text + "': '" + name + "' differs from '" + list.names[0] +
                  "': the devices of one schedule must be identical for now (a search "
                  "measures one of them)");
    }
  }
  list.measure_on = list.names[0];
  return list;
}

hios::Dag DagOfGraph(const Graph& graph) {
  std::vector<hios::Edge> edges;
  for (NodeId v = 1; v < static_cast<NodeId>(graph.nodes.size()); ++v) {
    std::set<NodeId> producers;
    for (const Term& term : graph.node(v).inputs) {
      for (const Slice& slice : term) {
        if (slice.producer > 0) producers.insert(slice.producer);
      }
    }
    for (NodeId p : producers) edges.push_back({p - 1, v - 1});
  }
  return hios::Dag::Make(graph.OperatorCount(), std::move(edges));
}

MultiDeviceOutcome ScheduleMultiDevice(
    const Graph& graph, const MultiDeviceOptions& options, const SearchOptions& search,
    db::ProfileStore& store, Measurer& measurer,
    const std::function<void(const MeasureProgress&)>& progress) {
  if (options.devices < 1) {
    throw Error("multi-device: expected at least one device, found " +
                std::to_string(options.devices));
  }
  const auto start = std::chrono::steady_clock::now();
  MultiDeviceOutcome out;
  const hios::Dag dag = DagOfGraph(graph);
  StageKeyer keyer(graph);

  // Prices `stages` through the DB and the farm, in one batch.
  auto price = [&](const std::vector<std::vector<hios::OpId>>& sets) {
    SearchPlan plan;
    std::vector<int> ids;
    for (const auto& ops : sets) ids.push_back(plan.Intern(keyer, StageOfOps(ops)));
    const LatencyTable table = MeasureStages(graph, plan, store, measurer, search, progress);
    out.stages_measured += table.stats.measured;
    out.stages_reused += table.stats.reused;
    out.stages_failed += table.stats.failed;
    std::vector<double> ms;
    for (int id : ids) ms.push_back(table.latency_ms[static_cast<size_t>(id)]);
    return ms;
  };

  std::vector<std::vector<hios::OpId>> singletons;
  for (hios::OpId op = 0; op < dag.ops(); ++op) singletons.push_back({op});
  const std::vector<double> op_ms = price(singletons);
  for (hios::OpId op = 0; op < dag.ops(); ++op) {
    if (!std::isfinite(op_ms[static_cast<size_t>(op)])) {
      throw Error("multi-device: operator " + graph.node(NodeOf(op)).name +
                  " could not be measured on " + measurer.Device().name);
    }
  }
  std::vector<double> transfer_ms;
  for (const hios::Edge& e : dag.edges()) {
    transfer_ms.push_back(options.link.Ms(OutputBytes(graph, NodeOf(e.src), search.batch_size)));
  }
  GraphCosts costs(options.devices, op_ms, std::move(transfer_ms));
  double prefetch_s = 0;
  out.hios = hios::Schedule(dag, costs, options.hios, [&](const auto& candidates) {
    const auto prefetch_start = std::chrono::steady_clock::now();
    const std::vector<double> ms = price(candidates);
    for (size_t i = 0; i < candidates.size(); ++i) costs.SetStageMs(candidates[i], ms[i]);
    prefetch_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - prefetch_start).count();
  });
  out.hios.window_s -= prefetch_s;  // the window's own time, not the farm's

  // Each device's stages: the window's, or the IOS DP's where faster.
  std::vector<std::vector<Stage>> stages;
  hios::MultiSchedule chosen = out.hios.final;
  out.predicted_ms = out.hios.final_ms;
  if (options.device_dp) {
    const auto dp_start = std::chrono::steady_clock::now();
    DeviceDpOutcome dp =
        RunDeviceDp(graph, dag, costs, out.hios.final, search, store, measurer, progress);
    out.dp_ran = true;
    out.dp_ms = dp.latency_ms;
    out.dp_devices_improved = dp.devices_improved;
    out.dp_segments = dp.segments;
    out.dp_segments_over_budget = dp.segments_over_budget;
    out.stages_measured += dp.stages_measured;
    out.stages_reused += dp.stages_reused;
    out.stages_failed += dp.stages_failed;
    out.dp_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - dp_start).count();
    stages = std::move(dp.stages);
    chosen = std::move(dp.schedule);
    out.predicted_ms = dp.latency_ms;
  } else {
    for (const auto& list : chosen.stages) {
      stages.emplace_back();
      for (const auto& ops : list) stages.back().push_back(StageOfOps(ops));
    }
  }
  out.measure_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
                  out.hios.map_s - out.hios.window_s;

  MultiDeviceSchedule& schedule = out.schedule;
  schedule.devices = options.names;
  if (schedule.devices.empty()) {
    schedule.devices.assign(static_cast<size_t>(options.devices), measurer.Device().name);
  }
  if (static_cast<int>(schedule.devices.size()) != options.devices) {
    throw Error("multi-device: " + std::to_string(schedule.devices.size()) + " device names for " +
                std::to_string(options.devices) + " devices");
  }
  schedule.device_of.assign(graph.nodes.size(), -1);
  schedule.stages = std::move(stages);
  out.loads.resize(static_cast<size_t>(options.devices));
  for (int d = 0; d < options.devices; ++d) {
    DeviceLoad& load = out.loads[static_cast<size_t>(d)];
    for (const auto& ops : chosen.stages[static_cast<size_t>(d)]) {
      for (hios::OpId op : ops) schedule.device_of[static_cast<size_t>(NodeOf(op))] = d;
      load.operators += static_cast<int>(ops.size());
      ++load.stages;
      if (ops.size() > 1) ++load.merged_stages;
      load.busy_ms += costs.StageMs(ops, d);
    }
  }
  out.transfers = MultiTransfers(graph, schedule, search.batch_size);
  for (const Transfer& t : out.transfers) {
    out.transfer_link_ms.push_back(options.link.Ms(t.bytes));
    out.transfer_ms += out.transfer_link_ms.back();
  }
  // The evaluator that judged the schedule also places it in time.
  const hios::Timeline timeline = hios::Evaluate(dag, costs, chosen);
  out.op_start_ms.assign(graph.nodes.size(), std::numeric_limits<double>::quiet_NaN());
  out.op_finish_ms = out.op_start_ms;
  for (hios::OpId op = 0; op < dag.ops(); ++op) {
    out.op_start_ms[static_cast<size_t>(NodeOf(op))] = timeline.start_ms[static_cast<size_t>(op)];
    out.op_finish_ms[static_cast<size_t>(NodeOf(op))] = timeline.finish_ms[static_cast<size_t>(op)];
  }
  out.multi_device_ms = out.predicted_ms;
  return out;
}

void KeepOnOneDevice(const Graph& graph, const Schedule& single, int batch_size,
                     MultiDeviceOutcome& outcome) {
  MultiDeviceSchedule& schedule = outcome.schedule;
  for (auto& stages : schedule.stages) stages.clear();
  std::fill(schedule.device_of.begin() + 1, schedule.device_of.end(), 0);
  for (DeviceLoad& load : outcome.loads) load = {};
  DeviceLoad& load = outcome.loads[0];
  // One device runs its stages end to end.
  outcome.op_start_ms.assign(graph.nodes.size(), std::numeric_limits<double>::quiet_NaN());
  outcome.op_finish_ms = outcome.op_start_ms;
  double clock_ms = 0;
  for (const auto& block : single.blocks) {
    for (const ScheduledStage& s : block) {
      for (const auto& group : s.stage.groups) {
        for (NodeId v : group) {
          outcome.op_start_ms[static_cast<size_t>(v)] = clock_ms;
          outcome.op_finish_ms[static_cast<size_t>(v)] = clock_ms + s.latency_ms;
        }
      }
      clock_ms += s.latency_ms;
      schedule.stages[0].push_back(s.stage);
      load.operators += s.stage.OperatorCount();
      ++load.stages;
      if (s.stage.OperatorCount() > 1) ++load.merged_stages;
      load.busy_ms += s.latency_ms;
    }
  }
  outcome.transfers = MultiTransfers(graph, schedule, batch_size);
  outcome.transfer_link_ms.assign(outcome.transfers.size(), 0.0);
  outcome.transfer_ms = 0;
  outcome.predicted_ms = single.latency_ms;
  outcome.one_device_kept = true;
}

std::string FormatMultiDevice(const Graph& graph, const MultiDeviceOutcome& outcome,
                              const MultiDeviceOptions& options, bool simulated) {
  (void)graph;
  const char* sim = simulated ? " (simulated)" : "";
  std::string text;
  char line[256];
  std::snprintf(line, sizeof line, "HIOS-%s on %d devices, link %s, window %d, streams %d%s:\n",
                options.hios.mapper == hios::Mapper::kLp ? "LP" : "MR", options.devices,
                hios::Describe(options.link).c_str(), options.hios.window.window,
                options.hios.window.streams, sim);
  text += line;
  text += "  device  operators  stages  merged  busy ms\n";
  for (size_t d = 0; d < outcome.loads.size(); ++d) {
    const DeviceLoad& l = outcome.loads[d];
    std::snprintf(line, sizeof line, "  %6zu  %9d  %6d  %6d  %7.3f\n", d, l.operators, l.stages,
                  l.merged_stages, l.busy_ms);
    text += line;
  }
  std::snprintf(
      line, sizeof line,
      "  copies: %zu (%.3f ms on the link in all)\n"
      "  predicted latency: mapping %.3f ms, after the window %.3f ms%s; one device "
      "without merging %.3f ms%s\n",
      outcome.transfers.size(), outcome.transfer_ms, outcome.hios.mapped_ms, outcome.hios.final_ms,
      sim, outcome.hios.one_device_ms,
      outcome.hios.one_device_won ? " (faster than the mapping: kept on one device)" : "");
  text += line;
  if (outcome.dp_ran) {
    std::snprintf(
        line, sizeof line,
        "  inside devices: the window %.3f ms; the IOS DP per device %.3f ms%s (kept on %d "
        "of %d devices; %d segments, %d over a DP budget)\n",
        outcome.hios.final_ms, outcome.dp_ms, sim, outcome.dp_devices_improved, options.devices,
        outcome.dp_segments, outcome.dp_segments_over_budget);
    text += line;
  }
  std::snprintf(line, sizeof line,
                "  scheduling: mapping %.3f s, window %.3f s; pricing %.1f s (%lld measured, %lld "
                "reused, %lld failed)\n",
                outcome.hios.map_s, outcome.hios.window_s, outcome.measure_s,
                static_cast<long long>(outcome.stages_measured),
                static_cast<long long>(outcome.stages_reused),
                static_cast<long long>(outcome.stages_failed));
  text += line;
  return text;
}

}  // namespace ios::coordinator
