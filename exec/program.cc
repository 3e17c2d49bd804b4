#include "exec/program.h"

#include <limits>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/printable.h"
#include "common/slices.h"
#include "exec/program_builder.h"

namespace ios::exec {
namespace detail {

Shape ViewShape(const Program& program, const View& view) {
  const Shape& b = program.buffers.at(static_cast<size_t>(view.buffer)).shape;
  return {view.channels, b.h, b.w};
}

View SubView(const View& source, int begin, int end) {
  return {source.buffer, source.offset + begin, end - begin};
}

int ProgramBuilder::AddBuffer(Shape shape, const std::string& label) {
  const int slot = static_cast<int>(program_.slot_elements.size());
  program_.buffers.push_back({shape, slot, label});
  program_.slot_elements.push_back(int64_t{shape.c} * shape.h * shape.w);
  return static_cast<int>(program_.buffers.size()) - 1;
}

int ProgramBuilder::AddTemp(Shape shape, const std::string& label) {
  const int buffer = AddBuffer(shape, label);
  temps_.push_back(buffer);
  return buffer;
}

int ProgramBuilder::AddWeights(ConvWeights weights) {
  program_.weights.push_back(std::move(weights));
  return static_cast<int>(program_.weights.size()) - 1;
}

int ProgramBuilder::AddStage(int lanes) {
  program_.stages.push_back({std::vector<Lane>(static_cast<size_t>(lanes))});
  return static_cast<int>(program_.stages.size()) - 1;
}

void ProgramBuilder::AddStep(int lane, Step step) {
  program_.stages.back().lanes.at(static_cast<size_t>(lane)).steps.push_back(std::move(step));
}

std::vector<int> ProgramBuilder::TakeTemps() { return std::exchange(temps_, {}); }

View ProgramBuilder::Gather(int lane, const std::vector<std::vector<View>>& terms,
                            const std::string& label) {
  // Terms that are consecutive channels of one buffer (a concatenation
  // served as a view) need no copy.
  bool contiguous = true;
  for (size_t t = 0; t < terms.size() && contiguous; ++t) {
    contiguous =
        terms[t].size() == 1 && terms[t][0].buffer == terms[0][0].buffer &&
        (t == 0 || terms[t][0].offset == terms[t - 1][0].offset + terms[t - 1][0].channels);
  }
  if (contiguous) {
    const View& last = terms.back()[0];
    return {terms[0][0].buffer, terms[0][0].offset,
            last.offset + last.channels - terms[0][0].offset};
  }
  std::vector<Shape> shapes;
  for (const auto& term : terms) shapes.push_back(ViewShape(program_, term.at(0)));
  const Shape shape = InputShape(shapes, label);
  const int temp = AddTemp(shape, label + " (gathered input)");
  int offset = 0;
  for (const auto& term : terms) {
    Step step;
    step.op.kind = OpKind::kIdentity;
    step.inputs = term;
    step.output = {temp, offset, term[0].channels};
    step.label = label + " (gather)";
    offset += term[0].channels;
    AddStep(lane, std::move(step));
  }
  return {temp, 0, shape.c};
}

void ProgramBuilder::EmitOp(int lane, const OpParams& op,
                            const std::vector<std::vector<View>>& terms, const View& output,
                            const WeightsFor& weights, const std::string& label) {
  switch (op.kind) {
    case OpKind::kInput:
      throw Error(label + ": an input placeholder is not an operation");
    case OpKind::kIdentity: {
      // A concatenation: each term (summed) goes straight to its channels of
      // the output; a term already there (a concat view) needs no step.
      int offset = 0;
      for (const auto& term : terms) {
        const View dest = SubView(output, offset, offset + term.at(0).channels);
        offset += term[0].channels;
        if (term.size() == 1 && term[0] == dest) continue;
        Step step;
        step.op = op;
        step.inputs = term;
        step.output = dest;
        step.label = label;
        AddStep(lane, std::move(step));
      }
      return;
    }
    case OpKind::kEltwise: {
      Step step;
      step.op = op;
      for (const auto& term : terms) step.inputs.push_back(Gather(lane, {term}, label));
      step.output = output;
      step.label = label;
      AddStep(lane, std::move(step));
      return;
    }
    case OpKind::kSequential: {
      View in = Gather(lane, terms, label);
      for (size_t i = 0; i < op.chain.size(); ++i) {
        const OpParams& element = op.chain[i];
        const std::string element_label = label + " [" + std::to_string(i) + "]";
        const Shape in_shape = ViewShape(program_, in);
        View out = output;
        if (i + 1 < op.chain.size()) {
          const Shape shape = InferOpOutput(element, {in_shape}, element_label);
          out = {AddTemp(shape, element_label), 0, shape.c};
        }
        Step step;
        step.op = element;
        step.inputs = {in};
        step.output = out;
        step.label = element_label;
        if (CarriesWeights(element)) {
          step.weights = AddWeights(weights(static_cast<int>(i), element, in_shape));
        }
        AddStep(lane, std::move(step));
        in = out;
      }
      return;
    }
    case OpKind::kConv:
    case OpKind::kPool:
    case OpKind::kActivation:
    case OpKind::kRegistered: {
      Step step;
      step.op = op;
      step.inputs = {Gather(lane, terms, label)};
      step.output = output;
      step.label = label;
      if (CarriesWeights(op)) {
        step.weights = AddWeights(weights(0, op, ViewShape(program_, step.inputs[0])));
      }
      AddStep(lane, std::move(step));
      return;
    }
  }
}

}  // namespace detail

namespace {

using detail::ViewShape;

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::numeric_limits<int64_t>::max();
  return r;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::numeric_limits<int64_t>::max();
  return r;
}

// Storage a view touches, for overlap checks. Buffers sharing a slot alias
// each other with different layouts, so two views of different buffers in
// one slot count as overlapping.
struct Region {
  int slot, buffer, begin, end;
  bool Overlaps(const Region& o) const {
    return slot == o.slot && (buffer != o.buffer || (begin < o.end && o.begin < end));
  }
};

class Validator {
 public:
  explicit Validator(const Program& p) : p_(p) {}

