#include "common/slices.h"

#include <cstdint>
#include <utility>

#include "common/limits.h"
#include "common/printable.h"

namespace ios {
namespace {

std::string TermField(size_t t) { return "inputs[" + std::to_string(t) + "]"; }

std::string SliceField(size_t t, size_t s) { return TermField(t) + "[" + std::to_string(s) + "]"; }

// The limit texts of shape inference: the same words wherever they come from.
std::string OverLimit(const std::string& what, int64_t value, int64_t limit) {
  return what + std::to_string(value) + " exceeds the limit of " + std::to_string(limit) +
         " (the most a worker can measure, common/limits.h)";
}

[[noreturn]] void Fail(InputError::Kind kind, size_t term, size_t slice, const std::string& field,
                       const std::string& reason) {
  throw InputError(kind, static_cast<int>(term), static_cast<int>(slice), field, reason);
}

constexpr size_t kNone = static_cast<size_t>(-1);  // "not about one term / slice"

double Elements(const Shape& s) { return static_cast<double>(s.c) * s.h * s.w; }

}  // namespace

InputError::InputError(Kind kind, int term, int slice, const std::string& field,
                       const std::string& reason)
    : Error(field + ": " + reason),
      kind_(kind),
      term_(term),
      slice_(slice),
      field_(field),
      reason_(reason) {}

std::vector<Shape> ResolvedInput::TermShapes() const {
  std::vector<Shape> shapes;
  shapes.reserve(terms.size());
  for (const ResolvedTerm& term : terms) shapes.push_back(term.shape);
  return shapes;
}

ResolvedInput ResolveInput(OpKind kind, std::vector<std::vector<SliceView>> terms) {
  using Kind = InputError::Kind;
  if (terms.empty())
    Fail(Kind::kNoTerm, kNone, kNone, "inputs", "an op needs at least one input term");
  if (terms.size() > limits::kMaxTerms) {
    Fail(Kind::kLimit, kNone, kNone, "inputs",
         OverLimit("number of concatenated terms ", static_cast<int64_t>(terms.size()),
                   static_cast<int64_t>(limits::kMaxTerms)));
  }
  ResolvedInput in;
  in.terms.reserve(terms.size());
  for (size_t t = 0; t < terms.size(); ++t) {
    std::vector<SliceView>& slices = terms[t];
    if (slices.empty())
      Fail(Kind::kEmptyTerm, t, kNone, TermField(t), "a term needs at least one slice");
    if (slices.size() > limits::kMaxSlices) {
      Fail(Kind::kLimit, t, kNone, TermField(t),
           OverLimit("number of summed slices ", static_cast<int64_t>(slices.size()),
                     static_cast<int64_t>(limits::kMaxSlices)));
    }
    Shape term_shape;
    for (size_t s = 0; s < slices.size(); ++s) {
      const SliceView& v = slices[s];
      if (v.begin < 0) {
        Fail(Kind::kRange, t, s, SliceField(t, s) + ".begin",
             std::to_string(v.begin) + " is negative");
      }
      if (v.begin >= v.end) {
        Fail(Kind::kRange, t, s, SliceField(t, s) + ".begin",
             std::to_string(v.begin) + " not below end " + std::to_string(v.end));
      }
      if (v.end > v.source_shape.c) {
        Fail(Kind::kRange, t, s, SliceField(t, s) + ".end",
             std::to_string(v.end) + " beyond the " + std::to_string(v.source_shape.c) +
                 " channels of the tensor read");
      }
      const Shape shape = v.shape();
      if (s == 0) {
        term_shape = shape;
      } else if (!(shape == term_shape)) {
        Fail(Kind::kSummed, t, s, SliceField(t, s),
             "summed slices differ in shape (" + ShapeText(term_shape) + " vs " + ShapeText(shape) +
                 ")");
      }
      in.elements_read += Elements(shape);
    }
    in.sum_additions += (static_cast<double>(slices.size()) - 1) * Elements(term_shape);
    in.sums_slices = in.sums_slices || slices.size() > 1;
    in.terms.push_back(ResolvedTerm{term_shape, std::move(slices)});
  }
  const Shape& first = in.terms[0].shape;
  if (kind == OpKind::kEltwise) {
    // Terms of one shape, or C x 1 x 1 ones broadcast over every pixel
    // (as InferOpOutput says).
    std::string why;
    const std::optional<Shape> shape = EltwiseShape(in.TermShapes(), &why);
    if (!shape) Fail(Kind::kTermShapes, kNone, kNone, "inputs", why);
    in.shape = *shape;
    return in;
  }
  int64_t channels = 0;
  for (const ResolvedTerm& term : in.terms) {
    if (term.shape.h != first.h || term.shape.w != first.w) {
      Fail(Kind::kTermShapes, kNone, kNone, "inputs",
           "spatial mismatch between concatenated terms (" + ShapeText(first) + " vs " +
               ShapeText(term.shape) + ")");
    }
    channels += term.shape.c;
  }
  if (channels > limits::kMaxExtent) {
    Fail(Kind::kLimit, kNone, kNone, "inputs",
         OverLimit("channel count ", channels, limits::kMaxExtent));
  }
  in.shape = {static_cast<int>(channels), first.h, first.w};
  return in;
}

ResolvedInput ResolveNodeInput(const Graph& graph, NodeId consumer, OpKind kind,
                               const Inputs& inputs) {
  std::vector<std::vector<SliceView>> terms(inputs.size());
  for (size_t t = 0; t < inputs.size(); ++t) {
    terms[t].reserve(inputs[t].size());
    for (size_t s = 0; s < inputs[t].size(); ++s) {
      const Slice& slice = inputs[t][s];
      if (slice.producer < 0 || slice.producer >= static_cast<NodeId>(graph.nodes.size())) {
        Fail(InputError::Kind::kReference, t, s, "inputs",
             "unknown producer #" + std::to_string(slice.producer));
      }
      if (slice.producer >= consumer) {
        Fail(InputError::Kind::kReference, t, s, "inputs",
             "producer " + Quoted(graph.nodes[slice.producer].name) +
                 " does not come before it (a cycle, or nodes out of topological order)");
      }
      terms[t].push_back(
          {slice.producer, slice.begin, slice.end, graph.nodes[slice.producer].output});
    }
  }
  return ResolveInput(kind, std::move(terms));
}

int StageSource(const StageSpec& spec, const SliceRef& ref) {
  return ref.external ? ref.index : static_cast<int>(spec.externals.size()) + ref.index;
}

ResolvedInput ResolveStageInput(const StageSpec& spec, size_t group, size_t op) {
  const std::vector<StageOp>& ops = spec.groups.at(group);
  const StageOp& stage_op = ops.at(op);
  std::vector<std::vector<SliceView>> terms(stage_op.inputs.size());
  for (size_t t = 0; t < stage_op.inputs.size(); ++t) {
    const std::vector<SliceRef>& term = stage_op.inputs[t];
    terms[t].reserve(term.size());
    for (size_t s = 0; s < term.size(); ++s) {
      const SliceRef& ref = term[s];
      const Shape* source = nullptr;
      if (ref.external) {
        if (ref.index < 0 || static_cast<size_t>(ref.index) >= spec.externals.size()) {
          Fail(InputError::Kind::kReference, t, s, SliceField(t, s) + ".index",
               std::to_string(ref.index) + " out of range (" +
                   std::to_string(spec.externals.size()) + " externals)");
        }
        source = &spec.externals[static_cast<size_t>(ref.index)];
      } else {
        // An op reads only ops placed before it: that keeps a group acyclic.
        if (ref.index < 0 || static_cast<size_t>(ref.index) >= op) {
          Fail(InputError::Kind::kReference, t, s, SliceField(t, s) + ".index",
               std::to_string(ref.index) + " is not an earlier op of the group (op " +
                   std::to_string(op) + ")");
        }
        source = &ops[static_cast<size_t>(ref.index)].output;
      }
      terms[t].push_back({StageSource(spec, ref), ref.begin, ref.end, *source});
    }
  }
  return ResolveInput(stage_op.op.kind, std::move(terms));
}

}  // namespace ios
