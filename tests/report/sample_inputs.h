// Report inputs built by hand, for the report's tests and for report_sample
// (which writes them as pages to look at): a small graph with hostile node
// names, a large random layered DAG, a multi-device view and a matrix.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/graph.h"
#include "report/report.h"
#include "tests/testing/ops.h"
#include "tests/testing/random_dags.h"

namespace ios::report::testing {

//! Node names that would break out of a <script>, an attribute or a string
//! if any of them reached the page unescaped.
inline const std::vector<std::string>& HostileNames() {
  static const std::vector<std::string> names{"</script><script>alert(1)</script>",
                                              "a\"b'c&amp;<d>", "<!--", "]]>\\u2028\u2028"};
  return names;
}

//! in -> {conv a, conv b, pool c} -> concat d -> conv e | -> conv f (block 2).
//! Names a..d are HostileNames(); a and b merge (same 1x1 conv on the input).
inline Graph SmallGraph() {
  using ios::testing::ConvOp;
  Graph g = ios::testing::GraphWithInput({8, 8, 8});
  g.name = "small<model>";
  const auto& bad = HostileNames();
  const auto add = [&](std::string name, OpParams op, Inputs inputs) {
    g.nodes.push_back(Node{std::move(name), "", std::move(op), std::move(inputs), {}});
  };
  add(bad[0], ConvOp(8, 1), {{{0, 0, 8}}});
  add(bad[1], ConvOp(8, 1), {{{0, 0, 8}}});
  add(bad[2], ios::testing::PoolOp(PoolType::kMax, 3, 1, 1), {{{0, 0, 8}}});
  add(bad[3], ios::testing::IdentityOp(), {{{1, 0, 8}}, {{2, 0, 8}}, {{3, 0, 8}}});
  add("e", ConvOp(16, 3, 1, 1), {{{4, 0, 24}}});
  add("f", ConvOp(16, 1), {{{5, 0, 16}}});
  g.blocks.push_back(Block{0, {1, 2, 3, 4}, 5, {}});
  g.blocks.push_back(Block{5, {}, 6, {}});
  InferShapes(g);
  return g;
}

inline StageRow Stage(std::vector<std::vector<NodeId>> groups, int block, double ms,
                      Strategy strategy = Strategy::kParallel) {
  StageRow s;
  s.strategy = strategy;
  s.groups = std::move(groups);
  s.block = block;
  s.latency_ms = ms;
  s.source = Source::kStored;
  s.measured_at = 1700000000;
  s.key_id = "123456789";
  return s;
}

inline ReportInput SmallInput() {
  ReportInput in;
  in.title = "small </script> report";
  in.tool = "test";
  in.version = "0.1.0";
  in.generated_at = "2024-01-01T00:00:00Z";
  in.model = "small<model>";
  in.device = DeviceInfo{"sim", "sim:v100", "sim:v100/1", true};
  in.batch = 1;
  in.graph = SmallGraph();
  in.op_alone_ms = {kNoFigure, 0.2, 0.2, 0.1, 0.05, 0.4, 0.1};
  ScheduleRow ios{"ios", {},  0.75, EndToEnd{0.8, 0.02, 30, "verification", "", false, 0},
                  4096,  true};
  ios.stages = {Stage({{1}, {2}}, 0, 0.25, Strategy::kMerge), Stage({{3, 4}}, 0, 0.12),
                Stage({{5}}, 0, 0.3), Stage({{6}}, 1, 0.08)};
  ios.stages[2].source = Source::kMeasuredNow;
  ScheduleRow seq{"sequential", {}, 1.05, std::nullopt, 3072, false};
  for (NodeId v = 1; v <= 6; ++v) {
    seq.stages.push_back(Stage({{v}}, v == 6 ? 1 : 0, in.op_alone_ms[static_cast<size_t>(v)]));
  }
  ScheduleRow greedy{"greedy", {}, 0.8, std::nullopt, 5000, false};
  greedy.stages = {Stage({{1}, {2}, {3}}, 0, 0.3), Stage({{4}}, 0, kNoFigure), Stage({{5}}, 0, 0.4),
                   Stage({{6}}, 1, 0.1)};
  greedy.stages[1].source = Source::kSkipped;
  in.schedules = {ios, seq, greedy};
  SearchFacts facts;
  facts.parts = {PartRow{0, 0, 0, 4, 3, "exact", false, 40, 90, 120, 17, 5, 12, 0, 3},
                 PartRow{1, 0, 0, 1, 1, "exact", false, 2, 1, 1, 1, 0, 1, 0, 0}};
  facts.warnings = {"a warning with <b>markup</b>"};
  facts.distinct_stages = 18;
  facts.stage_occurrences = 18;
  facts.measured = 5;
  facts.reused = 13;
  facts.skipped = 3;
  facts.enumerate_s = 0.01;
  facts.measure_s = 1.5;
  facts.solve_s = 0.02;
  facts.verify_s = 0.7;
  facts.measure_mode = "lazy";
  facts.settings_key = "w2-n6-r6-float32";
  in.search = facts;
  in.lanes.kind = "sim";
  in.lanes.by_count = {{1, {"modelled stream 0"}}, {2, {"modelled stream 0", "modelled stream 1"}}};
  in.notes = {"a note & <i>more</i>"};
  return in;
}

//! A random layered DAG of `operators` 1x1 convolutions and concatenations,
//! each reading 1..3 of the previous 12 operators (the input at first), one
//! block; `stages` cut it into stages of up to 4 lanes.
inline Graph LayeredGraph(int operators, uint64_t seed) {
  ios::testing::SplitMix rng(seed);
  Graph g = ios::testing::GraphWithInput({4, 2, 2});
  g.name = "layered_" + std::to_string(operators);
  std::vector<bool> read(static_cast<size_t>(operators) + 1, false);
  for (int v = 1; v <= operators; ++v) {
    Inputs inputs;
    if (v == operators) {
      for (int p = 1; p < v; ++p) {
        if (!read[static_cast<size_t>(p)]) inputs.push_back({{p, 0, 4}});
      }
    }
    if (inputs.empty()) {
      std::vector<int> ps;
      const int count = rng.Uniform(1, 3);
      for (int k = 0; k < count; ++k) ps.push_back(std::max(0, v - rng.Uniform(1, 12)));
      std::sort(ps.begin(), ps.end());
      ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
      for (int p : ps) inputs.push_back({{p, 0, 4}});
    }
    for (const Term& t : inputs) read[static_cast<size_t>(t[0].producer)] = true;
    g.nodes.push_back(
        Node{"op" + std::to_string(v), "", ios::testing::ConvOp(4, 1), std::move(inputs), {}});
  }
  Block block{0, {}, operators, {}};
  for (int v = 1; v < operators; ++v) block.inner.push_back(v);
  g.blocks.push_back(block);
  InferShapes(g);
  return g;
}

//! Stages of up to 4 consecutive operators: an operator reading one of the
//! stage's group ends joins that group, else it opens a lane.
inline std::vector<StageRow> ChunkedStages(const Graph& g, const std::vector<double>& alone) {
  std::vector<StageRow> stages;
  StageRow current;
  const auto close = [&] {
    if (current.groups.empty()) return;
    double longest = 0;
    for (const auto& group : current.groups) {
      double sum = 0;
      for (NodeId v : group) sum += alone[static_cast<size_t>(v)];
      longest = std::max(longest, sum);
    }
    current.latency_ms = longest * 0.9;
    current.source = Source::kStored;
    stages.push_back(current);
    current = StageRow{};
  };
  int in_stage = 0;
  for (NodeId v = 1; v < static_cast<NodeId>(g.nodes.size()); ++v) {
    if (in_stage == 4) {
      close();
      in_stage = 0;
    }
    std::vector<NodeId> producers = DistinctProducers(g.node(v));
    bool placed = false, blocked = false;
    for (auto& group : current.groups) {
      for (NodeId u : group) {
        if (std::find(producers.begin(), producers.end(), u) == producers.end()) continue;
        if (u == group.back() && !placed) {
          placed = true;
        } else {
          blocked = true;
        }
      }
    }
    if (blocked) {
      close();
      in_stage = 0;
      placed = false;
    }
    if (placed) {
      for (auto& group : current.groups) {
        if (std::find(producers.begin(), producers.end(), group.back()) != producers.end()) {
          group.push_back(v);
          break;
        }
      }
    } else {
      current.groups.push_back({v});
    }
    ++in_stage;
  }
  close();
  return stages;
}

inline ReportInput LargeInput(int operators, uint64_t seed = 7) {
  ReportInput in;
  in.tool = "test";
  in.model = "layered";
  in.device = DeviceInfo{"cpu", "cpu", "cpu/x", false};
  in.graph = LayeredGraph(operators, seed);
  ios::testing::SplitMix rng(seed + 1);
  in.op_alone_ms.assign(in.graph.nodes.size(), kNoFigure);
  for (size_t v = 1; v < in.graph.nodes.size(); ++v) {
    in.op_alone_ms[v] = 0.05 + 0.01 * rng.Uniform(0, 95);
  }
  ScheduleRow ios{"ios", ChunkedStages(in.graph, in.op_alone_ms), 0, std::nullopt, -1, true};
  ScheduleRow seq{"sequential", {}, 0, std::nullopt, -1, false};
  for (NodeId v = 1; v < static_cast<NodeId>(in.graph.nodes.size()); ++v) {
    seq.stages.push_back(Stage({{v}}, 0, in.op_alone_ms[static_cast<size_t>(v)]));
  }
  for (ScheduleRow* s : {&ios, &seq}) {
    for (const StageRow& st : s->stages) s->predicted_ms += st.latency_ms;
  }
  in.schedules = {ios, seq};
  return in;
}

//! SmallGraph over two devices: a, c, d, e on device 0; b, f on device 1.
inline MultiDeviceView SmallMulti() {
  MultiDeviceView m;
  m.devices = {DeviceStages{"sim:v100#0", {}}, DeviceStages{"sim:v100#1", {}}};
  const auto at = [](std::vector<std::vector<NodeId>> groups, double start, double ms) {
    StageRow s = Stage(std::move(groups), 0, ms);
    s.start_ms = start;
    return s;
  };
  m.devices[0].stages = {at({{1}, {3}}, 0, 0.2), at({{4}}, 0.3, 0.05), at({{5}}, 0.35, 0.4)};
  m.devices[1].stages = {at({{2}}, 0, 0.2), at({{6}}, 0.8, 0.1)};
  m.transfers = {TransferRow{2, 1, 0, 2048, 0.2, 0.3}, TransferRow{5, 0, 1, 4096, 0.75, 0.8}};
  m.predicted_ms = 0.9;
  return m;
}

//! Batches 1 and 16 on sim:v100 and batch 1 on sim:k80, one extra row.
inline MatrixView SmallMatrix() {
  MatrixView m;
  m.settings = {{1, "sim:v100", true}, {16, "sim:v100", true}, {1, "sim:k80", true}};
  m.extra_rows = {"reference <bs1>.json"};
  const double ms[4][3] = {{1.0, 9.0, 3.0}, {1.15, 8.1, 3.3}, {1.1, 8.9, 2.9}, {1.3, 9.9, 3.8}};
  for (const auto& row : ms) {
    m.cells.emplace_back();
    for (double v : row) m.cells.back().push_back(MatrixCell{v, v * 1.02, "measured"});
  }
  m.cells[1][2].measured_ms = kNoFigure;
  m.cells[1][2].source = "dp-sum";
  return m;
}

}  // namespace ios::report::testing
