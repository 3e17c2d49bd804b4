// Two identical convolutions on channel views of one input: one at channel
// 0, whose address is as aligned as its allocation, and one at channel 1,
// whose address is only as aligned as size * size floats make it (4 bytes
// for 17x17 and 35x35: the maps of Inception V3 where an algorithm found on
// the aligned view was reused on the other). The cuda device's tests use it
// to check that the algorithm cache tells the two apart; the GPU tests, to
// check what each computes.
#pragma once

#include "common/graph.h"
#include "common/stage.h"
#include "tests/devices/op_network.h"

namespace ios::devices {

//! The graph: input "in" of 3 x size x size, convolutions "at_channel_0"
//! and "at_channel_1" (4 outputs, 3x3, bias and relu) of one channel each.
inline Graph ChannelViewsGraph(int size) {
  Graph graph;
  Node input{"in", "", {}, {}, {3, size, size}};
  input.op.kind = OpKind::kInput;
  graph.nodes.push_back(input);
  graph.nodes.push_back({"at_channel_0", "", Conv(4, 3, 1), {{{0, 0, 1}}}, {}});
  graph.nodes.push_back({"at_channel_1", "", Conv(4, 3, 1), {{{0, 1, 2}}}, {}});
  InferShapes(graph);
  return graph;
}

//! Both convolutions as one stage, each its own group.
inline StageSpec ChannelViewsStage(const Graph& graph) {
  Stage stage;
  stage.strategy = Strategy::kParallel;
  stage.groups = {{1}, {2}};
  return MakeStageSpec(graph, stage);
}

}  // namespace ios::devices
