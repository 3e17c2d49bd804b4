#include "coordinator/memory_search.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <string>

#include "common/error.h"
#include "common/part_dag.h"
#include "memory/memory_model.h"
#include "memory/memory_order.h"

namespace ios::coordinator {
namespace {

// The three parts PartMemory needs: what ran before, `ops`, and the rest.
std::vector<std::vector<NodeId>> Around(const Graph& graph, const std::vector<NodeId>& ops,
                                        const std::vector<char>& ran) {
  std::vector<std::vector<NodeId>> parts(3);
  parts[1] = ops;
  std::vector<char> in_part(graph.nodes.size(), 0);
  for (NodeId id : ops) in_part[static_cast<size_t>(id)] = 1;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    if (in_part[static_cast<size_t>(id)]) continue;
    parts[ran[static_cast<size_t>(id)] ? 0 : 2].push_back(id);
  }
  return parts;
}

}  // namespace

const char* ToString(MemoryOptions::Objective objective) {
  switch (objective) {
    case MemoryOptions::Objective::kLatency:
      return "latency";
    case MemoryOptions::Objective::kMemory:
      return "memory";
  }
  return "?";
}

int64_t ParseByteSize(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return Error("'" + text + "' is not a size in bytes (" + why +
                 "; expected e.g. 500000, 64K, 1.5M or 2G)");
  };
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad("no number");
  }
  const std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "K" || suffix == "k") {
    scale = 1024.0;
  } else if (suffix == "M" || suffix == "m") {
    scale = 1024.0 * 1024;
  } else if (suffix == "G" || suffix == "g") {
    scale = 1024.0 * 1024 * 1024;
  } else if (!suffix.empty()) {
    throw bad("unknown unit '" + suffix + "'");
  }
  const double bytes = value * scale;
  if (!(bytes >= 1)) throw bad("not a positive size");
  if (bytes > 0x1p62) throw bad("too large");
  return static_cast<int64_t>(bytes);
}

MemoryCaps::MemoryCaps(const Graph& graph) : graph_(graph), layout_(exec::LayoutTensors(graph)) {}

MemoryCaps::PartLeast MemoryCaps::Least(const std::vector<NodeId>& ops,
                                        const std::vector<char>& ran) const {
  const memory::PartMemory costs(layout_, Around(graph_, ops, ran), 1);
  const PartDag dag = PartDag::Make(graph_, ops);
  const memory::PartOrder order = memory::OptimalPartOrder(dag, costs);
  return {costs.Background(), costs.Background() + order.peak, order.ops, order.exact};
}

PartSpace MemoryCaps::Restrict(const PartSpace& space, const std::vector<NodeId>& ops,
                               const std::vector<char>& ran, int64_t cap) const {
  const memory::PartMemory costs(layout_, Around(graph_, ops, ran), 1);
  const int64_t room = cap - costs.Background();
  return space.Restricted(
      [&](uint64_t before, uint64_t ending) { return costs.StageBytes(before, ending) <= room; });
}

MemoryBudget PlanMemoryBudget(const Graph& graph, const std::vector<std::vector<NodeId>>& parts,
                              int batch, const MemoryOptions& options, MemoryPlanInfo& info) {
  MemoryBudget budget;
  if (!options.active()) return budget;
  budget.caps.emplace(graph);
  info.active = true;
  std::vector<char> ran(graph.nodes.size(), 0);
  for (const std::vector<NodeId>& ops : parts) {
    budget.ran_before.push_back(ran);
    budget.least.push_back(budget.caps->Least(ops, ran));
    info.least_peak = std::max(info.least_peak, budget.least.back().peak);
    info.least_exact = info.least_exact && budget.least.back().exact;
    for (NodeId id : ops) ran[static_cast<size_t>(id)] = 1;
  }
  info.cap = info.least_peak;
  if (options.objective == MemoryOptions::Objective::kLatency) {
    // Every term scales with the batch: bytes per sample, rounded down.
    const int64_t per_sample = options.budget_bytes / batch;
    if (per_sample >= info.least_peak) {
      info.cap = per_sample;
    } else {
      info.warnings.push_back(
          "memory budget of " + std::to_string(options.budget_bytes) + " bytes at batch " +
          std::to_string(batch) + " is below the least peak of any schedule of these parts, " +
          std::to_string(info.least_peak * batch) +
          " bytes: scheduling for the least peak instead (as --objective memory)");
      spdlog::warn("{}", info.warnings.back());
    }
  }
  return budget;
}

int64_t PeakBytes(const Graph& graph, const std::vector<Stage>& stages, int batch) {
  std::vector<std::vector<NodeId>> sets;
  sets.reserve(stages.size());
  for (const Stage& stage : stages) {
    std::vector<NodeId>& set = sets.emplace_back();
    for (const auto& group : stage.groups) set.insert(set.end(), group.begin(), group.end());
  }
  return memory::PeakOf(graph, sets, batch);
}

}  // namespace ios::coordinator
