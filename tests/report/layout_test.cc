#include "report/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "tests/report/sample_inputs.h"

namespace ios::report {
namespace {

constexpr double kEps = 1e-9;

// The properties every one-device timeline has (docs/report.md).
void ExpectTimelineHolds(const Graph& graph, const ScheduleRow& schedule,
                         const TimelineLayout& layout) {
  // Every operator in exactly one box.
  std::map<NodeId, int> seen;
  for (const OpBox& box : layout.ops) {
    for (NodeId v : box.nodes) ++seen[v];
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(graph.OperatorCount()));
  for (const auto& [node, count] : seen) EXPECT_EQ(count, 1) << "node " << node;

  // Rows = the most lanes of any stage, a merge stage being one lane.
  int lanes = 0;
  for (const StageRow& s : schedule.stages) {
    lanes = std::max(lanes, s.strategy == Strategy::kMerge ? 1 : static_cast<int>(s.groups.size()));
  }
  EXPECT_EQ(layout.rows, lanes);

  // Stage boxes end to end from 0, each as wide as its latency.
  ASSERT_EQ(layout.stages.size(), schedule.stages.size());
  double at = 0;
  for (size_t k = 0; k < layout.stages.size(); ++k) {
    EXPECT_NEAR(layout.stages[k].start_ms, at, kEps) << "stage " << k;
    if (std::isfinite(schedule.stages[k].latency_ms)) {
      EXPECT_NEAR(layout.stages[k].width_ms, schedule.stages[k].latency_ms, kEps);
    }
    at += layout.stages[k].width_ms;
  }
  EXPECT_NEAR(layout.total_ms, at, kEps);

  // Op boxes inside their stage, on one of its rows; the longest lane fills it.
  std::map<std::pair<int, int>, double> lane_end;
  for (const OpBox& box : layout.ops) {
    const StageBox& stage = layout.stages[static_cast<size_t>(box.stage)];
    EXPECT_GE(box.start_ms, stage.start_ms - kEps);
    EXPECT_LE(box.start_ms + box.width_ms, stage.start_ms + stage.width_ms + kEps);
    EXPECT_GE(box.row, stage.first_row);
    EXPECT_LT(box.row, stage.first_row + stage.rows);
    double& end = lane_end[{box.stage, box.row}];
    end = std::max(end, box.start_ms + box.width_ms);
  }
  for (const StageBox& stage : layout.stages) {
    double longest = 0;
    for (int r = stage.first_row; r < stage.first_row + stage.rows; ++r) {
      longest = std::max(longest, lane_end[{stage.stage, r}]);
    }
    EXPECT_NEAR(longest, stage.start_ms + stage.width_ms, 1e-6) << "stage " << stage.stage;
  }
}

TEST(LayoutTest, TimelineOfEverySampleScheduleHoldsItsProperties) {
  const ReportInput in = testing::SmallInput();
  for (const ScheduleRow& s : in.schedules) {
    SCOPED_TRACE(s.name);
    ExpectTimelineHolds(in.graph, s, LayOutTimeline(s, in.op_alone_ms));
  }
}

TEST(LayoutTest, MergeStageIsOneHatchedBoxOnOneLane) {
  const ReportInput in = testing::SmallInput();
  const TimelineLayout layout = LayOutTimeline(in.schedules[0], in.op_alone_ms);
  EXPECT_TRUE(layout.stages[0].merged);
  EXPECT_EQ(layout.stages[0].rows, 1);
  ASSERT_EQ(layout.ops[0].nodes, (std::vector<NodeId>{1, 2}));
  EXPECT_DOUBLE_EQ(layout.ops[0].width_ms, 0.25);
  EXPECT_EQ(layout.rows, 1);
}

TEST(LayoutTest, OpsShareTheStageByTheirAloneLatency) {
  // Stage {3, 4}: alone 0.1 and 0.05 in a 0.12 ms stage -> 0.08 and 0.04.
  const ReportInput in = testing::SmallInput();
  const TimelineLayout layout = LayOutTimeline(in.schedules[0], in.op_alone_ms);
  ASSERT_EQ(layout.ops[1].nodes, std::vector<NodeId>{3});
  EXPECT_NEAR(layout.ops[1].width_ms, 0.08, kEps);
  EXPECT_NEAR(layout.ops[2].start_ms, 0.25 + 0.08, kEps);
  EXPECT_NEAR(layout.ops[2].width_ms, 0.04, kEps);
}

TEST(LayoutTest, SplitsEquallyWhenAnAloneLatencyIsUnknown) {
  ReportInput in = testing::SmallInput();
  in.op_alone_ms[4] = kNoFigure;
  const TimelineLayout layout = LayOutTimeline(in.schedules[0], in.op_alone_ms);
  EXPECT_NEAR(layout.ops[1].width_ms, 0.06, kEps);
  EXPECT_NEAR(layout.ops[2].width_ms, 0.06, kEps);
  ExpectTimelineHolds(in.graph, in.schedules[0], layout);
  // No alone latencies at all: still every op in a box.
  ExpectTimelineHolds(in.graph, in.schedules[2], LayOutTimeline(in.schedules[2], {}));
}

TEST(LayoutTest, UnpricedStageTakesItsLongestLaneAndSaysItIsEstimated) {
  const ReportInput in = testing::SmallInput();
  const TimelineLayout layout = LayOutTimeline(in.schedules[2], in.op_alone_ms);
  EXPECT_TRUE(layout.stages[1].estimated);
  EXPECT_NEAR(layout.stages[1].width_ms, 0.05, kEps);
  EXPECT_FALSE(layout.stages[0].estimated);
  EXPECT_EQ(layout.rows, 3);
}

TEST(LayoutTest, MultiDeviceGivesEachDeviceItsRowsAndPlacesStagesAtTheirStart) {
  const ReportInput in = testing::SmallInput();
  const MultiDeviceView view = testing::SmallMulti();
  const TimelineLayout layout = LayOutMultiDevice(view, in.op_alone_ms);
  EXPECT_EQ(layout.device_first_row, (std::vector<int>{0, 2}));
  EXPECT_EQ(layout.device_rows, (std::vector<int>{2, 1}));
  EXPECT_EQ(layout.rows, 3);
  std::set<NodeId> seen;
  for (const OpBox& box : layout.ops) {
    const StageBox& stage = *std::find_if(
        layout.stages.begin(), layout.stages.end(),
        [&](const StageBox& s) { return s.device == box.device && s.stage == box.stage; });
    EXPECT_GE(box.row, layout.device_first_row[static_cast<size_t>(box.device)]);
    EXPECT_LT(box.row, layout.device_first_row[static_cast<size_t>(box.device)] +
                           layout.device_rows[static_cast<size_t>(box.device)]);
    EXPECT_GE(box.start_ms, stage.start_ms - kEps);
    EXPECT_LE(box.start_ms + box.width_ms, stage.start_ms + stage.width_ms + kEps);
    for (NodeId v : box.nodes) EXPECT_TRUE(seen.insert(v).second) << v;
  }
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_DOUBLE_EQ(layout.stages[4].start_ms, 0.8);
  ASSERT_EQ(layout.links.size(), 2u);
  EXPECT_DOUBLE_EQ(layout.links[1].start_ms, 0.75);
  EXPECT_NEAR(layout.links[1].width_ms, 0.05, kEps);
  EXPECT_NEAR(layout.total_ms, 0.9, kEps);
}

void ExpectGraphHolds(const Graph& graph, const GraphLayout& layout) {
  ASSERT_EQ(layout.layer.size(), graph.nodes.size());
  EXPECT_EQ(layout.layer[0], 0);
  size_t edges = 0;
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    for (NodeId p : DistinctProducers(graph.nodes[v])) {
      EXPECT_LT(layout.layer[static_cast<size_t>(p)], layout.layer[v]) << p << " -> " << v;
      ++edges;
    }
  }
  EXPECT_EQ(layout.edges.size(), edges);
  // Nodes of a layer sit on distinct positions inside the widest layer.
  std::map<int, std::set<double>> at;
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    EXPECT_TRUE(at[layout.layer[v]].insert(layout.x[v]).second) << "node " << v;
    EXPECT_GE(layout.x[v], 0);
    EXPECT_LE(layout.x[v], layout.width - 1 + kEps);
  }
  EXPECT_EQ(static_cast<int>(at.size()), layout.layers);
}

