// RandWire, the "regular" regime with C = 154 (Xie et al. 2019, as the IOS
// reference implementation builds it): a stride-2 3x3 stem convolution, four
// randomly wired stages, and a relu -> 1x1 conv (1280) -> global pool head.
//
// In a stage every graph node is one relu -> depthwise 3x3 -> pointwise
// operator ("ReluSepConv"): a node without predecessors reads the stage input
// with stride 2, any other node the sum of its predecessors' outputs; the
// stage's exit sums the nodes without successors. The stage graphs are the
// reference's Watts-Strogatz graphs WS(16,4,0.75) and three WS(32,4,0.75),
// drawn once with networkx's RNG and not reproducible from a seed, so they are
// embedded below as data.
#include "common/zoo_randwire.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace ios::zoo {
namespace {

using Edge = WiringEdge;

// ---- Stage wiring: generated data, do not edit by hand ----
// clang-format off
// Extracted by scripts/extract_randwire_edges.py from the IOS reference
// implementation's export of RandWire
// (../shared/fixtures/ios-reference/models/randwire.json). They are, renumbered,
// the reference's randwire_graphs/generated/ws-16-4-0.75-2.txt and
// ws-32-4-0.75-{3,4,5}.txt. Nodes are numbered in the order the reference
// creates them (a topological order); the edges into a node are listed in
// the order its inputs are summed; kStageNOutputs lists, in summation
// order, the nodes the stage's exit adds up.

// Stage 2: 16 nodes, 32 edges.
constexpr int kStage2Nodes = 16;
constexpr Edge kStage2Edges[] = {
    {2, 3}, {1, 3}, {4, 5}, {0, 5}, {7, 8}, {6, 8}, {7, 9}, {6, 9}, {4, 9}, {1, 9}, {9, 10},
    {7, 11}, {2, 11}, {1, 11}, {9, 11}, {0, 12}, {9, 12}, {4, 13}, {8, 13}, {12, 13}, {11, 13},
    {1, 14}, {5, 14}, {13, 14}, {10, 14}, {3, 14}, {6, 15}, {1, 15}, {0, 15}, {8, 15}, {3, 15},
    {14, 15},
};
constexpr int kStage2Outputs[] = {15};

// Stage 3: 32 nodes, 64 edges.
constexpr int kStage3Nodes = 32;
constexpr Edge kStage3Edges[] = {
    {2, 3}, {4, 5}, {4, 6}, {6, 7}, {7, 8}, {8, 9}, {9, 10}, {1, 11}, {10, 11}, {2, 12}, {8, 12},
    {0, 13}, {12, 13}, {7, 14}, {14, 15}, {9, 15}, {15, 16}, {0, 17}, {8, 17}, {15, 17}, {2, 18},
    {1, 18}, {17, 18}, {3, 18}, {9, 19}, {17, 19}, {16, 19}, {4, 20}, {15, 20}, {0, 21}, {14, 21},
    {20, 21}, {3, 21}, {7, 22}, {11, 22}, {21, 22}, {5, 22}, {12, 23}, {21, 23}, {11, 24},
    {20, 24}, {24, 25}, {13, 25}, {4, 26}, {6, 26}, {10, 26}, {25, 26}, {15, 27}, {24, 27},
    {6, 28}, {20, 28}, {24, 28}, {28, 29}, {16, 29}, {6, 30}, {29, 30}, {14, 31}, {11, 31},
    {20, 31}, {29, 31}, {18, 31}, {30, 31}, {22, 31}, {25, 31},
};
constexpr int kStage3Outputs[] = {19, 23, 27, 26, 31};

// Stage 4: 32 nodes, 64 edges.
constexpr int kStage4Nodes = 32;
constexpr Edge kStage4Edges[] = {
    {0, 1}, {3, 4}, {4, 5}, {6, 7}, {6, 8}, {8, 9}, {9, 10}, {9, 11}, {8, 12}, {7, 12}, {12, 13},
    {0, 13}, {14, 15}, {14, 16}, {12, 16}, {14, 17}, {8, 17}, {16, 17}, {9, 17}, {11, 17},
    {17, 18}, {3, 19}, {4, 19}, {1, 19}, {18, 19}, {2, 20}, {16, 20}, {20, 21}, {11, 21}, {1, 21},
    {13, 21}, {14, 22}, {8, 22}, {20, 22}, {22, 23}, {11, 24}, {15, 24}, {23, 24}, {7, 25},
    {2, 25}, {21, 25}, {23, 25}, {20, 26}, {25, 26}, {24, 26}, {19, 26}, {12, 27}, {10, 27},
    {19, 27}, {26, 27}, {8, 28}, {5, 28}, {21, 28}, {27, 28}, {14, 29}, {6, 29}, {5, 29},
    {27, 29}, {28, 29}, {20, 30}, {22, 30}, {9, 30}, {4, 31}, {30, 31},
};
constexpr int kStage4Outputs[] = {31, 29};

// Stage 5: 32 nodes, 64 edges.
constexpr int kStage5Nodes = 32;
constexpr Edge kStage5Edges[] = {
    {1, 2}, {3, 4}, {3, 5}, {1, 5}, {5, 6}, {0, 6}, {3, 7}, {2, 7}, {3, 8}, {7, 8}, {5, 8},
    {5, 9}, {8, 9}, {4, 9}, {9, 10}, {11, 12}, {4, 12}, {13, 14}, {14, 15}, {15, 16}, {4, 17},
    {16, 17}, {16, 18}, {0, 18}, {13, 19}, {11, 19}, {18, 19}, {12, 19}, {8, 20}, {15, 20},
    {19, 20}, {21, 22}, {2, 22}, {10, 22}, {6, 22}, {13, 23}, {1, 23}, {22, 23}, {21, 24},
    {13, 25}, {4, 25}, {24, 25}, {17, 25}, {11, 26}, {16, 26}, {24, 26}, {20, 26}, {17, 26},
    {2, 27}, {5, 27}, {9, 27}, {24, 27}, {14, 28}, {9, 28}, {27, 28}, {17, 28}, {15, 29},
    {25, 29}, {28, 29}, {21, 30}, {14, 30}, {18, 30}, {0, 31}, {30, 31},
};
constexpr int kStage5Outputs[] = {31, 23, 26, 29};

// clang-format on
// ---- end of generated data ----

// Every edge goes forward, so node order is a topological order.
constexpr bool IsForward(std::span<const Edge> edges, int num_nodes) {
  for (const Edge& e : edges) {
    if (e.from < 0 || e.from >= e.to || e.to >= num_nodes) return false;
  }
  return true;
}
static_assert(IsForward(kStage2Edges, kStage2Nodes));
static_assert(IsForward(kStage3Edges, kStage3Nodes));
static_assert(IsForward(kStage4Edges, kStage4Nodes));
static_assert(IsForward(kStage5Edges, kStage5Nodes));

std::string NodeName(const std::string& stage, int node) {
  return stage + ".node" + (node < 10 ? "0" : "") + std::to_string(node);
}

}  // namespace

