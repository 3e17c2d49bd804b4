#include "memory/memory_model.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/printable.h"

namespace ios::memory {
namespace {

constexpr int64_t kBytesPerElement = 4;  // float32

exec::TensorLayout PerNodeLayout(const Graph& graph) {
  const size_t n = graph.nodes.size();
  exec::TensorLayout layout;
  layout.buffers.resize(n);
  layout.home.resize(n);
  layout.buffers_of.resize(n);
  layout.temp_elements.assign(n, 0);
  for (size_t v = 0; v < n; ++v) {
    const Shape& s = graph.nodes[v].output;
    layout.buffers[v].elements = int64_t{s.c} * s.h * s.w;
    layout.home[v] = static_cast<int>(v);
  }
  // Touch lists stay ascending: readers come after their producers.
  for (NodeId v = 1; v < static_cast<NodeId>(n); ++v) {
    std::vector<int>& of = layout.buffers_of[static_cast<size_t>(v)];
    of = DistinctProducers(graph.node(v));
    of.push_back(v);
    for (int b : of) layout.buffers[static_cast<size_t>(b)].touch.push_back(v);
  }
  for (NodeId v = 1; v < static_cast<NodeId>(n); ++v) {
    exec::LayoutBuffer& b = layout.buffers[static_cast<size_t>(v)];
    b.to_end = b.touch.size() == 1;  // read by nobody: a network output
  }
  return layout;
}

}  // namespace

exec::TensorLayout ModelLayout(const Graph& graph, MemoryModel model) {
  return model == MemoryModel::kPlan ? exec::LayoutTensors(graph) : PerNodeLayout(graph);
}

int64_t PeakOf(const Graph& graph, const std::vector<std::vector<NodeId>>& stages, int batch,
               MemoryModel model) {
  const size_t n = graph.nodes.size();
  std::vector<int> stage_of(n, -1);
  for (size_t s = 0; s < stages.size(); ++s) {
    for (NodeId id : stages[s]) {
      if (id > 0 && id < static_cast<NodeId>(n) && stage_of[static_cast<size_t>(id)] == -1) {
        stage_of[static_cast<size_t>(id)] = static_cast<int>(s);
      }
    }
  }
  for (NodeId id = 1; id < static_cast<NodeId>(n); ++id) {
    const int s = stage_of[static_cast<size_t>(id)];
    for (NodeId p : DistinctProducers(graph.node(id))) {
      if (p != 0 && s >= 0 && stage_of[static_cast<size_t>(p)] > s) {
        throw Error("memory: stage " + std::to_string(s) + ": node " + Quoted(graph.node(id).name) +
                    " reads " + Quoted(graph.node(p).name) + ", which runs later (stage " +
                    std::to_string(stage_of[static_cast<size_t>(p)]) + ")");
      }
    }
  }
  return PeakOf(ModelLayout(graph, model), stages, batch);
}

int64_t PeakOf(const exec::TensorLayout& layout, const std::vector<std::vector<NodeId>>& stages,
               int batch) {
  const size_t n = layout.buffers_of.size();
  std::vector<int> stage_of(n, -1);
  for (size_t s = 0; s < stages.size(); ++s) {
    for (NodeId id : stages[s]) {
      const std::string where = "memory: stage " + std::to_string(s) + ": ";
      if (id <= 0 || id >= static_cast<NodeId>(n)) {
        throw Error(where + "operator #" + std::to_string(id) + " does not exist");
      }
      if (stage_of[static_cast<size_t>(id)] != -1) {
        throw Error(where + "operator #" + std::to_string(id) + " already runs in stage " +
                    std::to_string(stage_of[static_cast<size_t>(id)]));
      }
      stage_of[static_cast<size_t>(id)] = static_cast<int>(s);
    }
  }
  for (NodeId id = 1; id < static_cast<NodeId>(n); ++id) {
    if (stage_of[static_cast<size_t>(id)] == -1) {
      throw Error("memory: operator #" + std::to_string(id) + " is in no stage");
    }
  }
  // Stage j after prefix D: a buffer is live iff pinned, or it is touched
  // in D|X_j and (kept to the end or touched outside D). Counting touches
  // done per buffer, only the buffers of X_j's operators change.
  const size_t buffers = layout.buffers.size();
  std::vector<size_t> done(buffers, 0);
  std::vector<int> seen(buffers, -1);
  int64_t resident = 0, peak = 0;
  for (const exec::LayoutBuffer& b : layout.buffers) {
    if (b.pinned) resident += b.elements;
  }
  for (size_t s = 0; s < stages.size(); ++s) {
    std::vector<int> touched;
    for (NodeId id : stages[s]) {
      for (int b : layout.buffers_of[static_cast<size_t>(id)]) {
        if (seen[static_cast<size_t>(b)] != static_cast<int>(s)) {
          seen[static_cast<size_t>(b)] = static_cast<int>(s);
          touched.push_back(b);
        }
      }
    }
    int64_t bytes = resident;
    for (int b : touched) {
      const exec::LayoutBuffer& buffer = layout.buffers[static_cast<size_t>(b)];
      if (!buffer.pinned && done[static_cast<size_t>(b)] == 0) bytes += buffer.elements;
    }
    peak = std::max(peak, bytes);
    for (int b : touched) {
      const exec::LayoutBuffer& buffer = layout.buffers[static_cast<size_t>(b)];
      if (!buffer.pinned && done[static_cast<size_t>(b)] == 0) resident += buffer.elements;
    }
    for (NodeId id : stages[s]) {
      for (int b : layout.buffers_of[static_cast<size_t>(id)]) ++done[static_cast<size_t>(b)];
    }
    for (int b : touched) {
      const exec::LayoutBuffer& buffer = layout.buffers[static_cast<size_t>(b)];
      if (!buffer.pinned && !buffer.to_end && done[static_cast<size_t>(b)] == buffer.touch.size()) {
        resident -= buffer.elements;
      }
    }
  }
  return peak * kBytesPerElement * batch;
}

PartMemory::PartMemory(const exec::TensorLayout& layout,
                       const std::vector<std::vector<NodeId>>& parts, size_t index)
    : nodes_(parts.at(index)) {
  const size_t n = layout.buffers_of.size();
  std::vector<int> part_of(n, -1), local_of(n, -1);
  for (size_t k = 0; k < parts.size(); ++k) {
    for (size_t i = 0; i < parts[k].size(); ++i) {
      const NodeId id = parts[k][i];
      const std::string where = "memory: part " + std::to_string(k) + ": ";
      if (id <= 0 || id >= static_cast<NodeId>(n)) {
        throw Error(where + "operator #" + std::to_string(id) + " does not exist");
      }
      if (part_of[static_cast<size_t>(id)] != -1) {
        throw Error(where + "operator #" + std::to_string(id) + " is already in part " +
                    std::to_string(part_of[static_cast<size_t>(id)]));
      }
      part_of[static_cast<size_t>(id)] = static_cast<int>(k);
      if (k == index) local_of[static_cast<size_t>(id)] = static_cast<int>(i);
    }
  }
  if (nodes_.size() > 64) {
    throw Error("memory: part " + std::to_string(index) + " has " + std::to_string(nodes_.size()) +
                " operators, more than the 64 a part may have");
  }
  const int me = static_cast<int>(index);
  locals_of_.resize(nodes_.size());
  int64_t always = 0;
  for (size_t b = 0; b < layout.buffers.size(); ++b) {
    const exec::LayoutBuffer& buffer = layout.buffers[b];
    Local local{kBytesPerElement * buffer.elements, 0, buffer.pinned,
                buffer.pinned || buffer.to_end};
    for (NodeId id : buffer.touch) {
      const int k = part_of.at(static_cast<size_t>(id));
      if (k == -1) {
        throw Error("memory: operator #" + std::to_string(id) + " touches buffer " +
                    std::to_string(b) + " but is in no part");
      }
      if (k < me) local.started = true;
      if (k > me) local.continues = true;
      if (k == me) local.touch |= uint64_t{1} << local_of[static_cast<size_t>(id)];
    }
    if (local.touch == 0) {
      if (local.started && local.continues) background_ += local.bytes;
      continue;
    }
    if (local.started && local.continues) always += local.bytes;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (local.touch >> i & 1) locals_of_[i].push_back(static_cast<int>(locals_.size()));
    }
    locals_.push_back(local);
  }
  // Each operator's own buffers are all live while it runs.
  int64_t most = 0;
  for (const std::vector<int>& of : locals_of_) {
    int64_t own = 0;
    for (int l : of) {
      const Local& local = locals_[static_cast<size_t>(l)];
      if (!(local.started && local.continues)) own += local.bytes;
    }
    most = std::max(most, own);
  }
  lower_bound_ = always + most;
}

int64_t PartMemory::Resident(uint64_t done) const {
  int64_t bytes = 0;
  for (const Local& local : locals_) {
    if ((local.started || (local.touch & done) != 0) &&
        (local.continues || (local.touch & ~done) != 0)) {
      bytes += local.bytes;
    }
  }
  return bytes;
}

StepCost PartMemory::Step(uint64_t done, int64_t resident_done, int op) const {
  StepCost cost{resident_done, resident_done};
  const uint64_t after = done | uint64_t{1} << op;
  for (int l : locals_of_.at(static_cast<size_t>(op))) {
    const Local& local = locals_[static_cast<size_t>(l)];
    if (!local.started && (local.touch & done) == 0) {
      cost.bytes += local.bytes;
      cost.resident_after += local.bytes;
    }
    if (!local.continues && (local.touch & ~after) == 0) cost.resident_after -= local.bytes;
  }
  return cost;
}

int64_t PartMemory::StageBytes(uint64_t done, uint64_t stage) const {
  int64_t bytes = Resident(done);
  for (const Local& local : locals_) {
    if ((local.touch & stage) != 0 && !local.started && (local.touch & done) == 0) {
      bytes += local.bytes;
    }
  }
  return bytes;
}

}  // namespace ios::memory
