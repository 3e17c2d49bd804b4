#include "common/model_size.h"

#include <vector>

#include "common/slices.h"

namespace ios {

ModelSize CountModelSize(const Graph& graph) {
  ModelSize size;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Node& node = graph.node(id);
    const std::vector<OpParams> chain =
        node.op.kind == OpKind::kSequential ? node.op.chain : std::vector<OpParams>{node.op};
    // Each step reads the previous step's output; the first, the node's input.
    Shape in = ResolveNodeInput(graph, id, chain.front().kind, node.inputs).shape;
    for (const OpParams& op : chain) {
      const Shape out = InferOpOutput(op, {in}, node.name);
      if (op.kind == OpKind::kConv) {
        const int64_t taps =
            static_cast<int64_t>(in.c / op.conv.groups) * op.conv.kernel.h * op.conv.kernel.w;
        size.macs += static_cast<int64_t>(out.c) * out.h * out.w * taps;
        size.weights += static_cast<int64_t>(out.c) * taps + (op.conv.bias ? out.c : 0);
      }
      in = out;
    }
  }
  return size;
}

}  // namespace ios
