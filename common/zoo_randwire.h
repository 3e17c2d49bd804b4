// Internal to the model zoo (common/zoo*.cc), like zoo_builder.h: RandWire's
// randomly wired stage, shared by the zoo's RandWire (the IOS reference's
// graphs, embedded) and the generated CIFAR RandWire (Watts-Strogatz graphs
// drawn from a seed).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/watts_strogatz.h"
#include "common/zoo_builder.h"

namespace ios::zoo {

struct WiringEdge {
  int from, to;
};

//! A stage's DAG, viewed: nodes 0..num_nodes-1 in topological order (every
//! edge goes from a smaller to a larger node); the edges into a node in the
//! order its inputs are summed; `outputs` the nodes without successors, in
//! the order the stage's exit sums them.
struct StageWiring {
  int num_nodes = 0;
  std::span<const WiringEdge> edges;
  std::span<const int> outputs;
};

//! A StageWiring that owns its edges (view it with `view()`).
struct OwnedStageWiring {
  int num_nodes = 0;
  std::vector<WiringEdge> edges;
  std::vector<int> outputs;
  StageWiring view() const { return {num_nodes, edges, outputs}; }
};

//! Xie et al.'s orientation of an undirected graph into a DAG: each edge
//! from its smaller to its larger node; a node's inputs summed in the order
//! of their ids, the sinks summed in the order of theirs.
OwnedStageWiring OrientLowToHigh(const WsGraph& graph);

//! One randomly wired stage as one block entered from `input`: every node is
//! a relu -> depthwise 3x3 -> pointwise operator with `channels` outputs; a
//! node without predecessors reads `input` with stride 2, any other node the
//! sum of its predecessors; the block's exit (an identity named `name`) sums
//! `wiring.outputs`. Returns the exit. Throws std::logic_error when an edge
//! is not forward or an output has a successor (a bug in the caller).
NodeId RandWireStage(GraphBuilder& b, const std::string& name, NodeId input, int channels,
                     const StageWiring& wiring);

//! RandWire for 32x32 CIFAR images, as the CIFAR models of the RandWireNN
//! family build it: conv 3x3 (C, relu), conv 3x3 (C), two stages of
//! WS(nodes, k, p) graphs drawn with seeds 2*seed and 2*seed+1 (so no two
//! seeds share a stage graph; C -> 2C at 16x16,
//! 2C -> 4C at 8x8), a 1x1 conv to 1280 and a global average pool. The zoo
//! has no fully connected layer, so the classifier is left out and `classes`
//! only names the model.
struct RandWireCifarOptions {
  int classes = 10;
  int channels = 0;  // C; the zoo's calibrated values are below
  int nodes = 32;
  int k = 4;
  double p = 0.75;
  uint64_t seed = 1;
};
Graph BuildRandWireCifar(const RandWireCifarOptions& options);

//! C for randwire_cifar10 and randwire_cifar100, calibrated so that the
//! multiply-adds come near the Serenity paper's Table 1 (docs/models.md).
constexpr int kRandWireCifar10Channels = 36;
constexpr int kRandWireCifar100Channels = 44;

}  // namespace ios::zoo
