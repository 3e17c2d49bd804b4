// The memory model: its peak is ios-run's plan's peak_live_bytes for every
// schedule without merge stages (random small DAGs, random orders and stage
// schedules); the per-part costs the order search uses add up to it; the
// small cases that decide a tensor's lifetime.
#include "memory/memory_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "common/error.h"
#include "exec/program.h"
#include "exec/tensor_layout.h"
#include "exec/weights.h"
#include "tests/testing/ops.h"
#include "tests/testing/random_dags.h"

namespace ios::memory {
namespace {

using ::ios::testing::ConvOp;
using ::ios::testing::IdentityOp;
using ::ios::testing::OneOperatorStages;
using ::ios::testing::RandomSmallGraph;
using ::ios::testing::RandomTopologicalOrder;
using ::ios::testing::SplitMix;

constexpr int kGraphs = 200;
constexpr int kOrdersPerGraph = 5;

int OperatorsFor(int seed) { return 1 + seed % 14; }

std::vector<std::vector<NodeId>> Singletons(const std::vector<NodeId>& order) {
  std::vector<std::vector<NodeId>> stages;
  for (NodeId id : order) stages.push_back({id});
  return stages;
}

std::vector<std::vector<NodeId>> MemberSets(const std::vector<Stage>& stages) {
  std::vector<std::vector<NodeId>> sets;
  for (const Stage& stage : stages) {
    sets.emplace_back();
    for (const auto& group : stage.groups)
      sets.back().insert(sets.back().end(), group.begin(), group.end());
  }
  return sets;
}

std::vector<NodeId> ProducersOf(const Graph& g, NodeId id) {
  std::vector<NodeId> producers;
  for (const Term& t : g.node(id).inputs) {
    for (const Slice& s : t) {
      if (s.producer != 0) producers.push_back(s.producer);
    }
  }
  return producers;
}

// A random concurrent schedule of `order`: each operator joins the current
// stage as a new lane when its producers ran in earlier stages, extends
// the one lane holding its producers of this stage, or opens a new stage.
std::vector<Stage> RandomStages(const Graph& g, const std::vector<NodeId>& order, uint64_t seed) {
  SplitMix rng(seed);
  std::vector<Stage> stages;
  std::vector<int> stage_of(g.nodes.size(), -1), group_of(g.nodes.size(), -1);
  for (NodeId u : order) {
    int lane = -1;  // the current stage's lane u must join, -2: several
    if (!stages.empty()) {
      for (NodeId p : ProducersOf(g, u)) {
        if (stage_of[static_cast<size_t>(p)] != static_cast<int>(stages.size()) - 1) continue;
        const int gp = group_of[static_cast<size_t>(p)];
        lane = lane == -1 || lane == gp ? gp : -2;
      }
    }
    if (stages.empty() || lane == -2 || rng.Chance(35)) {
      stages.push_back({Strategy::kParallel, {{u}}});
      lane = 0;
    } else if (lane == -1) {
      stages.back().groups.push_back({u});
      lane = static_cast<int>(stages.back().groups.size()) - 1;
    } else {
      stages.back().groups[static_cast<size_t>(lane)].push_back(u);
    }
    stage_of[static_cast<size_t>(u)] = static_cast<int>(stages.size()) - 1;
    group_of[static_cast<size_t>(u)] = lane;
  }
  return stages;
}

// Parts: consecutive runs of the stages, each listed by node id (node ids
// are topological).
std::vector<std::vector<NodeId>> RandomParts(const std::vector<std::vector<NodeId>>& stages,
                                             uint64_t seed) {
  SplitMix rng(seed);
  std::vector<std::vector<NodeId>> parts(1);
  for (const auto& stage : stages) {
    if (!parts.back().empty() && rng.Chance(30)) parts.emplace_back();
    parts.back().insert(parts.back().end(), stage.begin(), stage.end());
  }
  for (auto& part : parts) std::sort(part.begin(), part.end());
  return parts;
}

uint64_t LocalMask(const PartMemory& pm, const std::vector<NodeId>& ids) {
  uint64_t mask = 0;
  for (NodeId id : ids) {
    const auto& nodes = pm.nodes();
    const auto at = std::find(nodes.begin(), nodes.end(), id);
    if (at != nodes.end()) mask |= uint64_t{1} << (at - nodes.begin());
  }
  return mask;
}

// The peak of `stages` (which run the parts in sequence) from the parts'
// costs: max over parts of background + its stages' bytes. Checks on the
// way that Step's bytes and resident agree with StageBytes and Resident.
int64_t PeakFromParts(const exec::TensorLayout& layout,
                      const std::vector<std::vector<NodeId>>& parts,
                      const std::vector<std::vector<NodeId>>& stages) {
  int64_t peak = 0;
  size_t s = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const PartMemory pm(layout, parts, k);
    uint64_t done = 0;
    int64_t resident = pm.Resident(0), part_peak = 0;
    const uint64_t full = pm.operators() == 64 ? ~uint64_t{0} : (uint64_t{1} << pm.operators()) - 1;
    while (done != full) {
      const uint64_t stage = LocalMask(pm, stages.at(s++));
      int64_t bytes = pm.StageBytes(done, stage);
      if (std::popcount(stage) == 1) {
        const StepCost step = pm.Step(done, resident, std::countr_zero(stage));
        EXPECT_EQ(step.bytes, bytes);
        EXPECT_EQ(step.resident_after, pm.Resident(done | stage));
        bytes = step.bytes;
      }
      part_peak = std::max(part_peak, bytes);
      done |= stage;
      resident = pm.Resident(done);
    }
    EXPECT_LE(pm.LowerBound(), part_peak) << "part " << k;
    peak = std::max(peak, pm.Background() + part_peak);
  }
  return peak;
}

// The random graphs exercise every way exec lays out a tensor.
TEST(MemoryModelTest, RandomGraphsHaveConcatViewsAliasesGathersAndChainTemps) {
  int views = 0, aliases = 0, gathers = 0, chains = 0;
  for (int seed = 0; seed < kGraphs; ++seed) {
    const Graph g = RandomSmallGraph(static_cast<uint64_t>(seed), OperatorsFor(seed));
    EXPECT_NO_THROW(CheckSingleSinkBlocks(g)) << g.name;
    const exec::TensorLayout layout = exec::LayoutTensors(g);
    views += layout.concat_views;
    for (NodeId id = 1; id < static_cast<NodeId>(g.nodes.size()); ++id) {
      const Node& node = g.node(id);
      const int home = layout.home[static_cast<size_t>(id)];
      aliases += node.op.kind == OpKind::kIdentity && node.inputs.size() == 1 &&
                 node.inputs[0].size() == 1 &&
                 home == layout.home[static_cast<size_t>(node.inputs[0][0].producer)];
      const bool temps = layout.temp_elements[static_cast<size_t>(id)] > 0;
      gathers += temps && node.op.kind == OpKind::kConv;
      chains += temps && node.op.kind == OpKind::kSequential;
    }
  }
  EXPECT_GT(views, kGraphs / 10);
  EXPECT_GT(aliases, kGraphs / 10);
  EXPECT_GT(gathers, kGraphs / 10);
  EXPECT_GT(chains, kGraphs / 10);
}

TEST(MemoryModelTest, PeakEqualsThePlansPeakLiveBytesForEverySequentialOrder) {
  for (int seed = 0; seed < kGraphs; ++seed) {
    const Graph g = RandomSmallGraph(static_cast<uint64_t>(seed), OperatorsFor(seed));
    for (int o = 0; o < kOrdersPerGraph; ++o) {
      const std::vector<NodeId> order = RandomTopologicalOrder(g, static_cast<uint64_t>(o));
      const int64_t plan = exec::PlanMemory(g, OneOperatorStages(order)).peak_live_bytes;
      ASSERT_EQ(PeakOf(g, Singletons(order), 1), plan) << g.name << " order " << o;
      ASSERT_EQ(PeakOf(g, Singletons(order), 3), 3 * plan) << g.name << " order " << o;
    }
  }
}

TEST(MemoryModelTest, PeakEqualsThePlanOnRandomStageSchedulesWithoutMerges) {
  int concurrent = 0;
  for (int seed = 0; seed < kGraphs; ++seed) {
    const Graph g = RandomSmallGraph(static_cast<uint64_t>(seed), OperatorsFor(seed));
    for (int o = 0; o < kOrdersPerGraph; ++o) {
      const std::vector<NodeId> order = RandomTopologicalOrder(g, static_cast<uint64_t>(o));
      const std::vector<Stage> stages =
          RandomStages(g, order, static_cast<uint64_t>(seed * 31 + o));
      concurrent += stages.size() < order.size();
      ASSERT_EQ(PeakOf(g, MemberSets(stages), 1), exec::PlanMemory(g, stages).peak_live_bytes)
          << g.name << " order " << o;
    }
  }
  EXPECT_GT(concurrent, kGraphs);  // the schedules are not all sequential
}

TEST(MemoryModelTest, PlanMemoryReportsWhatTheProgramBuilderDoes) {
  for (int seed = 0; seed < 40; ++seed) {
    const Graph g = RandomSmallGraph(static_cast<uint64_t>(seed), OperatorsFor(seed));
    const std::vector<Stage> stages =
        RandomStages(g, RandomTopologicalOrder(g, 1), static_cast<uint64_t>(seed));
    const exec::MemoryPlanSummary built =
        exec::BuildNetworkProgram(g, stages, exec::WeightStore::Random(g, 1)).memory;
    const exec::MemoryPlanSummary planned = exec::PlanMemory(g, stages);
    EXPECT_EQ(planned.peak_live_bytes, built.peak_live_bytes) << g.name;
    EXPECT_EQ(planned.allocated_bytes, built.allocated_bytes) << g.name;
    EXPECT_EQ(planned.buffers, built.buffers) << g.name;
    EXPECT_EQ(planned.slots, built.slots) << g.name;
    EXPECT_EQ(planned.concat_views, built.concat_views) << g.name;
  }
}

TEST(MemoryModelTest, PartsAddUpToThePeakOfAnOrderThatRunsThemInSequence) {
  for (MemoryModel model : {MemoryModel::kPlan, MemoryModel::kPerNode}) {
    for (int seed = 0; seed < kGraphs; ++seed) {
      const Graph g = RandomSmallGraph(static_cast<uint64_t>(seed), OperatorsFor(seed));
      const exec::TensorLayout layout = ModelLayout(g, model);
      for (int o = 0; o < kOrdersPerGraph; ++o) {
        const std::vector<NodeId> order = RandomTopologicalOrder(g, static_cast<uint64_t>(o));
        const auto stages = Singletons(order);
        const auto parts = RandomParts(stages, static_cast<uint64_t>(seed + 1000 * o));
        ASSERT_EQ(PeakFromParts(layout, parts, stages), PeakOf(g, stages, 1, model))
            << g.name << " order " << o << " model " << static_cast<int>(model);
      }
    }
  }
}

TEST(MemoryModelTest, PartsAddUpToThePeakOfAStageScheduleThatRunsThemInSequence) {
  for (int seed = 0; seed < kGraphs; ++seed) {
    const Graph g = RandomSmallGraph(static_cast<uint64_t>(seed), OperatorsFor(seed));
    const exec::TensorLayout layout = exec::LayoutTensors(g);
    const std::vector<NodeId> order = RandomTopologicalOrder(g, 7);
    const auto stages = MemberSets(RandomStages(g, order, static_cast<uint64_t>(seed)));
    const auto parts = RandomParts(stages, static_cast<uint64_t>(seed));
    ASSERT_EQ(PeakFromParts(layout, parts, stages), PeakOf(g, stages, 1)) << g.name;
  }
}

TEST(MemoryModelTest, SplittingAStageNeverRaisesItsBytes) {
  int strictly_lower = 0;
  for (int seed = 0; seed < kGraphs; ++seed) {
    const Graph g = RandomSmallGraph(static_cast<uint64_t>(seed), OperatorsFor(seed));
    const exec::TensorLayout layout = exec::LayoutTensors(g);
    std::vector<NodeId> all;
    for (NodeId id = 1; id < static_cast<NodeId>(g.nodes.size()); ++id) all.push_back(id);
    const PartMemory pm(layout, {all}, 0);
    const std::vector<NodeId> order = RandomTopologicalOrder(g, static_cast<uint64_t>(seed));
    SplitMix rng(static_cast<uint64_t>(seed));
    // D: a prefix of the order; X: the next few operators; x: X's first,
    // whose producers are all in D.
    const int n = static_cast<int>(order.size());
    const int prefix = rng.Uniform(0, n - 1);
    const int size = rng.Uniform(1, n - prefix);
    const uint64_t done = LocalMask(pm, {order.begin(), order.begin() + prefix});
    const uint64_t stage = LocalMask(pm, {order.begin() + prefix, order.begin() + prefix + size});
    const uint64_t x = LocalMask(pm, {order[static_cast<size_t>(prefix)]});
    const int64_t whole = pm.StageBytes(done, stage);
    EXPECT_LE(pm.StageBytes(done, x), whole) << g.name;
    EXPECT_LE(pm.StageBytes(done | x, stage & ~x), whole) << g.name;
    strictly_lower += pm.StageBytes(done, x) < whole;
  }
  EXPECT_GT(strictly_lower, 0);
}

// Hand-built graphs on 1x1 maps, so elements are channels.
class Small {
 public:
  explicit Small(int input_channels) : g_(testing::GraphWithInput({input_channels, 1, 1})) {}
  NodeId Add(const std::string& name, OpParams op, Inputs inputs) {
    g_.nodes.push_back({name, "", std::move(op), std::move(inputs), {}});
    return static_cast<NodeId>(g_.nodes.size()) - 1;
  }
  NodeId Conv(const std::string& name, int out, Inputs inputs) {
    return Add(name, ConvOp(out, 1), std::move(inputs));
  }
  Graph Finish() {
    const NodeId last = static_cast<NodeId>(g_.nodes.size()) - 1;
    Block block{0, {}, last, {}};
    for (NodeId v = 1; v < last; ++v) block.inner.push_back(v);
    g_.blocks.push_back(block);
    InferShapes(g_);
    return g_;
  }

