// What the ONNX operators that combine, flatten or pass on feature maps
// become in the IR (Concat, Add and Mul, Flatten, Reshape, Gemm and MatMul,
// Dropout and Identity, Constant): more of the Importer's per-operator
// methods (onnx/importer.h), beside onnx_operators.cc's windows and
// activations.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/activation.h"
#include "common/error.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "onnx/importer.h"

namespace ios::onnx_import::detail {

//! Concatenation costs nothing in the IR: readers read the terms.
void Importer::ImportConcat(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"axis"});
  const int64_t axis = attrs.Int("axis", 1);
  if (ConcatClassToken(node, axis) || ConcatPhases(node, axis) || ConcatRoll(node, axis)) return;
  if (axis != 1 && axis != -3) {
    throw Error(where_ + ": axis=" + std::to_string(axis) +
                ": only concatenation along channels (axis 1) is supported");
  }
  Value out;
  out.kind = Value::Kind::kTensor;
  for (int i = 0; i < node.input_size(); ++i) {
    const Value& in = Input(node, i);
    // Zeros after the maps: a channel padding, which the Add after it reads.
    if (in.kind == Value::Kind::kConstant && i > 0) {
      const ConstTensor& zeros = *in.constant;
      const std::vector<int64_t>& d = zeros.dims;
      const bool all_zero =
          zeros.has_values && zeros.is_float &&
          std::all_of(zeros.floats.begin(), zeros.floats.end(), [](float f) { return f == 0; });
      if (!all_zero || d.size() != 4 || (d[0] != 1 && d[0] != batch_) || d[1] < 1 ||
          d[2] != out.shape.h || d[3] != out.shape.w) {
        throw Error(where_ + ": input " + Quoted(node.input(i)) + " is the constant " +
                    zeros.DimsText() +
                    ": only zeros of the maps' height and width (a channel "
                    "padding) may be concatenated after them");
      }
      const int channels = Narrow(int64_t{out.shape.c} + d[1], kExtentBounds, where_,
                                  "the channel count of its inputs together");
      out.zero_channels += channels - out.shape.c;
      out.shape.c = channels;
      out.kind = Value::Kind::kZeroExtended;
      continue;
    }
    if (out.kind == Value::Kind::kZeroExtended) {
      throw Error(where_ + ": input " + Quoted(node.input(i)) +
                  " follows zeros: only zeros after the feature maps are supported");
    }
    const Value& v = MapInput(node, i);
    if (i > 0 && (v.shape.h != out.shape.h || v.shape.w != out.shape.w)) {
      throw Error(where_ + ": input " + Quoted(node.input(i)) + " is " + std::to_string(v.shape.h) +
                  "x" + std::to_string(v.shape.w) + ", the first " + std::to_string(out.shape.h) +
                  "x" + std::to_string(out.shape.w));
    }
    out.terms.insert(out.terms.end(), v.terms.begin(), v.terms.end());
    // Summed in int64: a file may name one input thousands of times.
    const int channels = Narrow(int64_t{out.shape.c} + v.shape.c, kExtentBounds, where_,
                                "the channel count of its inputs together");
    out.shape = {channels, v.shape.h, v.shape.w};
  }
  if (out.terms.empty()) throw Error(where_ + ": no inputs");
  // Read by several operators (the next Inception module's branches), the
  // concatenation becomes an identity operator, as in IOS's own models:
  // the block boundary every path passes through. It costs no copy (its
  // inputs are written into channel ranges of its buffer, and its readers
  // read that buffer). Read once, it stays terms of its reader.
  const auto readers = readers_.find(node.output(0));
  if (out.kind == Value::Kind::kTensor && readers != readers_.end() && readers->second > 1 &&
      out.terms.size() > 1) {
    out = Materialize(out);
  }
  Define(node, out);
}

