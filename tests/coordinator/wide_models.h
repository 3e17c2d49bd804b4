// Graphs that are valid but far too wide for an exact DP: one block of
// `width` independent convolutions (1x1, 3x3, 5x5 in turn, so their stages
// differ) in `depth` layers (layer k+1's i-th conv reads layer k's i-th),
// and a concat of the last layer as the block's exit.
#pragma once

#include <string>

#include "common/graph.h"

namespace ios::coordinator::testing {

inline Graph WideBlock(int width, int depth = 1) {
  Graph g;
  g.name = "wide" + std::to_string(width) + "x" + std::to_string(depth);
  Node input{"in", "", {}, {}, {8, 8, 8}};
  input.op.kind = OpKind::kInput;
  g.nodes.push_back(input);
  Block block;
  block.enter = 0;
  for (int layer = 0; layer < depth; ++layer) {
    for (int i = 0; i < width; ++i) {
      const int k = 1 + 2 * (i % 3);
      Node conv{"l" + std::to_string(layer) + "_c" + std::to_string(i), "", {}, {}, {}};
      conv.op.kind = OpKind::kConv;
      conv.op.conv.out_channels = 8;
      conv.op.conv.kernel = {k, k};
      conv.op.conv.stride = {1, 1};
      conv.op.conv.padding = {k / 2, k / 2};
      conv.op.conv.act = Activation::kRelu;
      const NodeId producer = layer == 0 ? 0 : 1 + (layer - 1) * width + i;
      conv.inputs = {{{producer, 0, 8}}};
      block.inner.push_back(static_cast<NodeId>(g.nodes.size()));
      g.nodes.push_back(conv);
    }
  }
  Node concat{"concat", "", {}, {}, {}};
  concat.op.kind = OpKind::kIdentity;
  for (int i = 0; i < width; ++i) concat.inputs.push_back({{1 + (depth - 1) * width + i, 0, 8}});
  block.exit = static_cast<NodeId>(g.nodes.size());
  g.nodes.push_back(concat);
  g.blocks.push_back(block);
  InferShapes(g);
  return g;
}

}  // namespace ios::coordinator::testing