 private:
  Graph g_;
};

Slice All(NodeId id, int channels) { return {id, 0, channels}; }

// Bytes while each operator runs, the operators run in node order.
std::vector<int64_t> StepBytes(const Graph& g, MemoryModel model) {
  std::vector<NodeId> all;
  for (NodeId id = 1; id < static_cast<NodeId>(g.nodes.size()); ++id) all.push_back(id);
  const PartMemory pm(ModelLayout(g, model), {all}, 0);
  std::vector<int64_t> bytes;
  uint64_t done = 0;
  int64_t resident = pm.Resident(0);
  for (int u = 0; u < pm.operators(); ++u) {
    const StepCost step = pm.Step(done, resident, u);
    bytes.push_back(pm.Background() + step.bytes);
    resident = step.resident_after;
    done |= uint64_t{1} << u;
  }
  return bytes;
}

TEST(MemoryModelTest, ConcatViewIsLiveFromItsFirstProducer) {
  Small s(2);
  const NodeId a = s.Conv("a", 3, {{All(0, 2)}});
  const NodeId b = s.Conv("b", 5, {{All(0, 2)}});
  s.Conv("c", 1, {{All(a, 3)}, {All(b, 5)}});
  const Graph g = s.Finish();
  const exec::TensorLayout layout = exec::LayoutTensors(g);
  EXPECT_EQ(layout.concat_views, 1);
  EXPECT_EQ(layout.home[static_cast<size_t>(a)], layout.home[static_cast<size_t>(b)]);
  // a writes its channels of the 8-channel concatenation: all 8 are live.
  EXPECT_EQ(StepBytes(g, MemoryModel::kPlan),
            (std::vector<int64_t>{4 * (2 + 8), 4 * (2 + 8), 4 * (2 + 8 + 1)}));
  EXPECT_EQ(StepBytes(g, MemoryModel::kPerNode),
            (std::vector<int64_t>{4 * (2 + 3), 4 * (2 + 3 + 5), 4 * (3 + 5 + 1)}));
  const std::vector<NodeId> order{1, 2, 3};
  EXPECT_EQ(PeakOf(g, Singletons(order), 1),
            exec::PlanMemory(g, OneOperatorStages(order)).peak_live_bytes);
}

TEST(MemoryModelTest, InputStaysLiveThroughout) {
  Small s(4);
  const NodeId a = s.Conv("a", 1, {{All(0, 4)}});
  const NodeId b = s.Conv("b", 1, {{All(a, 1)}});
  s.Conv("c", 1, {{All(b, 1)}});
  const Graph g = s.Finish();
  // ios-run writes the input once and runs the program many times.
  EXPECT_EQ(StepBytes(g, MemoryModel::kPlan), (std::vector<int64_t>{4 * 5, 4 * 6, 4 * 6}));
  EXPECT_EQ(PeakOf(g, {{1}, {2}, {3}}, 1), 4 * 6);
  // Serenity frees it after its last reader.
  EXPECT_EQ(StepBytes(g, MemoryModel::kPerNode), (std::vector<int64_t>{4 * 5, 4 * 2, 4 * 2}));
  EXPECT_EQ(PeakOf(g, {{1}, {2}, {3}}, 1, MemoryModel::kPerNode), 4 * 5);
}

TEST(MemoryModelTest, SummedTermPaysAGatherTempOnlyInItsStage) {
  Small s(2);
  const NodeId a = s.Conv("a", 3, {{All(0, 2)}});
  const NodeId b = s.Conv("b", 3, {{All(0, 2)}});
  const NodeId c = s.Conv("c", 1, {{All(a, 3), All(b, 3)}});
  s.Conv("d", 1, {{All(c, 1)}});
  const Graph g = s.Finish();
  const exec::TensorLayout layout = exec::LayoutTensors(g);
  EXPECT_EQ(layout.temp_elements[static_cast<size_t>(c)], 3);
  EXPECT_EQ(StepBytes(g, MemoryModel::kPlan),
            (std::vector<int64_t>{4 * (2 + 3), 4 * (2 + 3 + 3), 4 * (2 + 3 + 3 + 3 + 1),
                                  4 * (2 + 1 + 1)}));
  EXPECT_EQ(StepBytes(g, MemoryModel::kPerNode),
            (std::vector<int64_t>{4 * (2 + 3), 4 * (2 + 3 + 3), 4 * (3 + 3 + 1), 4 * (1 + 1)}));
  EXPECT_EQ(PeakOf(g, {{1}, {2}, {3}, {4}}, 1), 4 * 12);
}

TEST(MemoryModelTest, AliasedIdentityExtendsItsProducersLife) {
  Small s(2);
  const NodeId a = s.Conv("a", 4, {{All(0, 2)}});
  const NodeId i = s.Add("i", IdentityOp(), {{Slice{a, 0, 2}}});
  s.Conv("b", 1, {{All(0, 2)}});
  s.Conv("d", 1, {{All(i, 2)}});
  const Graph g = s.Finish();
  const exec::TensorLayout layout = exec::LayoutTensors(g);
  EXPECT_EQ(layout.home[static_cast<size_t>(i)], layout.home[static_cast<size_t>(a)]);
  // i is a view of a's buffer, read by d: all of a lives until d.
  EXPECT_EQ(StepBytes(g, MemoryModel::kPlan),
            (std::vector<int64_t>{4 * (2 + 4), 4 * (2 + 4), 4 * (2 + 4 + 1), 4 * (2 + 4 + 1)}));
  // Serenity copies: a dies once i has it; b, read by nobody, is an output.
  EXPECT_EQ(StepBytes(g, MemoryModel::kPerNode),
            (std::vector<int64_t>{4 * (2 + 4), 4 * (2 + 4 + 2), 4 * (2 + 2 + 1), 4 * (2 + 1 + 1)}));
}

TEST(MemoryModelTest, OutputStaysLiveToTheEndWhenItDoesNotRunLast) {
  Small s(2);
  s.Conv("a", 3, {{All(0, 2)}});
  s.Conv("out", 5, {{All(0, 2)}});
  const Graph g = s.Finish();
  const std::vector<NodeId> order{2, 1};
  EXPECT_EQ(PeakOf(g, Singletons(order), 1), 4 * (2 + 5 + 3));
  EXPECT_EQ(exec::PlanMemory(g, OneOperatorStages(order)).peak_live_bytes, 4 * (2 + 5 + 3));
  // For Serenity both are outputs (nobody reads them).
  EXPECT_EQ(PeakOf(g, Singletons(order), 1, MemoryModel::kPerNode), 4 * (2 + 5 + 3));
  const PartMemory first(exec::LayoutTensors(g), {{2}, {1}}, 0);
  EXPECT_EQ(first.Step(0, first.Resident(0), 0).resident_after, 4 * (2 + 5));
}

TEST(MemoryModelTest, RefusesAScheduleThatRunsAReaderBeforeItsProducer) {
  Small s(2);
  const NodeId a = s.Conv("a", 1, {{All(0, 2)}});
  s.Conv("b", 1, {{All(a, 1)}});
  const Graph g = s.Finish();
  EXPECT_THROW(PeakOf(g, {{2}, {1}}, 1), Error);
  EXPECT_THROW(PeakOf(g, {{1}}, 1), Error);
  EXPECT_THROW(PeakOf(g, {{1}, {1, 2}}, 1), Error);
  EXPECT_THROW(PartMemory(exec::LayoutTensors(g), {{1}}, 0), Error);
}

}  // namespace
}  // namespace ios::memory