TEST(LayoutTest, GraphEdgesGoDownwardAndPositionsAreDistinct) {
  ExpectGraphHolds(testing::SmallGraph(), LayOutGraph(testing::SmallGraph()));
  const GraphLayout small = LayOutGraph(testing::SmallGraph());
  EXPECT_EQ(small.layers, 5);  // in, {a, b, c}, d, e, f
  EXPECT_EQ(small.width, 3);
}

TEST(LayoutTest, IsDeterministic) {
  const Graph g = testing::LayeredGraph(300, 3);
  const GraphLayout a = LayOutGraph(g), b = LayOutGraph(g);
  EXPECT_EQ(a.layer, b.layer);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.edges, b.edges);
  const ReportInput in = testing::LargeInput(300);
  const TimelineLayout t1 = LayOutTimeline(in.schedules[0], in.op_alone_ms);
  const TimelineLayout t2 = LayOutTimeline(in.schedules[0], in.op_alone_ms);
  ASSERT_EQ(t1.ops.size(), t2.ops.size());
  for (size_t i = 0; i < t1.ops.size(); ++i) {
    EXPECT_EQ(t1.ops[i].nodes, t2.ops[i].nodes);
    EXPECT_EQ(t1.ops[i].start_ms, t2.ops[i].start_ms);
    EXPECT_EQ(t1.ops[i].row, t2.ops[i].row);
  }
}

TEST(LayoutTest, LaysOutATwoThousandOperatorRandomDag) {
  const ReportInput in = testing::LargeInput(2000);
  ExpectGraphHolds(in.graph, LayOutGraph(in.graph));
  for (const ScheduleRow& s : in.schedules) {
    SCOPED_TRACE(s.name);
    ExpectTimelineHolds(in.graph, s, LayOutTimeline(s, in.op_alone_ms));
  }
}

TEST(LayoutTest, SweepsReduceCrossingsOnATwistedGraph) {
  // in -> a, b; a -> d, b -> c: by id the second layer is (c, d), crossing
  // both edges; one barycenter sweep puts d under a and c under b.
  Graph g = ios::testing::GraphWithInput({4, 1, 1});
  g.nodes.push_back(Node{"a", "", ios::testing::ConvOp(4, 1), {{{0, 0, 4}}}, {}});
  g.nodes.push_back(Node{"b", "", ios::testing::ConvOp(4, 1), {{{0, 0, 4}}}, {}});
  g.nodes.push_back(Node{"c", "", ios::testing::ConvOp(4, 1), {{{2, 0, 4}}}, {}});
  g.nodes.push_back(Node{"d", "", ios::testing::ConvOp(4, 1), {{{1, 0, 4}}}, {}});
  InferShapes(g);
  const GraphLayout none = LayOutGraph(g, 0), swept = LayOutGraph(g);
  EXPECT_LT(none.x[3], none.x[4]);
  EXPECT_LT(swept.x[4], swept.x[3]);
}

}  // namespace
}  // namespace ios::report
