// Stages: the unit the search schedules and the farm measures.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
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
  std::vector<Shape> externals;  // shapes of tensors read from outside
  std::vector<std::vector<StageOp>> groups;

  //! Canonical key: equal for stages that differ only in node names, block
  //! or model; different for any change of parameter, shape, grouping or
  //! strategy. Stable across versions of the program (it is a DB key).
  std::string Key() const;
  //! Short readable summary for reports and the DB.
  std::string Describe() const;
  int OperatorCount() const;
};

//! Where a StageSpec sits in its graph: the node whose output is each
//! external input, and the node each op computes. Outside the spec (and its
//! key): equal specs of different stages have different bindings.
struct StageBinding {
  std::vector<NodeId> externals;            // externals[i]: StageSpec::externals[i]'s node
  std::vector<std::vector<NodeId>> groups;  // groups[g][k]: the node of StageSpec::groups[g][k]
  friend bool operator==(const StageBinding&, const StageBinding&) = default;
};

//! A canonical stage and its binding to graph tensors: what a backend
//! builds (the spec) and where its inputs and outputs live (the binding).
struct BoundStage {
  StageSpec spec;
  StageBinding binding;
};

//! Builds the canonical spec of `stage` in `graph` (shapes must be inferred).
//! A one-operator stage is always kParallel, so merge and parallel singletons
//! share one key. Throws ios::Error if a merge stage is not mergeable.
StageSpec MakeStageSpec(const Graph& graph, const Stage& stage);

namespace detail {
//! A group of a stage in canonical form, prepared once per distinct group
//! by a keyer (StageKeyer::Key reads it, never rebuilds it).
struct GroupForm {
  std::string signature;          // the group described on its own
  std::vector<NodeId> nodes;      // canonical order
  std::vector<NodeId> externals;  // outside inputs, in order of first use
  //! The group's part of a stage key with the outside inputs' stage-wide
  //! numbers left open: hole i sits at body offset holes[i].first and is
  //! filled with the number of externals[holes[i].second].
  std::string body;
  std::vector<std::pair<uint32_t, uint32_t>> holes;
};
//! Per-node text a keyer prepares once: each node's op key text, its output
//! shape, and its form as a group of its own (most groups of most stages).
struct NodeTexts {
  std::vector<std::string> op, shape;
  std::vector<GroupForm> single;
};
//! The first reason CanMerge(graph, nodes) refuses, for messages.
std::string WhyNotMergeable(const Graph& graph, const std::vector<NodeId>& nodes);
//! Reused buffers, so keying a stage allocates nothing in the common case.
struct KeyScratch {
  std::vector<NodeId> placed, fresh, chosen_fresh, sorted_nodes;
  std::string best, candidate;
  // Breaking ties between alike groups (CanonicalGroups).
  std::vector<std::string> uses, refined;
  std::vector<std::pair<NodeId, size_t>> use_refs;
  std::vector<size_t> remaining;
  std::vector<NodeId> numbering;
  std::vector<const GroupForm*> sorted;
  // Per group of the stage being keyed: where its outside inputs' stage-wide
  // numbers start in `external_numbers`.
  std::vector<uint32_t> external_numbers, number_offsets;
};
//! Forms of the multi-operator groups a keyer has met, by operator set.
//! Bounded: past kMaxForms it starts again (never while a stage is keyed,
//! so the forms of the stage at hand stay valid).
class GroupFormCache {
 public:
  static constexpr size_t kMaxForms = size_t{1} << 17;
  //! Called before a stage's groups are looked up.
  void MakeRoom();
  //! The form of the group with operators `sorted` (ascending), or nullptr.
  const GroupForm* Find(const std::vector<NodeId>& sorted, uint64_t hash) const;
  //! Stores `form` for `sorted`; returns the stored form.
  const GroupForm* Add(const std::vector<NodeId>& sorted, uint64_t hash, GroupForm&& form);

 private:
  struct Entry {
    std::vector<NodeId> sorted;
    uint64_t hash = 0;
    GroupForm form;
  };
  void Grow();
  std::deque<Entry> entries_;
  std::vector<uint32_t> slots_;  // entry index + 1; 0 = empty
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
  //! A text equal for two operator lists exactly when they compute the same
  //! thing up to renaming nodes, taken in the order given: each op's key
  //! text and output shape, its inputs by position in the list or, from
  //! outside it, by order of first use with their shape. Two parts with
  //! equal texts have the same candidate stages with the same keys. The
  //! reference stays valid until the next call.
  const std::string& OrderedKey(const std::vector<NodeId>& ops);
  //! Same as MakeStageSpec(graph, stage), without re-deriving per-node text.
  StageSpec Spec(const Stage& stage);
  //! Spec(stage) together with its binding, found in the same pass: op k of
  //! group g is the node the canonical order put there, external i the node
  //! first read i-th. Throws as MakeStageSpec does.
  BoundStage Bind(const Stage& stage);

