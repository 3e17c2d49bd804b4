#include "common/network_spec.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/ios_json.h"
#include "common/printable.h"

namespace ios {

std::string NetworkSpec::Describe() const {
  return "network " + (graph.name.empty() ? std::string("(unnamed)") : graph.name) + ": " +
         std::to_string(graph.OperatorCount()) + " operators in " + std::to_string(stages.size()) +
         " stages";
}

void CheckScheduleCovers(const Graph& graph, const std::vector<Stage>& stages) {
  struct Place {
    int stage = -1, group = 0, index = 0;  // stage -1: not run yet
  };
  const int nodes = static_cast<int>(graph.nodes.size());
  std::vector<Place> placed(static_cast<size_t>(nodes));
  auto name = [&graph](NodeId id) { return Quoted(graph.node(id).name); };
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    const std::string where = "schedule stage " + std::to_string(s);
    if (stages[s].groups.empty()) throw Error(where + ": no groups");
    for (int g = 0; g < static_cast<int>(stages[s].groups.size()); ++g) {
      const std::vector<NodeId>& group = stages[s].groups[g];
      if (group.empty()) throw Error(where + ": group " + std::to_string(g) + " is empty");
      for (int k = 0; k < static_cast<int>(group.size()); ++k) {
        const NodeId id = group[k];
        if (id < 1 || id >= nodes) {
          throw Error(where + ": node " + std::to_string(id) +
                      " is not an operator (the graph has " + std::to_string(nodes - 1) + ")");
        }
        if (placed[id].stage != -1) {
          throw Error(where + ": operator " + name(id) + " already runs in stage " +
                      std::to_string(placed[id].stage));
        }
        // Every producer ran in an earlier stage, or earlier in this group.
        for (const Term& term : graph.node(id).inputs) {
          for (const Slice& slice : term) {
            if (slice.producer == 0) continue;
            const Place& p = placed[slice.producer];
            if (p.stage == -1 || (p.stage == s && p.group != g)) {
              throw Error(where + ": operator " + name(id) + " reads " + name(slice.producer) +
                          (p.stage == -1 ? ", which has not run yet"
                                         : ", which runs beside it in another group"));
            }
          }
        }
        placed[id] = {s, g, k};
      }
    }
  }
  for (int id = 1; id < nodes; ++id) {
    if (placed[id].stage == -1) throw Error("schedule: operator " + name(id) + " never runs");
  }
}

std::string NetworkKey(const NetworkSpec& spec) {
  std::string key = nlohmann::json::parse(ToIosJson(spec.graph)).dump();
  key += "|stages:";
  for (const Stage& stage : spec.stages) {
    key += stage.strategy == Strategy::kMerge ? "M" : "P";
    for (const auto& group : stage.groups) {
      key += "[";
      for (const NodeId id : group) key += std::to_string(id) + ",";
      key += "]";
    }
    key += ";";
  }
  return key + "|seed:" + std::to_string(spec.weight_seed);
}

}  // namespace ios
