#include "schema/network_wire.h"

#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "common/ios_json.h"
#include "schema/validate.h"

namespace ios::schema::detail {
namespace {

wire::Strategy ToWire(Strategy strategy) {
  return strategy == Strategy::kMerge ? wire::Strategy::MERGE : wire::Strategy::PARALLEL;
}

Strategy FromWire(wire::Strategy strategy, const std::string& where) {
  switch (strategy) {
    case wire::Strategy::PARALLEL:
      return Strategy::kParallel;
    case wire::Strategy::MERGE:
      return Strategy::kMerge;
  }
  throw InvalidField(where + ": unknown value " + std::to_string(static_cast<uint16_t>(strategy)));
}

}  // namespace

void WriteNetwork(wire::NetworkRun::Builder out, const NetworkSpec& network) {
  // Compact: NASNet's graph is about 1 MB indented, a quarter of it so.
  const std::string graph = nlohmann::json::parse(ToIosJson(network.graph)).dump();
  out.setGraphJson(capnp::Text::Reader(graph.c_str(), graph.size()));
  auto stages = out.initStages(static_cast<unsigned>(network.stages.size()));
  for (unsigned s = 0; s < stages.size(); ++s) {
    const Stage& stage = network.stages[s];
    stages[s].setStrategy(ToWire(stage.strategy));
    auto groups = stages[s].initGroups(static_cast<unsigned>(stage.groups.size()));
    for (unsigned g = 0; g < groups.size(); ++g) {
      auto nodes = groups.init(g, static_cast<unsigned>(stage.groups[g].size()));
      for (unsigned k = 0; k < nodes.size(); ++k) nodes.set(k, stage.groups[g][k]);
    }
  }
  out.setWeightSeed(network.weight_seed);
}

std::shared_ptr<const NetworkSpec> ReadNetwork(wire::StageQuery::Reader query) {
  if (query.hasStage()) throw InvalidField("query: both a stage and a network");
  const wire::NetworkRun::Reader in = query.getNetwork();
  auto network = std::make_shared<NetworkSpec>();
  const capnp::Text::Reader text = in.getGraphJson();
  try {
    network->graph =
        ParseIosJson(std::string(text.cStr(), text.size()), "query.network.graphJson").graph;
  } catch (const Error& e) {
    throw InvalidField(e.what());
  }
  const auto stages = in.getStages();
  // Each stage runs at least one operator: more stages than operators is
  // a frame built to make the reader allocate.
  if (stages.size() > network->graph.nodes.size()) {
    throw InvalidField("query.network.stages: " + std::to_string(stages.size()) + " stages for " +
                       std::to_string(network->graph.OperatorCount()) + " operators");
  }
  network->stages.resize(stages.size());
  for (unsigned s = 0; s < stages.size(); ++s) {
    const std::string where = "query.network.stages[" + std::to_string(s) + "]";
    Stage& stage = network->stages[s];
    stage.strategy = FromWire(stages[s].getStrategy(), where + ".strategy");
    const auto groups = stages[s].getGroups();
    if (groups.size() > network->graph.nodes.size()) {
      throw InvalidField(where + ".groups: " + std::to_string(groups.size()) + " groups");
    }
    for (const auto nodes : groups) {
      if (nodes.size() > network->graph.nodes.size()) {
        throw InvalidField(where + ".groups: a group of " + std::to_string(nodes.size()) +
                           " nodes");
      }
      std::vector<NodeId>& group = stage.groups.emplace_back();
      for (const int32_t id : nodes) group.push_back(id);
    }
  }
  try {
    CheckScheduleCovers(network->graph, network->stages);
  } catch (const Error& e) {
    throw InvalidField("query.network: " + std::string(e.what()));
  }
  network->weight_seed = in.getWeightSeed();
  return network;
}

}  // namespace ios::schema::detail