OwnedStageWiring OrientLowToHigh(const WsGraph& graph) {
  OwnedStageWiring wiring;
  wiring.num_nodes = graph.num_nodes;
  std::vector<bool> has_successor(graph.num_nodes, false);
  for (const auto& [u, v] : graph.edges) {
    wiring.edges.push_back({std::min(u, v), std::max(u, v)});
    has_successor[std::min(u, v)] = true;
  }
  // Grouped by target, each group in source order: the order inputs are summed.
  std::sort(wiring.edges.begin(), wiring.edges.end(), [](const Edge& a, const Edge& b) {
    return a.to != b.to ? a.to < b.to : a.from < b.from;
  });
  for (int v = 0; v < graph.num_nodes; ++v) {
    if (!has_successor[v]) wiring.outputs.push_back(v);
  }
  return wiring;
}

NodeId RandWireStage(GraphBuilder& b, const std::string& name, NodeId input, int channels,
                     const StageWiring& wiring) {
  if (!IsForward(wiring.edges, wiring.num_nodes)) {
    throw std::logic_error("zoo: stage '" + name + "' has an edge that is not forward");
  }
  std::vector<std::vector<NodeId>> predecessors(wiring.num_nodes);
  std::vector<bool> has_successor(wiring.num_nodes, false);
  for (const Edge& e : wiring.edges) {
    predecessors[e.to].push_back(e.from);
    has_successor[e.from] = true;
  }
  for (int v : wiring.outputs) {
    if (v < 0 || v >= wiring.num_nodes || has_successor[v]) {
      throw std::logic_error("zoo: stage '" + name + "' sums a node that is not a sink");
    }
  }

  b.BeginBlock();
  std::vector<NodeId> out(wiring.num_nodes);
  for (int v = 0; v < wiring.num_nodes; ++v) {
    std::vector<NodeId> sources;
    for (int u : predecessors[v]) sources.push_back(out[u]);
    const bool is_source = sources.empty();
    out[v] = b.AddReluSepConv(NodeName(name, v), is_source ? b.Of(input) : b.Sum(sources), channels,
                              Square(3), Square(is_source ? 2 : 1), Square(1));
  }
  std::vector<NodeId> sinks;
  for (int v : wiring.outputs) sinks.push_back(out[v]);
  NodeId exit = b.AddIdentity(name, b.Sum(sinks));
  b.EndBlock();
  return exit;
}

Graph BuildRandWireLarge() {
  constexpr int kChannels = 154;
  GraphBuilder b("randwire", Shape{3, 224, 224});

  b.BeginBlock();
  NodeId x = b.AddConv("conv1", b.Of(GraphBuilder::kInput), kChannels / 2, Square(3), Square(2),
                       Square(1), Activation::kNone);
  b.EndBlock();

  x = RandWireStage(b, "conv2", x, kChannels, {kStage2Nodes, kStage2Edges, kStage2Outputs});
  x = RandWireStage(b, "conv3", x, 2 * kChannels, {kStage3Nodes, kStage3Edges, kStage3Outputs});
  x = RandWireStage(b, "conv4", x, 4 * kChannels, {kStage4Nodes, kStage4Edges, kStage4Outputs});
  x = RandWireStage(b, "conv5", x, 8 * kChannels, {kStage5Nodes, kStage5Edges, kStage5Outputs});

  b.BeginBlock();
  x = b.AddRelu("relu", b.Of(x));
  x = b.AddConv("conv6", b.Of(x), 1280, Square(1), Square(1), Square(0), Activation::kNone);
  b.AddGlobalAvgPool("avgpool", x);
  b.EndBlock();
  return b.Finish();
}

}  // namespace ios::zoo