void Importer::ImportElementwise(const ::onnx::NodeProto& node) {
  Attributes(node, where_).OnlyKnown({});
  const bool add = node.op_type() == "Add";
  const Value& a = Input(node, 0);
  const Value& b = Input(node, 1);
  // A bias, a norm's scale or shift, a layer scale: one value per channel.
  if ((a.kind == Value::Kind::kConstant) != (b.kind == Value::Kind::kConstant)) {
    const int x_input = a.kind == Value::Kind::kConstant ? 1 : 0;
    const Value& x = Input(node, x_input);
    const ConstTensor& constant = *Input(node, 1 - x_input).constant;
    if (ImportChannelConstant(node, x, x_input, constant)) return;
    if (add && ImportPositionEmbedding(node, x, constant)) return;
    throw Error(where_ + ": " + (add ? "adding" : "multiplying by") + " the constant " +
                constant.DimsText() + " to " + ShapeText(x) +
                ": only a constant with one value per channel (or one value) is supported");
  }
  if (add && (a.kind == Value::Kind::kZeroExtended) != (b.kind == Value::Kind::kZeroExtended)) {
    return AddZeroExtended(node, a.kind == Value::Kind::kZeroExtended ? b : a,
                           a.kind == Value::Kind::kZeroExtended ? a : b);
  }
  if (!add && FoldGatedActivation(node, a, b)) return;
  for (int i = 0; i < 2; ++i) {
    const Value& v = Input(node, i);
    if (v.kind != Value::Kind::kTensor && v.kind != Value::Kind::kFlat &&
        v.kind != Value::Kind::kChannelsLast) {
      MapInput(node, i);
    }
  }
  // Equal shapes, or a C x 1 x 1 map applied to every pixel of a C x H x W
  // one (squeeze-and-excitation's channel scale).
  const auto broadcasts = [](const Value& small, const Value& large) {
    return small.kind == Value::Kind::kTensor && large.kind == Value::Kind::kTensor &&
           small.shape == Shape{large.shape.c, 1, 1};
  };
  if (!((a.shape == b.shape && SameView(a, b)) || broadcasts(a, b) || broadcasts(b, a))) {
    throw Error(where_ + ": inputs of shapes " + ShapeText(a) + " and " + ShapeText(b) +
                ": only equal shapes, or [N, C, 1, 1] with [N, C, H, W], are supported");
  }
  OpParams op;
  op.kind = OpKind::kEltwise;
  op.eltwise = add ? EltwiseType::kAdd : EltwiseType::kMul;
  // Each operand is one term: the IR combines terms element-wise.
  Inputs inputs;
  for (const Value* v : {&a, &b}) {
    if (v->terms.size() != 1) {
      inputs.push_back(Materialize(*v, "_concat").terms.at(0));
    } else {
      inputs.push_back(v->terms[0]);
    }
  }
  Value out = AddNode(op, inputs, TermShapes(inputs), "");
  out = InLayoutOf(std::move(out), a.kind == Value::Kind::kFlat ? a : b);
  Define(node, out);
}

void Importer::AddZeroExtended(const ::onnx::NodeProto& node, const Value& y, const Value& padded) {
  const int y_input = &Input(node, 0) == &y ? 0 : 1;
  if (y.kind != Value::Kind::kTensor) MapInput(node, y_input);
  if (!(y.shape == padded.shape)) {
    throw Error(where_ + ": inputs of shapes " + ShapeText(y) + " and " + ShapeText(padded) +
                ": a feature map and a channel-padded one are added only at equal shapes");
  }
  const int c = padded.shape.c - padded.zero_channels;
  Value head = SliceChannels(y, 0, c);
  if (head.terms.size() != 1) head = Materialize(head, "_head");
  Value x = padded;
  x.kind = Value::Kind::kTensor;
  x.shape.c = c;
  if (x.terms.size() != 1) x = Materialize(x, "_concat");
  OpParams op;
  op.kind = OpKind::kEltwise;
  op.eltwise = EltwiseType::kAdd;
  const Inputs inputs = {head.terms.at(0), x.terms.at(0)};
  Value out = AddNode(op, inputs, TermShapes(inputs), "");
  const Value tail = SliceChannels(y, c, y.shape.c);
  out.terms.insert(out.terms.end(), tail.terms.begin(), tail.terms.end());
  out.shape = y.shape;
  Note("Add " + Quoted(label_) + " of a map and a zero-padded one adds the first " +
       std::to_string(c) + " channels and passes the other " +
       std::to_string(padded.zero_channels) + " on");
  Define(node, out);
}

