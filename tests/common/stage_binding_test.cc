// Bound stages (common/stage.h): StageKeyer::Bind gives MakeStageSpec's
// canonical spec together with the graph nodes behind it, for every kind of
// stage the search produces on every zoo model.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/slices.h"
#include "common/stage.h"
#include "common/zoo.h"
#include "coordinator/dp.h"
#include "coordinator/search.h"
#include "tests/testing/sanitizers.h"

namespace ios {
namespace {

// Candidate stages checked per model (a spread sample of the search plan's,
// which run to the hundred thousands), besides every singleton and every
// greedy stage; sanitized, a sixteenth of that (still every candidate of a
// small model).
constexpr size_t kPlanSample = 3000 / ::ios::testing::kExhaustiveStride;

// What a model's stages are made of, to show the sample covers each kind.
struct Coverage {
  int parallel_multi_group = 0, merges = 0, long_groups = 0;
};

std::vector<Stage> StagesToCheck(const Graph& graph) {
  std::vector<Stage> stages;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    stages.push_back(Stage{Strategy::kParallel, {{id}}});
  }
  for (const Block& block : graph.blocks) {
    for (const Stage& stage : coordinator::GreedySchedule(graph, block.Operators())) {
      stages.push_back(stage);
    }
  }
  // The search's own space; sanitized, a narrower one (NASNet's and
  // RandWire's full walks take seconds even unsanitized).
  coordinator::SearchOptions options;
  if (::ios::testing::kSanitized) {
    options.dp.max_group_size = 2;
    options.dp.max_groups = 3;
  }
  const coordinator::SearchPlan plan = coordinator::PlanSearch(graph, options);
  // Every merge candidate (they are few), a spread sample of the others.
  const size_t stride = std::max<size_t>(1, plan.stage_count() / kPlanSample);
  for (size_t id = 0; id < plan.stage_count(); ++id) {
    Stage stage = plan.StageOf(static_cast<int>(id));
    if (id % stride == 0 || (stage.strategy == Strategy::kMerge && stage.OperatorCount() > 1)) {
      stages.push_back(std::move(stage));
    }
  }
  return stages;
}

void ExpectSameSpec(const StageSpec& bound, const StageSpec& made) {
  EXPECT_EQ(bound.Key(), made.Key());
  EXPECT_EQ(bound.strategy, made.strategy);
  EXPECT_EQ(bound.externals, made.externals);
  ASSERT_EQ(bound.groups.size(), made.groups.size());
  for (size_t g = 0; g < made.groups.size(); ++g) {
    ASSERT_EQ(bound.groups[g].size(), made.groups[g].size());
    for (size_t k = 0; k < made.groups[g].size(); ++k) {
      EXPECT_EQ(bound.groups[g][k].op, made.groups[g][k].op);
      EXPECT_EQ(bound.groups[g][k].inputs, made.groups[g][k].inputs);
      EXPECT_EQ(bound.groups[g][k].output, made.groups[g][k].output);
    }
  }
}

// The binding names the stage's own nodes, group by group; each op is its
// node (parameters, output shape, and inputs slice by slice: an external
// slice reads a node outside the stage, bound as that external; an internal
// one reads the bound node of the op it references); each external is bound
// to a node outside the stage with its output shape. The resolved input of
// every op equals its node's, source by source.
void ExpectBindingRight(const Graph& graph, const Stage& stage, const BoundStage& bound) {
  const StageSpec& spec = bound.spec;
  const StageBinding& binding = bound.binding;
  std::set<std::set<NodeId>> stage_groups, bound_groups;
  for (const auto& group : stage.groups) stage_groups.insert({group.begin(), group.end()});
  for (const auto& group : binding.groups) bound_groups.insert({group.begin(), group.end()});
  EXPECT_EQ(bound_groups, stage_groups);
  std::set<NodeId> members;
  for (const auto& group : stage.groups) members.insert(group.begin(), group.end());
  ASSERT_EQ(binding.groups.size(), spec.groups.size());
  ASSERT_EQ(binding.externals.size(), spec.externals.size());
  for (size_t i = 0; i < spec.externals.size(); ++i) {
    const NodeId node = binding.externals[i];
    EXPECT_EQ(members.count(node), 0u) << "external " << i << " is inside the stage";
    EXPECT_EQ(graph.node(node).output, spec.externals[i]);
  }
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    ASSERT_EQ(binding.groups[g].size(), spec.groups[g].size());
    for (size_t k = 0; k < spec.groups[g].size(); ++k) {
      const NodeId id = binding.groups[g][k];
      const Node& node = graph.node(id);
      const StageOp& op = spec.groups[g][k];
      EXPECT_EQ(members.count(id), 1u);
      EXPECT_EQ(op.op, node.op);
      EXPECT_EQ(op.output, node.output);
      ASSERT_EQ(op.inputs.size(), node.inputs.size());
      for (size_t t = 0; t < op.inputs.size(); ++t) {
        ASSERT_EQ(op.inputs[t].size(), node.inputs[t].size());
        for (size_t s = 0; s < op.inputs[t].size(); ++s) {
          const SliceRef& ref = op.inputs[t][s];
          const Slice& slice = node.inputs[t][s];
          EXPECT_EQ(ref.begin, slice.begin);
          EXPECT_EQ(ref.end, slice.end);
          if (ref.external) {
            EXPECT_EQ(members.count(slice.producer), 0u);
            EXPECT_EQ(binding.externals.at(static_cast<size_t>(ref.index)), slice.producer);
          } else {
            ASSERT_LT(ref.index, static_cast<int>(k));
            EXPECT_EQ(binding.groups[g][static_cast<size_t>(ref.index)], slice.producer);
          }
        }
      }
      // One resolution: the stage op reads what the node reads.
      const ResolvedInput in_stage = ResolveStageInput(spec, g, k);
      const ResolvedInput in_graph = ResolveNodeInput(graph, id, node.op.kind, node.inputs);
      EXPECT_EQ(in_stage.shape, in_graph.shape);
      ASSERT_EQ(in_stage.terms.size(), in_graph.terms.size());
      for (size_t t = 0; t < in_stage.terms.size(); ++t) {
        const auto& stage_slices = in_stage.terms[t].slices;
        const auto& graph_slices = in_graph.terms[t].slices;
        ASSERT_EQ(stage_slices.size(), graph_slices.size());
        for (size_t s = 0; s < stage_slices.size(); ++s) {
          const size_t source = static_cast<size_t>(stage_slices[s].source);
          const NodeId producer = source < spec.externals.size()
                                      ? binding.externals[source]
                                      : binding.groups[g][source - spec.externals.size()];
          EXPECT_EQ(producer, graph_slices[s].source);
          EXPECT_EQ(stage_slices[s].source_shape, graph_slices[s].source_shape);
        }
      }
    }
  }
}

class StageBindingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StageBindingTest, RebindingEveryStageReproducesMakeStageSpec) {
  const Graph graph = BuildZooModel(GetParam());
  StageKeyer keyer(graph);
  Coverage coverage;
  for (const Stage& stage : StagesToCheck(graph)) {
    const BoundStage bound = keyer.Bind(stage);
    const StageSpec made = MakeStageSpec(graph, stage);
    ExpectSameSpec(bound.spec, made);
    // Key() takes its own path (no spec is built): the canonical order agrees.
    EXPECT_EQ(bound.spec.Key(), keyer.Key(stage));
    ExpectBindingRight(graph, stage, bound);
    if (::testing::Test::HasFailure()) {
      FAIL() << "first wrong stage: " << made.Describe() << " (" << made.Key() << ")";
    }
    coverage.merges += made.strategy == Strategy::kMerge;
    coverage.parallel_multi_group += made.strategy == Strategy::kParallel && made.groups.size() > 1;
    for (const auto& group : made.groups) coverage.long_groups += group.size() > 1;
  }
  // NASNet's and RandWire's operators are sequential units: none merges.
  const bool has_merges = GetParam() == "inception_v3" || GetParam() == "squeezenet";
  EXPECT_EQ(coverage.merges > 0, has_merges) << coverage.merges << " merge stages";
  EXPECT_GT(coverage.parallel_multi_group, 10);
  EXPECT_GT(coverage.long_groups, 10);
}

INSTANTIATE_TEST_SUITE_P(ZooModels, StageBindingTest,
                         ::testing::Values("inception_v3", "squeezenet", "nasnet", "randwire"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace ios
