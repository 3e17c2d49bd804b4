// Where a network program keeps its tensors, as data: the buffers that
// BuildNetworkProgram creates (concatenations as views, aliased identities,
// gathers and chain intermediates as temps), which operators touch each, and
// the memory plan computed from them. The program builder itself is a user
// of these, so a memory model built on a TensorLayout sees exactly what
// ios-run allocates.
#pragma once

#include <cstdint>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"
#include "exec/program.h"

namespace ios::exec {

//! One buffer of a network program. It is live in every stage from the
//! first that runs an operator of `touch` to the last that does, and longer
//! when `pinned` (every stage) or `to_end` (through the last stage).
struct LayoutBuffer {
  int64_t elements = 0;       // float32 values per sample (c * h * w)
  std::vector<NodeId> touch;  // ascending: writers, aliases and readers of it
  bool pinned = false;        // the network input: the caller writes it once
  bool to_end = false;        // the network output (and a device's sent tensors)
  bool temp = false;          // a gather or chain intermediate of `touch`'s step
};

//! The buffers of a network program and, per node, which of them it touches.
//! Temps are buffers like the others (touched by the operator that needs
//! them only); `temp_elements` repeats their size per node for reports.
struct TensorLayout {
  std::vector<LayoutBuffer> buffers;         // the program's buffers, same indices
  std::vector<int> home;                     // per node: buffer of its output, -1 if none
  std::vector<std::vector<int>> buffers_of;  // per node: ascending buffers it touches
  std::vector<int64_t> temp_elements;        // per node: elements of its temps
  int concat_views = 0;                      // concatenations served as views
};

//! The layout BuildNetworkProgram gives `graph` under `stages` (empty: one
//! operator per stage in node order). Only merge stages change it: without
//! them every schedule has the same layout. Throws ios::Error as
//! BuildNetworkProgram does for a schedule that is not one.
TensorLayout LayoutTensors(const Graph& graph, const std::vector<Stage>& stages = {});

//! A memory plan: lifetimes at stage granularity, then first-fit slots.
struct MemoryPlan {
  std::vector<int> slot;               // per buffer
  std::vector<int64_t> slot_elements;  // per slot: its largest buffer's elements
  MemoryPlanSummary summary;           // at batch 1
};

//! Plans `layout` for a schedule of `stages` stages where node u runs in
//! stage `stage_of[u]` (-1: not in this program). Buffers are placed first
//! fit in order of their first stage (ties: buffer index); a slot is free
//! again once its occupant's last stage has ended.
MemoryPlan PlanSlots(const TensorLayout& layout, const std::vector<int>& stage_of, int stages);

//! What BuildNetworkProgram reports as its memory plan, without weights.
MemoryPlanSummary PlanMemory(const Graph& graph, const std::vector<Stage>& stages);

}  // namespace ios::exec
