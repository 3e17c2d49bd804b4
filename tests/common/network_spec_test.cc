#include "common/network_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/zoo.h"

namespace ios {
namespace {

using ::testing::HasSubstr;

// One operator per stage, in node order (nodes are stored topologically).
std::vector<Stage> NodeOrder(const Graph& graph) {
  std::vector<Stage> stages;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    stages.push_back({Strategy::kParallel, {{id}}});
  }
  return stages;
}

std::string Refusal(const Graph& graph, const std::vector<Stage>& stages) {
  try {
    CheckScheduleCovers(graph, stages);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(NetworkSpecTest, AcceptsEveryOperatorOnceInDependencyOrder) {
  const Graph graph = BuildZooModel("squeezenet");
  EXPECT_EQ(Refusal(graph, NodeOrder(graph)), "accepted");
}

TEST(NetworkSpecTest, RefusesAScheduleThatLeavesAnOperatorOut) {
  const Graph graph = BuildZooModel("squeezenet");
  std::vector<Stage> stages = NodeOrder(graph);
  stages.pop_back();
  EXPECT_THAT(Refusal(graph, stages), HasSubstr("never runs"));
}

TEST(NetworkSpecTest, RefusesAnOperatorRunTwice) {
  const Graph graph = BuildZooModel("squeezenet");
  std::vector<Stage> stages = NodeOrder(graph);
  stages.push_back(stages.front());
  EXPECT_THAT(Refusal(graph, stages), HasSubstr("already runs in stage 0"));
}

TEST(NetworkSpecTest, RefusesAnOperatorBeforeItsProducer) {
  const Graph graph = BuildZooModel("squeezenet");
  std::vector<Stage> stages = NodeOrder(graph);
  std::swap(stages[0], stages[1]);  // node 2 reads node 1
  EXPECT_THAT(Refusal(graph, stages), HasSubstr("has not run yet"));
}

TEST(NetworkSpecTest, RefusesAProducerInAnotherGroupOfTheSameStage) {
  const Graph graph = BuildZooModel("squeezenet");
  std::vector<Stage> stages = NodeOrder(graph);
  stages[0].groups.push_back(stages[1].groups.front());
  stages.erase(stages.begin() + 1);
  EXPECT_THAT(Refusal(graph, stages), HasSubstr("beside it in another group"));
}

TEST(NetworkSpecTest, RefusesAnEmptyGroupAndANodeOutOfRange) {
  const Graph graph = BuildZooModel("squeezenet");
  std::vector<Stage> stages = NodeOrder(graph);
  stages[0].groups.push_back({});
  EXPECT_THAT(Refusal(graph, stages), HasSubstr("group 1 is empty"));
  stages = NodeOrder(graph);
  stages[0].groups.front().front() = static_cast<NodeId>(graph.nodes.size());
  EXPECT_THAT(Refusal(graph, stages), HasSubstr("is not an operator"));
}

TEST(NetworkSpecTest, KeyChangesWithTheStagesAndTheSeed) {
  const Graph graph = BuildZooModel("squeezenet");
  const NetworkSpec spec{graph, NodeOrder(graph), 1};
  NetworkSpec merged_first = spec;
  merged_first.stages[0].strategy = Strategy::kMerge;
  NetworkSpec other_seed = spec;
  other_seed.weight_seed = 2;
  NetworkSpec fewer_stages = spec;
  fewer_stages.stages[0].groups.front().push_back(fewer_stages.stages[1].groups.front().front());
  fewer_stages.stages.erase(fewer_stages.stages.begin() + 1);
  EXPECT_EQ(NetworkKey(spec), NetworkKey(NetworkSpec{graph, NodeOrder(graph), 1}));
  EXPECT_NE(NetworkKey(spec), NetworkKey(merged_first));
  EXPECT_NE(NetworkKey(spec), NetworkKey(other_seed));
  EXPECT_NE(NetworkKey(spec), NetworkKey(fewer_stages));
}

}  // namespace
}  // namespace ios