  void Run() {
    if (p_.slot_elements.empty() && !p_.buffers.empty()) Fail("program", "slot_elements: empty");
    for (size_t s = 0; s < p_.slot_elements.size(); ++s) {
      if (p_.slot_elements[s] < 0) Fail("slot " + std::to_string(s), "elements: negative");
    }
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const BufferDesc& buf = p_.buffers[b];
      const std::string where = "buffer " + std::to_string(b) + " (" + Quoted(buf.label) + ")";
      if (buf.shape.c < 1 || buf.shape.h < 1 || buf.shape.w < 1) {
        Fail(where, "shape: must be positive, got " + ShapeText(buf.shape));
      }
      if (buf.slot < 0 || buf.slot >= static_cast<int>(p_.slot_elements.size())) {
        Fail(where, "slot: " + std::to_string(buf.slot) + " out of range");
      }
      const int64_t elements = int64_t{buf.shape.c} * buf.shape.h * buf.shape.w;
      if (p_.slot_elements[static_cast<size_t>(buf.slot)] < elements) {
        Fail(where, "slot: slot " + std::to_string(buf.slot) + " holds " +
                        std::to_string(p_.slot_elements[static_cast<size_t>(buf.slot)]) +
                        " elements per sample, the buffer needs " + std::to_string(elements));
      }
    }
    for (size_t w = 0; w < p_.weights.size(); ++w) {
      const ConvWeights& cw = p_.weights[w];
      const int64_t size = int64_t{cw.out_channels} * cw.in_per_group * cw.kernel_h * cw.kernel_w;
      if (static_cast<int64_t>(cw.kernel.size()) != size ||
          (!cw.bias.empty() && static_cast<int>(cw.bias.size()) != cw.out_channels)) {
        Fail("weights " + std::to_string(w), "kernel/bias: sizes do not match the shape");
      }
    }
    for (size_t i = 0; i < p_.inputs.size(); ++i) {
      if (p_.inputs[i] < 0 || p_.inputs[i] >= static_cast<int>(p_.buffers.size())) {
        Fail("program", "inputs[" + std::to_string(i) + "]: buffer " +
                            std::to_string(p_.inputs[i]) + " out of range");
      }
    }
    for (size_t i = 0; i < p_.outputs.size(); ++i) {
      CheckView(p_.outputs[i], "program", "outputs[" + std::to_string(i) + "]");
    }
    for (size_t s = 0; s < p_.stages.size(); ++s) {
      const ProgramStage& stage = p_.stages[s];
      std::vector<std::vector<Region>> writes(stage.lanes.size()), reads(stage.lanes.size());
      for (size_t l = 0; l < stage.lanes.size(); ++l) {
        const Lane& lane = stage.lanes[l];
        for (size_t i = 0; i < lane.steps.size(); ++i) {
          const Step& step = lane.steps[i];
          const std::string where = "stage " + std::to_string(s) + ", lane " + std::to_string(l) +
                                    ", step " + std::to_string(i) + " (" + Quoted(step.label) + ")";
          CheckStep(step, where);
          writes[l].push_back(RegionOf(step.output));
          for (const View& v : step.inputs) reads[l].push_back(RegionOf(v));
        }
      }
      for (size_t a = 0; a < stage.lanes.size(); ++a) {
        for (size_t b = 0; b < stage.lanes.size(); ++b) {
          if (a == b) continue;
          for (const Region& w : writes[a]) {
            for (const Region& o : writes[b]) {
              if (b > a && w.Overlaps(o)) LaneConflict(s, a, b, "writes storage lane", "writes");
            }
            for (const Region& o : reads[b]) {
              if (w.Overlaps(o)) LaneConflict(s, a, b, "writes storage lane", "reads");
            }
          }
        }
      }
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& where, const std::string& what) const {
    throw Error("program: " + where + ": " + what);
  }

