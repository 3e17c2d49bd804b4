// Stages: the unit the search schedules and the farm measures.
#pragma once

#include <string>
#include <vector>

#include "common/graph.h"

namespace ios {

//! How a stage runs its operators. kParallel: each group is a sequence on
//! its own stream, groups run at once. kMerge: the convolutions (one per
//! group) are zero-padded to the largest kernel and run as one convolution.
enum class Strategy { kParallel, kMerge };
const char* ToString(Strategy strategy);

//! A stage in terms of a graph: which nodes, grouped how.
struct Stage {
  Strategy strategy = Strategy::kParallel;
  std::vector<std::vector<NodeId>> groups;  // each group in topological order
  int OperatorCount() const;
};

//! One input read by a stage op: either a tensor produced outside the stage
//! (`external` index into StageSpec::externals) or the output of an earlier
//! op of the same group (`external` false, index into the group).
struct SliceRef {
  bool external = true;
  int index = 0;
  int begin = 0, end = 0;
  friend bool operator==(const SliceRef&, const SliceRef&) = default;
};

struct StageOp {
  OpParams op;
  std::vector<std::vector<SliceRef>> inputs;  // terms of slices, as in Inputs
  Shape output;
};

//! A self-contained stage description: everything a backend needs to build
//! and time the stage, nothing about node names or where it sits in a
//! network. Built in canonical form, so equal stages compare equal.
struct StageSpec {
  Strategy strategy = Strategy::kParallel;
  std::vector<Shape> externals;             // shapes of tensors read from outside
  std::vector<std::vector<StageOp>> groups;

  //! Canonical key: equal for stages that differ only in node names, block
  //! or model; different for any change of parameter, shape, grouping or
  //! strategy. Stable across versions of the program (it is a DB key).
  std::string Key() const;
  //! Short readable summary for reports and the DB.
  std::string Describe() const;
  int OperatorCount() const;
};

//! Builds the canonical spec of `stage` in `graph` (shapes must be inferred).
//! A one-operator stage is always kParallel, so merge and parallel singletons
//! share one key. Throws ios::Error if a merge stage is not mergeable.
StageSpec MakeStageSpec(const Graph& graph, const Stage& stage);

namespace detail {
//! A group in canonical form (used by StageKeyer's scratch space).
struct CanonicalGroup {
  std::string signature;          // the group described on its own
  std::vector<NodeId> nodes;      // canonical order
  std::vector<NodeId> externals;  // outside inputs, in order of first use
};
//! Reused buffers, so keying a stage allocates nothing in the common case.
struct KeyScratch {
  std::vector<NodeId> placed, fresh, chosen_fresh;
  std::string best, candidate;
};
}  // namespace detail

//! Computes canonical keys of many stages of one graph quickly: per-node
//! text is prepared once, and no StageSpec is built. Key(stage) always equals
//! MakeStageSpec(graph, stage).Key(). Borrows `graph`, which must outlive it.
class StageKeyer {
 public:
  explicit StageKeyer(const Graph& graph);
  //! The key of `stage`; the reference stays valid until the next call.
  const std::string& Key(const Stage& stage);
  //! Same as MakeStageSpec(graph, stage), without re-deriving per-node text.
  StageSpec Spec(const Stage& stage);

 private:
  const Graph& graph_;
  std::vector<std::string> op_text_, shape_text_;
  std::vector<detail::CanonicalGroup> scratch_;
  detail::KeyScratch buffers_;
  std::vector<NodeId> externals_;
  std::string key_;
};

//! The merge rule: every node a convolution with groups = 1, all reading the
//! same single-slice input, with equal input and output resolution, stride
//! and activation. A single operator is always mergeable.
bool CanMerge(const Graph& graph, const std::vector<NodeId>& nodes);

//! The convolution a merge stage runs: out_channels summed, kernel and
//! padding the maxima, stride/activation shared. Requires CanMerge.
ConvParams MergedConv(const std::vector<ConvParams>& convs);

}  // namespace ios