//! Mul(x, Sigmoid(x)) is x * sigmoid(x): SiLU, and Mul(x, HardSigmoid(x))
//! is hardswish, as PyTorch exports them (the latter below opset 14). The
//! gate operator becomes the product's activation, or, when x is a
//! convolution's output read by nothing else, that convolution's activation
//! (the gate operator is then read by nobody and dropped).
bool Importer::FoldGatedActivation(const ::onnx::NodeProto& node, const Value& a, const Value& b) {
  for (int s = 0; s < 2; ++s) {
    const Value& gate = s == 0 ? a : b;
    const Value& x = s == 0 ? b : a;
    if ((gate.kind != Value::Kind::kTensor && gate.kind != Value::Kind::kFlat) ||
        gate.kind != x.kind || gate.terms.size() != 1 || gate.terms[0].size() != 1) {
      continue;
    }
    Pending& sigmoid = pending_.at(gate.terms[0][0].producer);
    if (sigmoid.node.op.kind != OpKind::kActivation || !(sigmoid.node.inputs == x.terms) ||
        readers_[node.input(s)] != 1) {
      continue;
    }
    Activation product = Activation::kNone;
    if (sigmoid.node.op.act == Activation::kSigmoid) product = Activation::kSilu;
    if (sigmoid.node.op.act == Activation::kHardSigmoid) product = Activation::kHardSwish;
    if (product == Activation::kNone) continue;
    const std::string gate_name = std::string(KindOf(sigmoid.node.op.act).name);
    const std::string product_name = std::string(KindOf(product).name);
    Pending* conv = nullptr;
    if (x.terms.size() == 1 && x.terms[0].size() == 1 && readers_[node.input(1 - s)] == 2) {
      Pending& p = pending_.at(x.terms[0][0].producer);
      if (p.node.op.kind == OpKind::kConv && p.node.op.conv.act == Activation::kNone &&
          x.terms[0][0].begin == 0 && x.terms[0][0].end == p.node.output.c) {
        conv = &p;
      }
    }
    if (conv != nullptr) {
      conv->node.op.conv.act = product;
      Note("Mul " + Quoted(label_) + " of a convolution and its " + gate_name + " became its " +
           product_name);
      Define(node, x);
    } else {
      sigmoid.node.op.act = product;
      Note("Mul " + Quoted(label_) + " of a value and its " + gate_name + " became a " +
           product_name);
      Define(node, gate);
    }
    return true;
  }
  return false;
}

std::string Importer::ShapeText(const Value& v) const {
  if (v.kind == Value::Kind::kConstant) return v.constant->DimsText();
  if (v.kind == Value::Kind::kChannelsLast && v.tokens == Value::Tokens::kRows) {
    return "[" + std::to_string(int64_t{v.shape.h} * v.shape.w) + "*N, " +
           std::to_string(v.shape.c) + "]";
  }
  std::string text;
  for (const int64_t d : OnnxDims(v, -1)) {
    text += (text.empty() ? "[" : ", ") + (d < 0 ? std::string("N") : std::to_string(d));
  }
  return text + "]";
}

//! A feature map made of several terms (a concatenation) as one operator's
//! output, for readers that need a single term.
Value Importer::Materialize(const Value& v, const std::string& suffix) {
  OpParams op;
  op.kind = OpKind::kIdentity;
  const std::string saved = label_;
  label_ += suffix;
  Value out = InLayoutOf(AddNode(op, v.terms, TermShapes(v.terms), "Concat"), v);
  label_ = saved;
  return out;
}