  [[noreturn]] void LaneConflict(size_t s, size_t a, size_t b, const std::string& verb,
                                 const std::string& other) const {
    Fail("stage " + std::to_string(s), "lanes: lane " + std::to_string(a) + " " + verb + " " +
                                           std::to_string(b) + " " + other +
                                           " (lanes run concurrently)");
  }

  Region RegionOf(const View& v) const {
    return {p_.buffers[static_cast<size_t>(v.buffer)].slot, v.buffer, v.offset,
            v.offset + v.channels};
  }

  void CheckView(const View& v, const std::string& where, const std::string& field) const {
    if (v.buffer < 0 || v.buffer >= static_cast<int>(p_.buffers.size())) {
      Fail(where, field + ": buffer " + std::to_string(v.buffer) + " out of range");
    }
    const int c = p_.buffers[static_cast<size_t>(v.buffer)].shape.c;
    if (v.offset < 0 || v.channels < 1 || v.offset > c - v.channels) {
      Fail(where, field + ": channels [" + std::to_string(v.offset) + ", " +
                      std::to_string(int64_t{v.offset} + v.channels) + ") outside buffer " +
                      std::to_string(v.buffer) + " with " + std::to_string(c) + " channels");
    }
  }

  void CheckStep(const Step& step, const std::string& where) const {
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      CheckView(step.inputs[i], where, "inputs[" + std::to_string(i) + "]");
    }
    CheckView(step.output, where, "output");
    const Region out = RegionOf(step.output);
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (out.Overlaps(RegionOf(step.inputs[i]))) {
        Fail(where, "output: overlaps inputs[" + std::to_string(i) + "]");
      }
    }
    const Shape out_shape = ViewShape(p_, step.output);
    const auto same_shapes = [&](size_t min_inputs) {
      if (step.inputs.size() < min_inputs) {
        Fail(where, "inputs: " + std::string(ToString(step.op.kind)) + " needs at least " +
                        std::to_string(min_inputs) + ", got " + std::to_string(step.inputs.size()));
      }
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        const Shape s = ViewShape(p_, step.inputs[i]);
        if (!(s == out_shape)) {
          Fail(where, "inputs[" + std::to_string(i) + "]: shape " + ShapeText(s) +
                          " differs from the output's " + ShapeText(out_shape));
        }
      }
    };
    switch (step.op.kind) {
      case OpKind::kInput:
      case OpKind::kSequential:
        Fail(where, std::string("op: kind ") + ToString(step.op.kind) + " is not a step");
      case OpKind::kEltwise:
        if (step.inputs.size() < 2) Fail(where, "inputs: eltwise needs at least 2");
        // Each input of the output's shape or C x 1 x 1, broadcast.
        for (size_t i = 0; i < step.inputs.size(); ++i) {
          const Shape s = ViewShape(p_, step.inputs[i]);
          if (!(s == out_shape) && !(s == Shape{out_shape.c, 1, 1})) {
            Fail(where, "inputs[" + std::to_string(i) + "]: shape " + ShapeText(s) +
                            " is neither the output's " + ShapeText(out_shape) + " nor " +
                            ShapeText(Shape{out_shape.c, 1, 1}));
          }
        }
        break;
      case OpKind::kIdentity:
        same_shapes(1);
        break;
      case OpKind::kConv:
      case OpKind::kPool:
      case OpKind::kActivation:
      case OpKind::kRegistered: {
        if (step.inputs.size() != 1) {
          Fail(where, "inputs: needs exactly one view, got " + std::to_string(step.inputs.size()));
        }
        const Shape in = ViewShape(p_, step.inputs[0]);
        Shape expected;
        try {
          expected = InferOpOutput(step.op, {in}, "op");
        } catch (const Error& e) {
          Fail(where, e.what());
        }
        if (!(expected == out_shape)) {
          Fail(where, "output: shape " + ShapeText(out_shape) + ", the op gives " +
                          ShapeText(expected) + " on " + ShapeText(in));
        }
        if (CarriesWeights(step.op)) CheckWeights(step, in, where);
        break;
      }
    }
  }

  void CheckWeights(const Step& step, const Shape& in, const std::string& where) const {
    if (step.weights < 0 || step.weights >= static_cast<int>(p_.weights.size())) {
      Fail(where, "weights: index " + std::to_string(step.weights) + " out of range");
    }
    const ConvWeights& w = p_.weights[static_cast<size_t>(step.weights)];
    const KindWeightShape want = ExpectedWeightShape(step.op, in);
    const std::string needs = step.op.kind == OpKind::kConv ? "the convolution" : KindName(step.op);
    const auto expect = [&](const char* field, int got, int wanted) {
      if (got != wanted) {
        Fail(where, std::string("weights: ") + field + ": " + std::to_string(got) + ", " + needs +
                        " needs " + std::to_string(wanted));
      }
    };
    expect("out_channels", w.out_channels, want.out_channels);
    expect("in_per_group", w.in_per_group, want.in_per_group);
    expect("kernel_h", w.kernel_h, want.kernel_h);
    expect("kernel_w", w.kernel_w, want.kernel_w);
    expect("bias", static_cast<int>(w.bias.size()), want.bias ? want.out_channels : 0);
  }

  const Program& p_;
};

}  // namespace

