// One resolution of an operator's inputs: from terms of channel slices (the
// IOS input model, common/graph.h) to the shape of every term, the views of
// the tensors each slice reads and the shape of the input the operator sees.
// Shape inference, the wire validator, the zoo builder, the model writer and
// the backends all resolve inputs here, so they agree on what is valid and
// on what an operator reads.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "common/stage.h"

namespace ios {

//! Channels [begin, end) of a tensor of shape `source_shape`. `source` is
//! the caller's name for that tensor: a NodeId for graph inputs, a stage
//! source index (see ResolveStageInput) for stage ops.
struct SliceView {
  int source = -1;
  int begin = 0, end = 0;
  Shape source_shape;
  //! What the slice contributes: its channels at the source's resolution.
  Shape shape() const { return {end - begin, source_shape.h, source_shape.w}; }
  friend bool operator==(const SliceView&, const SliceView&) = default;
};

//! One term: its slices, summed element-wise, all of shape `shape`.
struct ResolvedTerm {
  Shape shape;
  std::vector<SliceView> slices;
};

//! The input of one operator, resolved and checked.
struct ResolvedInput {
  std::vector<ResolvedTerm> terms;
  //! The tensor the operator reads: the terms concatenated along channels,
  //! or for kEltwise (terms combined element-wise) the terms' common shape.
  Shape shape;
  //! Per sample: values read from the sources (every slice's elements), and
  //! element-wise additions that summing each term's slices takes. Doubles,
  //! accumulated slice by slice in order, as the simulator prices them.
  double elements_read = 0;
  double sum_additions = 0;
  //! Some term sums two or more slices (so reading the input is real work).
  bool sums_slices = false;

  //! Each term's shape, in order (what InferOpOutput takes).
  std::vector<Shape> TermShapes() const;
};

//! Why an operator's inputs do not resolve. what() is "<field>: <reason>",
//! the field relative to the operator ("inputs", "inputs[1]",
//! "inputs[1][0].end"), so a caller prefixes its own context: the wire
//! validator its path and '.', shape inference "node 'x': ".
class InputError : public Error {
 public:
  enum class Kind {
    kNoTerm,      // no term at all ("inputs")
    kEmptyTerm,   // a term without slices ("inputs[t]")
    kLimit,       // over a limit of common/limits.h ("inputs" or "inputs[t]")
    kReference,   // the slice's source does not exist or is not readable ("inputs[t][s].index")
    kRange,       // channels not inside the source ("inputs[t][s].begin" or ".end")
    kSummed,      // summed slices differ in shape ("inputs[t][s]")
    kTermShapes,  // terms disagree: spatially (concatenated) or at all (kEltwise) ("inputs")
  };
  InputError(Kind kind, int term, int slice, const std::string& field, const std::string& reason);
  Kind kind() const { return kind_; }
  //! The offending term and slice, or -1 when the error is not about one.
  int term() const { return term_; }
  int slice() const { return slice_; }
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  Kind kind_;
  int term_, slice_;
  std::string field_, reason_;
};

//! Resolves the input of an operator of kind `kind` reading `terms` (each a
//! list of slices whose source shapes the caller has looked up; their
//! references are the caller's to check). Checks, in this order and per
//! term: at least one term and at most limits::kMaxTerms; each term has one
//! to limits::kMaxSlices slices; each slice has 0 <= begin < end <=
//! source channels; a term's slices have equal shapes. Then across terms:
//! concatenated terms (every kind but kEltwise) share height and width and
//! their channels sum to at most limits::kMaxExtent; element-wise terms
//! (kEltwise) have equal shapes. Whether the kind accepts that many terms
//! (an eltwise needs two) is InferOpOutput's business. Throws InputError.
ResolvedInput ResolveInput(OpKind kind, std::vector<std::vector<SliceView>> terms);

//! The input of an operator of kind `kind` reading `inputs` in `graph`,
//! which would be node `consumer` (an existing node, or graph.nodes.size()
//! for one being added): every producer must be a node before it, whose
//! output shape is set. Sources are producers' NodeIds. Throws InputError
//! (kReference: "unknown producer #7", "producer 'x' does not come before
//! it ...", field "inputs").
ResolvedInput ResolveNodeInput(const Graph& graph, NodeId consumer, OpKind kind,
                               const Inputs& inputs);

//! The input of op `op` of group `group` of `spec`. Sources are numbered
//! externals first, then the group's ops: external i is source i, op j of
//! the same group is source spec.externals.size() + j. An op reads only
//! externals and earlier ops of its group. Throws InputError (kReference,
//! field "inputs[t][s].index", e.g. "7 out of range (2 externals)" or "1 is
//! not an earlier op of the group (op 0)"); `group` and `op` must exist.
ResolvedInput ResolveStageInput(const StageSpec& spec, size_t group, size_t op);

//! The source of a stage op's slice as ResolveStageInput numbers it.
int StageSource(const StageSpec& spec, const SliceRef& ref);

}  // namespace ios