void Importer::ImportFlatten(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"axis"});
  const int64_t axis = attrs.Int("axis", 1);
  if (axis != 1) {
    throw Error(where_ + ": axis=" + std::to_string(axis) +
                ": only flattening each sample (axis 1) is supported");
  }
  Flatten(node, Input(node, 0));
}

void Importer::Flatten(const ::onnx::NodeProto& node, const Value& x) {
  PassedOn(node);
  if (x.kind == Value::Kind::kFlat) return Define(node, x);
  if (x.kind != Value::Kind::kTensor) MapInput(node, 0);
  // A concatenation stays terms: the fully connected layer reads them.
  Value flat = x;
  flat.kind = Value::Kind::kFlat;
  Define(node, flat);
}

//! Reshape to (N, C*H*W) is a flatten, and to (N, g, C/g, H, W) and back the
//! two ends of a channel shuffle (onnx_layout.cc); anything else is refused.
void Importer::ImportReshape(const ::onnx::NodeProto& node) {
  const Attributes attrs(node, where_);
  attrs.OnlyKnown({"allowzero"});
  // With allowzero=1 a 0 in the shape is a size of zero, not "as the input".
  const bool allowzero = attrs.Int("allowzero", 0, kFlagBounds) != 0;
  const Value& x = Input(node, 0);
  const ConstTensor& shape = ConstInput(node, 1, "shape");
  if (shape.has_values && !shape.is_float &&
      (GroupChannels(node, x, shape.ints) || UngroupChannels(node, x, shape.ints))) {
    return;
  }
  const int64_t features = int64_t{x.shape.c} * x.shape.h * x.shape.w;
  if (allowzero && std::find(shape.ints.begin(), shape.ints.end(), 0) != shape.ints.end()) {
    throw Error(where_ + ": allowzero=1 makes the 0 in its shape " + IntsText(shape.ints) +
                " a size of zero, not the input's size: only flattening each sample (to [N, " +
                std::to_string(features) + "]) is supported");
  }
  if (OutputReshape(node, x, shape)) return;
  if (shape.has_values && !shape.is_float &&
      (ReshapeTokens(node, x, shape.ints) || ReshapeWindows(node, x, shape.ints) ||
       ReshapeSampleWindows(node, x, shape.ints))) {
    return;
  }
  const bool flatten = (x.kind == Value::Kind::kTensor || x.kind == Value::Kind::kFlat) &&
                       shape.has_values && !shape.is_float && shape.ints.size() == 2 &&
                       (shape.ints[0] == -1 || shape.ints[0] == 0 || shape.ints[0] == batch_) &&
                       (shape.ints[1] == -1 || shape.ints[1] == features) &&
                       !(shape.ints[0] == -1 && shape.ints[1] == -1);
  if (!flatten) {
    throw Error(where_ + ": a Reshape of " + KindText(x) + " " + ShapeText(x) + " to " +
                (shape.has_values && !shape.is_float ? IntsText(shape.ints) : shape.DimsText()) +
                ": only flattening each sample (to [N, " + std::to_string(features) +
                "]) or a channel shuffle (to [N, g, C/g, H, W], Transpose [0, 2, 1, 3, 4], back to "
                "[N, C, H, W]) is supported (tokens, windows and heads of attention models are "
                "not)");
  }
  Flatten(node, x);
}