int64_t Program::ActivationBytes(int batch) const {
  int64_t total = 0;
  for (int64_t elements : slot_elements) {
    total = SaturatingAdd(total, SaturatingMul(SaturatingMul(elements, batch), 4));
  }
  return total;
}

void Validate(const Program& program) { Validator(program).Run(); }

Program StageProgram(const StageSpec& spec, uint64_t seed) {
  Program program;
  detail::ProgramBuilder builder(program);
  std::vector<View> externals;
  for (size_t i = 0; i < spec.externals.size(); ++i) {
    const Shape& s = spec.externals[i];
    const int buffer = builder.AddBuffer(s, "external " + std::to_string(i));
    program.inputs.push_back(buffer);
    externals.push_back({buffer, 0, s.c});
  }
  // The seed of each convolution mixes the stage seed with where it sits.
  const auto weights_at = [seed](uint64_t where) {
    return [seed, where](int chain_index, const OpParams& op, const Shape& input) {
      const uint64_t mixed = seed * 0x9E3779B97F4A7C15ull + where * 0x100000001B3ull +
                             static_cast<uint64_t>(chain_index);
      return RandomOpWeights(op, input, mixed);
    };
  };
  // The one resolution of inputs (common/slices.h) numbers sources:
  // externals first, then the ops of the group.
  const auto terms_of = [&](size_t g, size_t i, const std::vector<View>& group_outputs) {
    ResolvedInput input;
    try {
      input = ResolveStageInput(spec, g, i);
    } catch (const InputError& e) {
      throw Error("StageProgram: group " + std::to_string(g) + ", op " + std::to_string(i) + ": " +
                  e.what());
    }
    std::vector<std::vector<View>> terms;
    for (const ResolvedTerm& term : input.terms) {
      std::vector<View> views;
      for (const SliceView& slice : term.slices) {
        const auto source = static_cast<size_t>(slice.source);
        const View& whole = source < externals.size() ? externals[source]
                                                      : group_outputs.at(source - externals.size());
        views.push_back(detail::SubView(whole, slice.begin, slice.end));
      }
      terms.push_back(std::move(views));
    }
    return terms;
  };

  if (spec.strategy == Strategy::kMerge) {
    std::vector<const StageOp*> members;
    for (const auto& group : spec.groups) {
      for (const StageOp& op : group) members.push_back(&op);
    }
    if (members.empty() || spec.groups[0].empty()) {
      throw Error("StageProgram: merge stage without operators");
    }
    std::vector<ConvParams> convs;
    for (const StageOp* m : members) {
      if (m->op.kind != OpKind::kConv || !(m->inputs == members[0]->inputs)) {
        throw Error("StageProgram: a merge stage needs convolutions of identical inputs");
      }
      convs.push_back(m->op.conv);
    }
    OpParams merged;
    merged.kind = OpKind::kConv;
    merged.conv = MergedConv(convs);
    builder.AddStage(1);
    const View in = builder.Gather(0, terms_of(0, 0, {}), "merged input");
    std::vector<ConvWeights> member_weights;
    std::vector<const ConvWeights*> pointers;
    for (size_t i = 0; i < convs.size(); ++i) {
      OpParams member;
      member.kind = OpKind::kConv;
      member.conv = convs[i];
      member_weights.push_back(weights_at(i)(0, member, ViewShape(program, in)));
    }
    for (const ConvWeights& w : member_weights) pointers.push_back(&w);
    const Shape out_shape = InferOpOutput(merged, {ViewShape(program, in)}, "merged convolution");
    const int out = builder.AddBuffer(out_shape, "merged convolution");
    program.weights.push_back(StackMergedWeights(convs, pointers));
    Step step;
    step.op = merged;
    step.inputs = {in};
    step.output = {out, 0, out_shape.c};
    step.weights = static_cast<int>(program.weights.size()) - 1;
    step.label = "merged convolution";
    builder.AddStep(0, std::move(step));
    int offset = 0;
    for (const ConvParams& c : convs) {
      program.outputs.push_back({out, offset, c.out_channels});
      offset += c.out_channels;
    }
    return program;
  }

  builder.AddStage(static_cast<int>(spec.groups.size()));
  uint64_t op_index = 0;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    std::vector<View> outputs;
    for (size_t i = 0; i < spec.groups[g].size(); ++i) {
      const StageOp& op = spec.groups[g][i];
      const std::string label = "group " + std::to_string(g) + " op " + std::to_string(i);
      const int buffer = builder.AddBuffer(op.output, label);
      const View out{buffer, 0, op.output.c};
      builder.EmitOp(static_cast<int>(g), op.op, terms_of(g, i, outputs), out,
                     weights_at(op_index++), label);
      outputs.push_back(out);
    }
    if (!outputs.empty()) program.outputs.push_back(outputs.back());
  }
  return program;
}

}  // namespace ios::exec
