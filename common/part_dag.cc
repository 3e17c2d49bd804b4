#include "common/part_dag.h"

#include <bit>
#include <string>
#include <unordered_map>

#include "common/error.h"

namespace ios {

void MaskIndex::Clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
}

void MaskIndex::Grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 256 : 2 * old.size(), Slot{});
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.id != kNone) Emplace(slot.mask, slot.id);
  }
}

PartDag PartDag::Make(const Graph& graph, std::span<const NodeId> part) {
  const int n = static_cast<int>(part.size());
  if (n > kMaxOperators) {
    throw Error("a part of " + std::to_string(n) + " operators is over the limit of " +
                std::to_string(kMaxOperators));
  }
  std::unordered_map<NodeId, int> local;
  for (int i = 0; i < n; ++i) local[part[static_cast<size_t>(i)]] = i;
  PartDag dag;
  dag.successors_.assign(static_cast<size_t>(n), 0);
  dag.predecessors_.assign(static_cast<size_t>(n), 0);
  for (int v = 0; v < n; ++v) {
    for (const Term& term : graph.node(part[static_cast<size_t>(v)]).inputs) {
      for (const Slice& s : term) {
        auto it = local.find(s.producer);
        if (it == local.end()) continue;
        if (it->second >= v) {
          throw Error("part is not in topological order: '" + graph.node(s.producer).name +
                      "' is listed after its reader '" +
                      graph.node(part[static_cast<size_t>(v)]).name + "'");
        }
        dag.successors_[static_cast<size_t>(it->second)] |= OpBit(v);
        dag.predecessors_[static_cast<size_t>(v)] |= OpBit(it->second);
      }
    }
  }
  dag.closure_.assign(static_cast<size_t>(n), 0);
  for (int u = n - 1; u >= 0; --u) {
    uint64_t& closure = dag.closure_[static_cast<size_t>(u)];
    closure = OpBit(u);
    for (uint64_t rest = dag.successors(u); rest; rest &= rest - 1) {
      closure |= dag.closure_[static_cast<size_t>(std::countr_zero(rest))];
    }
  }
  return dag;
}

uint64_t PartDag::Ready(uint64_t done) const {
  uint64_t ready = 0;
  for (uint64_t rest = full() & ~done; rest; rest &= rest - 1) {
    const int u = std::countr_zero(rest);
    if ((predecessors(u) & ~done) == 0) ready |= OpBit(u);
  }
  return ready;
}

}  // namespace ios
