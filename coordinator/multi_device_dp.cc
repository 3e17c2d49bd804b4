#include "coordinator/multi_device_dp.h"

#include <spdlog/spdlog.h>

#include <memory>

#include "coordinator/dp.h"

namespace ios::coordinator {

Stage StageOfOps(const std::vector<hios::OpId>& ops) {
  Stage stage;
  stage.strategy = Strategy::kParallel;
  for (hios::OpId op : ops) stage.groups.push_back({NodeOf(op)});
  return stage;
}

std::vector<hios::OpId> OpsOfStage(const Stage& stage) {
  std::vector<hios::OpId> ops;
  for (const auto& group : stage.groups) {
    for (NodeId node : group) ops.push_back(OpOf(node));
  }
  return ops;
}

namespace {

// One segment of a device's stage sequence and what the DP made of it.
struct Segment {
  int device = 0;
  std::vector<std::vector<hios::OpId>> window;  // the window's stages it replaces
  std::unique_ptr<PartSpace> space;             // null: over a DP budget
  std::vector<int> ids;                         // per space stage: its id in the plan
};

}  // namespace

DeviceDpOutcome RunDeviceDp(const Graph& graph, const hios::Dag& dag, GraphCosts& costs,
                            const hios::MultiSchedule& window, const SearchOptions& search,
                            db::ProfileStore& store, Measurer& measurer,
                            const std::function<void(const MeasureProgress&)>& progress) {
  const int devices = static_cast<int>(window.stages.size());
  // A segment never crosses one of the IOS search's own parts: inside one
  // a device's operators are as narrow as the block; across them, operators
  // linked only through other devices would look independent to the DP.
  std::vector<int> part_of(graph.nodes.size(), -1);
  int parts = 0;
  for (const Block& block : graph.blocks) {
    for (const auto& part : PartsOf(graph, block, search.max_part_size)) {
      for (NodeId node : part) part_of[static_cast<size_t>(node)] = parts;
      ++parts;
    }
  }
  std::vector<Segment> segments;
  for (int d = 0; d < devices; ++d) {
    Segment current{d, {}, nullptr, {}};
    int size = 0, part = -1;
    auto close = [&] {
      if (!current.window.empty()) segments.push_back(std::move(current));
      current = Segment{d, {}, nullptr, {}};
      size = 0;
    };
    for (const auto& ops : window.stages[static_cast<size_t>(d)]) {
      int stage_part = part_of[static_cast<size_t>(NodeOf(ops[0]))];
      for (hios::OpId op : ops) {
        // A window stage across two parts stays as it is, alone.
        if (part_of[static_cast<size_t>(NodeOf(op))] != stage_part) stage_part = -2;
      }
      if (stage_part != part || stage_part < 0 ||
          size + static_cast<int>(ops.size()) > search.max_part_size) {
        close();
      }
      part = stage_part;
      current.window.push_back(ops);
      size += static_cast<int>(ops.size());
    }
    close();
  }
  // Enumerate every segment; ids into one plan so the farm prices all at once.
  SearchPlan plan;
  StageKeyer keyer(graph);
  DeviceDpOutcome out;
  for (Segment& segment : segments) {
    std::vector<NodeId> part;
    for (const auto& ops : segment.window) {
      for (hios::OpId op : ops) part.push_back(NodeOf(op));
    }
    std::sort(part.begin(), part.end());  // node ids are topological
    try {
      segment.space = std::make_unique<PartSpace>(PartSpace::Enumerate(graph, part, search.dp));
    } catch (const DpBudgetExceeded& e) {
      spdlog::warn(
          "multi-device: the DP of a {}-operator segment on device {} is over budget ({}); "
          "it keeps the window's stages",
          part.size(), segment.device, e.what());
      ++out.segments_over_budget;
      continue;
    }
    for (int s = 0; s < segment.space->stage_count(); ++s) {
      segment.ids.push_back(plan.Intern(keyer, segment.space->stage(s)));
    }
  }
  out.segments = static_cast<int>(segments.size());
  if (out.segments_over_budget > 0) {
    spdlog::warn(
        "multi-device: {} of {} segments are over a DP budget (--max-dp-states, "
        "--max-dp-transitions, --max-dp-stages); they keep the window's stages",
        out.segments_over_budget, out.segments);
  }
  const LatencyTable table = MeasureStages(graph, plan, store, measurer, search, progress);
  out.stages_measured = table.stats.measured;
  out.stages_reused = table.stats.reused;
  out.stages_failed = table.stats.failed;

  // Per device: the DP's stages (a segment without a finite DP schedule
  // keeps the window's) with their prices.
  std::vector<std::vector<Stage>> dp_stages(static_cast<size_t>(devices));
  std::vector<std::vector<std::pair<std::vector<hios::OpId>, double>>> prices(
      static_cast<size_t>(devices));
  for (const Segment& segment : segments) {
    auto& stages = dp_stages[static_cast<size_t>(segment.device)];
    auto& priced = prices[static_cast<size_t>(segment.device)];
    PartSpace::Solution solution;
    if (segment.space) {
      std::vector<double> latency;
      for (int id : segment.ids) latency.push_back(table.latency_ms[static_cast<size_t>(id)]);
      solution = segment.space->Solve(latency);
      if (std::isfinite(solution.latency_ms)) {
        for (int s : solution.stage_sequence) {
          stages.push_back(segment.space->stage(s));
          priced.emplace_back(
              OpsOfStage(stages.back()),
              table.latency_ms[static_cast<size_t>(segment.ids[static_cast<size_t>(s)])]);
        }
        continue;
      }
    }
    for (const auto& ops : segment.window) stages.push_back(StageOfOps(ops));
  }

  // Each device in turn, on top of the devices already changed.
  out.schedule = window;
  out.schedule.ordered_stages = true;
  for (int d = 0; d < devices; ++d) {
    out.stages.push_back({});
    for (const auto& ops : window.stages[static_cast<size_t>(d)])
      out.stages.back().push_back(StageOfOps(ops));
  }
  out.latency_ms = hios::Evaluate(dag, costs, out.schedule).latency_ms;
  for (int d = 0; d < devices; ++d) {
    hios::MultiSchedule candidate = out.schedule;
    auto& list = candidate.stages[static_cast<size_t>(d)];
    list.clear();
    for (const Stage& stage : dp_stages[static_cast<size_t>(d)]) list.push_back(OpsOfStage(stage));
    GraphCosts trial = costs;
    for (const auto& [ops, ms] : prices[static_cast<size_t>(d)]) trial.SetStageMs(ops, ms);
    const hios::Timeline t = hios::Evaluate(dag, trial, candidate);
    if (!t.acyclic || !(t.latency_ms < out.latency_ms)) continue;
    out.schedule = std::move(candidate);
    out.stages[static_cast<size_t>(d)] = dp_stages[static_cast<size_t>(d)];
    out.latency_ms = t.latency_ms;
    costs = std::move(trial);
    ++out.devices_improved;
  }
  return out;
}

}  // namespace ios::coordinator