 private:
  const Graph& graph_;
  detail::NodeTexts texts_;
  detail::GroupFormCache forms_;
  std::vector<const detail::GroupForm*> groups_;
  detail::KeyScratch buffers_;
  std::vector<NodeId> externals_;
  std::string key_;
};

// ---- The merge rule ---------------------------------------------------------
//
// A merge stage runs its convolutions as one: kernels zero-padded (centred)
// to the largest size per axis and stacked along output channels, output
// split by channel ranges. That is exact when the convolutions read the same
// input and every member's window, centred in the merged one, covers the
// same input pixels for every output pixel. With a common stride s and
// dilation d, a member (kernel k, padding p) centres output o's window on
// input o*s + (d*(k-1) - 2p)/2, so centring needs, per axis:
//   - equal stride, equal dilation,
//   - equal d*(k-1) - 2p (the same centre; with equal input size and stride
//     this also gives every member, and the merged conv, the same output size),
//   - kmax - k even (the smaller kernel sits in the middle of the larger).
// The merged padding is then p + (kmax-k)/2*d, the same for every member.
// Extra end padding (ConvParams::padding_end_extra) must be equal: it only
// lengthens the padded input, so with the same centre every member and the
// merged conv then keep one output size; unequal extras would not.
// Equal output H x W alone is not enough: with stride > 1 windows centred on
// different pixels can still give equal sizes (1x1 p0 and 3x3 p0, stride 3,
// on 33x33). Different dilations are refused (3x3 d2 + 3x3 d1 would need the
// d2 kernel rewritten as a dense 5x5 one); so are grouped and depthwise
// convolutions (in one grouped conv, output group j reads input group j, so
// two members would interleave group by group: a member's output is no
// longer one channel range) and different activations. Bias may differ
// (a missing bias is a zero one).

//! Everything but the input that decides whether convolutions merge: two
//! convolutions with identical inputs can share a merge stage exactly when
//! their signatures are equal. Equality is an equivalence, so every subset
//! of a class of equal signatures is mergeable.
struct MergeSignature {
  Window stride, dilation;
  Window kernel_parity;                // kernel % 2 per axis
  int64_t centre_h = 0, centre_w = 0;  // dilation*(kernel-1) - 2*padding per axis
  Window padding_end_extra{0, 0};
  Activation act = Activation::kNone;
  friend bool operator==(const MergeSignature&, const MergeSignature&) = default;
};

//! The signature of `op`, or nullopt when `op` never merges with another
//! (not a convolution, or a grouped one).
std::optional<MergeSignature> MergeSignatureOf(const OpParams& op);

//! Why two ops cannot share a merge stage: `field` names the first offending
//! parameter as the wire schema does ("kind", "groups", "strideH", "strideW",
//! "dilationH", "dilationW", "kernelH", "kernelW", "padH", "padW",
//! "padEndH", "padEndW", "activation"); `reason` says what differs, with
//! both values.
struct MergeConflict {
  std::string field, reason;
};

//! nullopt when `a` and `b`, if they read identical inputs, can share a
//! merge stage (their signatures are equal); else the first conflict.
std::optional<MergeConflict> FindMergeConflict(const OpParams& a, const OpParams& b);

//! The merge rule on graph nodes: every node has a merge signature, all
//! signatures are equal, all nodes read identical inputs (same terms of
//! the same slices) and their output channels sum to at most
//! limits::kMaxExtent (the merged conv's own limit; a set-level check, so
//! not every subset of a mergeable class fits). A single operator is always
//! mergeable; no operator is not.
bool CanMerge(const Graph& graph, const std::vector<NodeId>& nodes);

//! The convolution a merge stage runs: out_channels summed, kernel the
//! maximum per axis, padding p + (kmax-k)/2*dilation (equal for all members),
//! stride, dilation, extra end padding and activation shared, bias if any member has one. The
//! result does not depend on the order of `convs`, and on the members' input
//! its output H x W equals every member's. Throws ios::Error when `convs` is
//! empty, two of them conflict (see FindMergeConflict) or the summed
//! out_channels exceed limits::kMaxExtent.
ConvParams MergedConv(const std::vector<ConvParams>& convs);

}  // namespace ios
