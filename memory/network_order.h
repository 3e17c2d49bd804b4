#pragma once
// The order of a whole network's operators with the least peak activation
// memory: Serenity's divide and conquer. The network is cut at every operator
// that all input-to-output paths pass through (common/blocks.h FindBlocks):
// every other operator is its ancestor or descendant, so every order runs the
// blocks one after another and cutting there loses nothing. A block small
// enough is one part, searched exactly (memory_order.h); a larger one is cut
// into parts run one after another (the graph's own parts of that block, any
// of them over the limit cut by NarrowParts; or NarrowParts of the block),
// which restricts the order: optimal for those parts, not for the block, and
// each such part says so.

#include <cstdint>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"
#include "memory/memory_model.h"
#include "memory/memory_order.h"

namespace ios::memory {

//! Blocks up to this many operators are searched as one part; larger blocks
//! are cut into parts of at most this many. Tuned on the benchmark graphs
//! (docs/benchmarks.md, "Memory-aware ordering"): it keeps RandWire's
//! 33-operator stages whole, and on every benchmark graph the peak is the
//! same as with parts of 64 (the most a part may hold) while NASNet, whose
//! one 374-operator block must be cut anyway, is searched 2-3x faster.
inline constexpr int kDefaultMaxPartOperators = 40;

struct NetworkOrderOptions {
  MemoryModel model = MemoryModel::kPlan;
  //! The per-part search: its engine and state/time budgets. Defaults
  //! (DefaultOrderOptions): 1M states and 0.5 s a step, 8 steps, so a part
  //! over budget costs at most 8 steps of 0.5 s before it is cut again;
  //! every benchmark part is solved in its first step (docs/benchmarks.md).
  MemoryOrderOptions order = DefaultOrderOptions();
  //! At most PartDag::kMaxOperators.
  int max_part_operators = kDefaultMaxPartOperators;
  //! A part of more than 4 operators whose search runs out of budget is cut
  //! in halves (NarrowParts) and each is searched again (and cut again if
  //! need be); false: the part keeps the fallback order (Kahn or greedy).
  bool recut_over_budget = true;
  //! The peaks are reported at this batch (every byte scales with it).
  int batch = 1;

  static MemoryOrderOptions DefaultOrderOptions();
};

//! How one part of the network was ordered.
struct PartOrderRecord {
  int block = 0;              // index into FindBlocks(graph)
  std::vector<NodeId> order;  // the part's operators in execution order
  int64_t peak_bytes = 0;     // at the batch, background included
  //! KahnOrder of the part alone, at the batch, background included (the
  //! per-cell baseline the Serenity paper reports).
  int64_t kahn_peak_bytes = 0;
  //! The part's order is optimal for the part (false: a fallback, see why).
  bool exact = false;
  //! The part is one of several a block was cut into: even an exact part is
  //! optimal only for the order of parts, not the block.
  bool cut = false;
  int64_t states = 0;
  int steps = 0;
  double seconds = 0;
  std::string why;  // empty when exact
};

struct NetworkOrder {
  std::vector<NodeId> order;  // every operator once, in execution order
  int64_t peak_bytes = 0;     // of `order` at the batch: PeakOf(graph, order, batch, model)
  //! True when `order` is a least-peak order of the whole network: every
  //! part exact and no block cut.
  bool optimal = false;
  std::vector<PartOrderRecord> parts;  // in execution order
  int blocks = 0;                      // FindBlocks' blocks
  //! Baselines at the batch, for reports: Kahn's algorithm with a FIFO queue
  //! over the whole network (sources and newly ready operators in node id
  //! order: a TensorFlow Lite-style order); node id order (ios-run's
  //! sequential schedule); GreedyMemoryOrder part by part.
  int64_t kahn_peak_bytes = 0, node_order_peak_bytes = 0, greedy_peak_bytes = 0;
  //! One line per part that fell back or was cut again, and one when a
  //! baseline beat the parts' order (then `order` is that baseline); each
  //! is also logged (spdlog warn).
  std::vector<std::string> warnings;
  int recuts = 0;      // parts over budget that were cut again
  int64_t states = 0;  // down-sets kept by every search, the abandoned ones included
  double seconds = 0;  // the whole search, baselines included

  //! `order` as stages of one operator each (what ios-run runs).
  std::vector<Stage> Stages() const;
};

//! The least-peak order of `graph` under `options` (see the file comment).
//! Requires nodes in topological order with one sink, the last node (as
//! FindBlocks); throws ios::Error otherwise or for options out of range.
NetworkOrder OptimalNetworkOrder(const Graph& graph, const NetworkOrderOptions& options = {});

//! Kahn's algorithm with a FIFO queue over every operator of `graph`.
std::vector<NodeId> NetworkKahnOrder(const Graph& graph);

}  // namespace ios::memory