//! out = x W (+ b) over a flattened feature map of C*H*W values is a
//! convolution whose kernel covers the whole map: same sums, same order.
void Importer::ImportFullyConnected(const ::onnx::NodeProto& node, const Attributes& attrs) {
  const bool gemm = node.op_type() == "Gemm";
  if (gemm)
    attrs.OnlyKnown({"alpha", "beta", "transA", "transB"});
  else
    attrs.OnlyKnown({});
  const Value& x = Input(node, 0);
  if (x.kind == Value::Kind::kChannelsLast) {
    return gemm ? ImportTokenGemm(node, attrs, x) : ImportChannelsLastMatMul(node, x);
  }
  if (x.kind != Value::Kind::kFlat) {
    throw Error(where_ + ": its input " + Quoted(node.input(0)) + " is " + KindText(x) +
                "; a fully connected layer is supported on a flattened feature map");
  }
  if (gemm && attrs.Int("transA", 0, kFlagBounds) != 0) {
    throw Error(where_ + ": transA=1 is not supported");
  }
  const bool trans_b = gemm && attrs.Int("transB", 0, kFlagBounds) != 0;
  const float alpha = gemm ? attrs.Float("alpha", 1.0f) : 1.0f;
  const float beta = gemm ? attrs.Float("beta", 1.0f) : 1.0f;
  const ConstTensor& w = ConstInput(node, 1, "weight");
  const int64_t features = int64_t{x.shape.c} * x.shape.h * x.shape.w;
  if (w.dims.size() != 2 || w.dims[trans_b ? 1 : 0] != features) {
    throw Error(where_ + ": weight " + w.DimsText() + " (transB=" + (trans_b ? "1" : "0") +
                ") does not multiply " + std::to_string(features) + " features");
  }
  const int k = Narrow(w.dims[trans_b ? 0 : 1], kExtentBounds, where_,
                       "the output count of the weight " + w.DimsText());
  exec::ConvWeights weights;
  weights.out_channels = k;
  weights.in_per_group = x.shape.c;
  weights.kernel_h = x.shape.h;
  weights.kernel_w = x.shape.w;
  bool has_values = w.has_values && w.is_float;
  if (has_values) {
    std::vector<float> b = TakeFloats(node, 1);
    weights.kernel = trans_b ? Scaled(std::move(b), alpha)
                             : TransposedInPlace(std::move(b), features, k, alpha, scratch_);
  }
  ConvParams c;
  c.out_channels = k;
  c.kernel = {x.shape.h, x.shape.w};
  c.bias = gemm && HasInput(node, 2);
  if (c.bias) {
    const ConstTensor& b = ConstInput(node, 2, "bias");
    if (b.elements() != k) {
      throw Error(where_ + ": bias " + b.DimsText() + " for " + std::to_string(k) + " outputs");
    }
    has_values = has_values && b.has_values && b.is_float;
    for (float v : b.floats) weights.bias.push_back(beta * v);
  }
  Inputs inputs = x.terms;
  FoldAffineInput(node, x, c, weights, has_values, inputs);
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv = c;
  Value out =
      AddNode(op, inputs, TermShapes(inputs), "FullyConnected", std::move(weights), has_values);
  out.kind = Value::Kind::kFlat;
  Define(node, out);
}

void Importer::ImportPassThrough(const ::onnx::NodeProto& node) {
  if (node.op_type() == "Dropout") {
    Attributes(node, where_).OnlyKnown({"seed", "ratio", "is_test"});
  }
  Value v = Input(node, 0);
  PassedOn(node);
  Note(node.op_type() + " " + Quoted(label_) + " was removed");
  Define(node, v);
}

void Importer::ImportConstantNode(const ::onnx::NodeProto& node, const Attributes& attrs) {
  const std::optional<::onnx::TensorProto> value = attrs.Tensor("value");
  if (!value) {
    throw Error(where_ + ": only a Constant with a tensor 'value' attribute is supported");
  }
  ConstTensor t = detail::ReadTensor(*value, where_);
  t.name = node.output_size() > 0 ? node.output(0) : "";
  ConstTensor& held = held_.emplace_back(std::move(t));
  Define(node, {Value::Kind::kConstant, {}, {}, {0, 0}, &held, {}});
}

}  // namespace ios::onnx_import::detail
