#include "common/blocks.h"

#include <algorithm>
#include <limits>
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

std::vector<std::vector<NodeId>> NarrowParts(const Graph& graph, const Block& block,
                                             int max_operators) {
  const std::vector<NodeId> ops = block.Operators();
  const int n = static_cast<int>(ops.size());
  const int limit = std::max(max_operators, 1);
  // position[node]: where a block operator sits in `ops`; the entry is -1.
  std::vector<int> position(graph.nodes.size(), -2);
  position[block.enter] = -1;
  for (int i = 0; i < n; ++i) position[ops[i]] = i;
  // crossing[i]: tensors produced before position i and read at or after it
  // (a cut before ops[i] leaves them live across it): each producer adds
  // one to every cut between it and its last reader.
  std::vector<int> last_read(n + 1, -2);  // by producer position + 1
  for (int i = 0; i < n; ++i) {
    for (const Term& term : graph.nodes[ops[i]].inputs) {
      for (const Slice& slice : term) {
        const int p = position[slice.producer];
        if (p >= -1) last_read[p + 1] = std::max(last_read[p + 1], i);
      }
    }
  }
  std::vector<int> delta(n + 2, 0);
  for (int p = -1; p < n; ++p) {
    const int last = last_read[p + 1];
    if (last > p) {
      ++delta[p + 1];  // cuts p+1 .. last
      --delta[last + 1];
    }
  }
  std::vector<int> crossing(n + 1, 0);
  for (int i = 0, running = 0; i <= n; ++i) crossing[i] = running += delta[i];
  // best[i]: the cheapest cutting of ops[0, i) ending with a cut before i.
  constexpr long kUnreachable = std::numeric_limits<long>::max();
  std::vector<long> best(n + 1, kUnreachable);
  std::vector<int> from(n + 1, 0);
  best[0] = 0;
  for (int i = 1; i <= n; ++i) {
    for (int j = std::max(0, i - limit); j < i; ++j) {
      if (best[j] == kUnreachable) continue;
      const long cost = best[j] + (j == 0 ? 0 : crossing[j] + 1);
      if (cost < best[i]) {
        best[i] = cost;
        from[i] = j;
      }
    }
  }
  std::vector<std::vector<NodeId>> parts;
  for (int i = n; i > 0; i = from[i]) {
    parts.emplace_back(ops.begin() + from[i], ops.begin() + i);
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

void SetAutomaticBlocks(Graph& graph, int max_operators) {
  graph.blocks = CoalesceBlocks(FindBlocks(graph), max_operators);
  for (Block& block : graph.blocks) {
    if (static_cast<int>(block.inner.size()) + 1 > kAutoPartsFrom) {
      block.parts = NarrowParts(graph, block, kAutoPartOperators);
    }
  }
}

}  // namespace ios
