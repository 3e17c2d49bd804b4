#include "common/blocks.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/printable.h"

namespace ios {

std::vector<Block> FindBlocks(const Graph& graph) {
  const int n = static_cast<int>(graph.nodes.size());
  if (n < 2) throw Error("graph " + Quoted(graph.name) + ": has no operator");
  // last_reader[v]: the latest node reading v's output (v itself if none).
  std::vector<int> last_reader(n);
  for (int v = 0; v < n; ++v) last_reader[v] = v;
  for (int v = 1; v < n; ++v) {
    for (const Term& term : graph.nodes[v].inputs) {
      for (const Slice& slice : term) {
        if (slice.producer < 0 || slice.producer >= v) {
          throw Error("node " + Quoted(graph.nodes[v].name) +
                      ": reads a node that is not before it (nodes must be in topological order)");
        }
        last_reader[slice.producer] = std::max(last_reader[slice.producer], v);
      }
    }
  }
  for (int v = 0; v < n - 1; ++v) {
    if (last_reader[v] == v) {
      throw Error("node " + Quoted(graph.nodes[v].name) +
                  ": nothing reads its output, and it is not the graph's output (the last node, " +
                  Quoted(graph.nodes[n - 1].name) + ")");
    }
  }
  std::vector<Block> blocks;
  Block open;
  open.enter = 0;
  // reach: the latest node read by anything at or before the sweep point.
  int reach = last_reader[0];
  for (int v = 1; v < n; ++v) {
    // Every edge from before v lands at or before v: v is a cut.
    if (reach <= v) {
      open.exit = v;
      blocks.push_back(std::move(open));
      open = Block{};
      open.enter = v;
    } else {
      open.inner.push_back(v);
    }
    reach = std::max(reach, last_reader[v]);
  }
  return blocks;
}

std::vector<Block> CoalesceBlocks(const std::vector<Block>& blocks, int max_operators) {
  std::vector<Block> joined;
  for (const Block& block : blocks) {
    const size_t size = block.inner.size() + 1;
    if (!joined.empty() &&
        joined.back().inner.size() + 1 + size <= static_cast<size_t>(std::max(max_operators, 1))) {
      Block& last = joined.back();
      last.inner.push_back(last.exit);
      last.inner.insert(last.inner.end(), block.inner.begin(), block.inner.end());
      last.exit = block.exit;
      continue;
    }
    joined.push_back(block);
  }
  return joined;
}

void SetAutomaticBlocks(Graph& graph, int max_operators) {
  graph.blocks = CoalesceBlocks(FindBlocks(graph), max_operators);
}

}  // namespace ios
