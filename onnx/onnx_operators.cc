// What each ONNX operator becomes in the IR: the Importer's per-operator
// methods (onnx/importer.h). Each maps one operator onto IR operators, or
// refuses it in one line naming the node and what it cannot honour.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/activation.h"
#include "common/error.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "onnx/importer.h"

namespace ios::onnx_import::detail {
namespace {

// Operators this importer maps; listed in refusals so a user sees the set.
constexpr const char* kSupported =
    "Conv, BatchNormalization, Relu, Clip (as relu or relu6), Sigmoid, Tanh, "
    "HardSwish, HardSigmoid, LeakyRelu, PRelu, Mul(x, Sigmoid(x)) as SiLU, GELU's formula, "
    "MaxPool, "
    "AveragePool, GlobalAveragePool, GlobalMaxPool, ReduceMean and ReduceMax over H and W, Pad "
    "(before Conv or AveragePool), Concat "
    "(channels), Slice and Split (channels), Add, Mul (equal shapes or N,C,1,1 broadcast), "
    "Mul and Add by per-channel constants, "
    "Flatten, Reshape (as flatten), Reshape-Transpose-Reshape as a channel shuffle, "
    "Transpose to channels-last and back, LayerNormalization and its formula (over channels), "
    "Gemm, MatMul (also of a channels-last map by a constant), Softmax and LogSoftmax (over "
    "channels), ViT's tokens (Reshape and Transpose of patches, class token, position "
    "embedding, nn.MultiheadAttention's chain, Gather of the class token), Swin's rolls, "
    "window partitions, window attention and patch merging, MaxViT's block and grid "
    "partitions and Einsum attention, Dropout, "
    "Identity, Constant, and Shape, Gather, Unsqueeze, Squeeze, Concat, Cast, Add, Sub, Mul, "
    "Div, Mod, Neg, Slice, Range, ConstantOfShape, Reshape, Transpose, Expand, Equal and Where "
    "on constants (folded)";

}  // namespace

void Importer::ImportNode(const ::onnx::NodeProto& node, int index) {
  const std::string label =
      node.name().empty() ? node.op_type() + "_" + std::to_string(index) : node.name();
  where_ = source_ + ": node " + Quoted(label) + " (" + node.op_type() + ")";
  label_ = label;
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    throw Error(where_ + ": operator of domain " + Quoted(node.domain()) +
                "; only the default ONNX domain is imported");
  }
  const std::string& op = node.op_type();
  // A recognised formula's inner nodes become nothing; its last node the
  // operator (GELU: the activation; LayerNorm: the layernorm).
  if (node.output_size() > 0 && formula_inner_.count(node.output(0))) return;
  if (node.output_size() > 0) {
    if (const auto gelu = gelus_.find(node.output(0)); gelu != gelus_.end()) {
      return ImportGelu(node, gelu->second);
    }
    if (const auto norm = layer_norms_.find(node.output(0)); norm != layer_norms_.end()) {
      return ImportLayerNormChain(node, norm->second);
    }
    if (const auto attention = attentions_.find(node.output(0)); attention != attentions_.end()) {
      return ImportAttention(node, attention->second);
    }
    if (const auto windows = window_attentions_.find(node.output(0));
        windows != window_attentions_.end()) {
      return ImportWindowAttention(node, windows->second);
    }
    if (const auto windows = sample_window_attentions_.find(node.output(0));
        windows != sample_window_attentions_.end()) {
      return ImportSampleWindowAttention(node, windows->second);
    }
  }
  const Attributes attrs(node, where_);
  if (FoldConstants(node, attrs)) return;
  if (op == "Conv") return ImportConv(node, attrs);
  if (op == "BatchNormalization") return ImportBatchNorm(node, attrs);
  if (op == "Relu") return ImportActivation(node, Activation::kRelu);
  if (op == "Sigmoid") return ImportActivation(node, Activation::kSigmoid);
  if (op == "Tanh") return ImportActivation(node, Activation::kTanh);
  if (op == "Clip") return ImportClip(node, attrs);
  if (op == "HardSwish") return ImportActivation(node, Activation::kHardSwish);
  if (op == "HardSigmoid" || op == "LeakyRelu" || op == "PRelu") {
    return ImportParameterizedActivation(node, attrs);
  }
  if (op == "MaxPool" || op == "AveragePool") return ImportPool(node, attrs);
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return ImportGlobalPool(node);
  if (op == "ReduceMean" || op == "ReduceMax") return ImportSpatialReduce(node, attrs);
  if (op == "Pad") return ImportPad(node, attrs);
  if (op == "Concat") return ImportConcat(node, attrs);
  if (op == "Add" || op == "Mul") return ImportElementwise(node);
  if (op == "Flatten") return ImportFlatten(node, attrs);
  if (op == "Reshape") return ImportReshape(node);
  if (op == "Transpose") return ImportTranspose(node, attrs);
  if (op == "Slice") return ImportSlice(node, attrs);
  if (op == "Gather") return ImportGather(node, attrs);
  if (op == "Split") return ImportSplit(node, attrs);
  if (op == "Gemm" || op == "MatMul") return ImportFullyConnected(node, attrs);
  if (op == "LayerNormalization") return ImportLayerNormalization(node, attrs);
  if (op == "Softmax" || op == "LogSoftmax") return ImportSoftmax(node, attrs, op == "LogSoftmax");
  if (op == "Dropout" || op == "Identity") return ImportPassThrough(node);
  if (op == "Constant") return ImportConstantNode(node, attrs);
  throw Error(where_ + ": operator not supported by the ONNX importer (it maps " + kSupported +
              ")");
}

void Importer::ImportConv(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  const Value& x = Input(node, 0);
  if (x.kind != Value::Kind::kTensor && x.kind != Value::Kind::kPadded) MapInput(node, 0);
  const ConstTensor& w = ConstInput(node, 1, "weight");
  if (w.dims.size() != 4) {
    throw Error(where_ + ": weight " + w.DimsText() + " is not of rank 4 (a 2-D convolution)");
  }
  int dims[4];
  for (int i = 0; i < 4; ++i) {
    dims[i] = Narrow(w.dims[i], kExtentBounds, where_,
                     "dimension " + std::to_string(i) + " of the weight " + w.DimsText());
  }
  const int groups = attrs.Int("group", 1, kExtentBounds);
  if (x.shape.c % groups != 0 || dims[0] % groups != 0 || int64_t{dims[1]} * groups != x.shape.c) {
    throw Error(where_ + ": group=" + std::to_string(groups) + " with weight " + w.DimsText() +
                " does not fit an input of " + std::to_string(x.shape.c) + " channels");
  }
  ConvParams c;
  c.out_channels = dims[0];
  c.kernel = {dims[2], dims[3]};
  if (attrs.Has("kernel_shape") && !(Pair(attrs, "kernel_shape", 1) == c.kernel)) {
    throw Error(where_ + ": kernel_shape disagrees with the weight " + w.DimsText());
  }
  c.stride = Pair(attrs, "strides", 1);
  c.dilation = Pair(attrs, "dilations", 1);
  c.groups = groups;
  const Pads pads = Padding(attrs, x.shape, c.kernel, c.stride, c.dilation);
  c.padding = pads.begin;
  c.padding_end_extra = pads.end_extra;
  if (x.kind == Value::Kind::kPadded) {
    c.padding.h += x.pad.h;
    c.padding.w += x.pad.w;
    c.padding_end_extra.h += x.pad_end_extra.h;
    c.padding_end_extra.w += x.pad_end_extra.w;
    Note("the zero Pad before " + Quoted(label_) + " became its padding");
  }
  exec::ConvWeights weights;
  weights.out_channels = c.out_channels;
  weights.in_per_group = dims[1];
  weights.kernel_h = c.kernel.h;
  weights.kernel_w = c.kernel.w;
  weights.kernel = TakeFloats(node, 1);
  c.bias = HasInput(node, 2);
  bool has_values = w.has_values && w.is_float;
  if (c.bias) {
    const ConstTensor& b = ConstInput(node, 2, "bias");
    if (b.elements() != c.out_channels) {
      throw Error(where_ + ": bias " + b.DimsText() + " for " + std::to_string(c.out_channels) +
                  " output channels");
    }
    weights.bias = b.floats;
    has_values = has_values && b.has_values && b.is_float;
  }
  Inputs inputs = x.terms;
  if (x.kind == Value::Kind::kTensor) FoldAffineInput(node, x, c, weights, has_values, inputs);
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv = c;
  Define(node, AddNode(op, inputs, TermShapes(inputs), "", std::move(weights), has_values));
}

//! Inference-mode batch norm is a per-channel affine map y = a x + b:
//! folded into the convolution that is its only input (exact), or else a
//! depthwise 1x1 convolution with a and b as its weights and bias (the
//! same map as an operator: DenseNet normalises concatenations).
void Importer::ImportBatchNorm(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"epsilon", "momentum", "spatial", "training_mode"});
  if (attrs.Int("training_mode", 0, kFlagBounds) != 0) {
    throw Error(where_ + ": training_mode=1; export the model in eval mode");
  }
  const Value& x = MapInput(node, 0);
  const int k = x.shape.c;
  const ConstTensor* params[4];
  const char* roles[4] = {"scale", "bias", "mean", "variance"};
  bool has_values = true;
  for (int i = 0; i < 4; ++i) {
    params[i] = &ConstInput(node, i + 1, roles[i]);
    if (params[i]->elements() != k) {
      throw Error(where_ + ": its " + roles[i] + " " + params[i]->DimsText() + " for " +
                  std::to_string(k) + " channels");
    }
    has_values = has_values && params[i]->has_values && params[i]->is_float;
  }
  // a = scale / sqrt(variance + epsilon), b = bias - mean * a.
  std::vector<double> a(static_cast<size_t>(k)), b(static_cast<size_t>(k));
  if (has_values) {
    const double epsilon = attrs.Float("epsilon", 1e-5f);
    for (int c = 0; c < k; ++c) {
      a[c] = double(params[0]->floats[c]) / std::sqrt(double(params[3]->floats[c]) + epsilon);
      b[c] = double(params[1]->floats[c]) - double(params[2]->floats[c]) * a[c];
    }
  }
  Pending* conv = SoleProducer(node, x);
  if (conv != nullptr && conv->node.op.kind == OpKind::kConv &&
      conv->node.op.conv.act == Activation::kNone) {
    FoldAffineOutput(*conv, a, b, has_values);
    Note("BatchNormalization " + Quoted(label_) + " was folded into convolution " +
         Quoted(conv->node.name));
    return Define(node, x);
  }
  Note("BatchNormalization " + Quoted(label_) + " became a per-channel affine operator");
  std::vector<float> scale, shift;
  if (has_values) {
    scale.assign(a.begin(), a.end());
    shift.assign(b.begin(), b.end());
  }
  Define(node, AffineOperator(x, std::move(scale), std::move(shift), "BatchNorm"));
}

//! HardSigmoid and LeakyRelu at PyTorch's defaults are the activations
//! stage keys have always had (fused into the convolution before them);
//! other parameters are operators of their own kinds, which carry them.
void Importer::ImportParameterizedActivation(const ::onnx::NodeProto& node,
                                             const Attributes& attrs) {
  OpParams op;
  if (node.op_type() == "LeakyRelu" || node.op_type() == "PRelu") {
    float alpha = 0;
    if (node.op_type() == "PRelu") {
      // One slope for every channel is a leaky relu; a slope per channel
      // is made of a depthwise convolution and an add (onnx_affine.cc).
      attrs.OnlyKnown({});
      const ConstTensor& slope = ConstInput(node, 1, "slope");
      const bool one = slope.has_values && slope.is_float && !slope.floats.empty() &&
                       std::all_of(slope.floats.begin(), slope.floats.end(),
                                   [&](float v) { return v == slope.floats[0]; });
      if (!one && ImportChannelPRelu(node, slope)) return;
      if (!one) {
        throw Error(where_ + ": slope " + slope.DimsText() + " of " + KindText(Input(node, 0)) +
                    ": only one slope, or one per channel of a feature map, is supported");
      }
      alpha = slope.floats[0];
    } else {
      attrs.OnlyKnown({"alpha"});
      alpha = attrs.Float("alpha", 0.01f);
    }
    if (alpha == kLeakyReluSlope) return ImportActivation(node, Activation::kLeakyRelu, {"alpha"});
    op = MakeRegisteredOp(RegisteredKind::kLeakyRelu);
    SetFloatAttribute(op.registered, "alpha", alpha, where_);
  } else {
    attrs.OnlyKnown({"alpha", "beta"});
    // ONNX's defaults are alpha 0.2, beta 0.5; PyTorch's Hardsigmoid is
    // relu6(x + 3) / 6: alpha 1/6 (rounded to float by the exporter).
    const float alpha = attrs.Float("alpha", 0.2f), beta = attrs.Float("beta", 0.5f);
    if (std::abs(alpha - 1.0f / 6) <= 1e-6f && beta == 0.5f) {
      return ImportActivation(node, Activation::kHardSigmoid, {"alpha", "beta"});
    }
    op = MakeRegisteredOp(RegisteredKind::kHardSigmoid);
    SetFloatAttribute(op.registered, "alpha", alpha, where_);
    SetFloatAttribute(op.registered, "beta", beta, where_);
  }
  const Value& x = Input(node, 0);
  if (x.kind != Value::Kind::kFlat && x.kind != Value::Kind::kChannelsLast) MapInput(node, 0);
  DefineShapeKeeping(node, x, std::move(op));
}

void Importer::ImportActivation(const ::onnx::NodeProto& node, Activation act,
                                const std::vector<std::string>& attributes) {
  Attributes(node, where_).OnlyKnown(attributes);
  // A fully connected layer's output (flat) too: its map is C x 1 x 1.
  const Value& x = Input(node, 0);
  if (x.kind != Value::Kind::kFlat && x.kind != Value::Kind::kChannelsLast) MapInput(node, 0);
  Pending* conv = SoleProducer(node, x);
  if (conv != nullptr && conv->node.op.kind == OpKind::kConv &&
      conv->node.op.conv.act == Activation::kNone) {
    conv->node.op.conv.act = act;
    Define(node, x);
    return;
  }
  OpParams op;
  op.kind = OpKind::kActivation;
  op.act = act;
  DefineShapeKeeping(node, x, std::move(op));
}

//! Softmax over channels only: axis 1 of N x C (a classifier's output)
//! or of N x C x H x W. Below opset 13 the input is flattened from the
//! axis on, which is the same only where H x W is 1.
void Importer::DefineShapeKeeping(const ::onnx::NodeProto& node, const Value& x, OpParams op) {
  // A fully connected layer's flat output stays flat, tokens stay tokens.
  Define(node, InLayoutOf(AddNode(std::move(op), x.terms, TermShapes(x.terms), ""), x));
}

void Importer::ImportSoftmax(const ::onnx::NodeProto& node, const Attributes& attrs, bool log) {
  attrs.OnlyKnown({"axis"});
  const Value& x = Input(node, 0);
  const bool last = x.kind == Value::Kind::kChannelsLast;
  if (x.kind != Value::Kind::kFlat && !last) MapInput(node, 0);
  const int rank = x.kind == Value::Kind::kFlat ? 2 : 4;
  const bool flattens = opset_ < 13;
  int64_t axis = attrs.Int("axis", flattens ? 1 : -1);
  if (axis < 0) axis += rank;
  const Shape in = InputShape(TermShapes(x.terms), where_);
  const bool whole_pixel = !flattens || rank == 2 || int64_t{in.h} * in.w == 1;
  // The channels are axis 1, or the last axis of a channels-last view.
  const bool over_channels = whole_pixel && axis == (last ? 3 : 1);
  if (!over_channels) {
    throw Error(where_ + ": softmax over axis " + std::to_string(axis) + " of a rank-" +
                std::to_string(rank) + " input (opset " + std::to_string(opset_) +
                "): only a softmax over the channels (axis 1, or the last axis after a "
                "Transpose to channels-last) is supported");
  }
  OpParams op = MakeRegisteredOp(RegisteredKind::kSoftmax);
  SetAttribute(op.registered, "log", log ? 1 : 0, where_);
  DefineShapeKeeping(node, x, std::move(op));
}

//! Clip to [0, +inf) is a relu, to [0, 6] a relu6; other bounds are not
//! supported.
void Importer::ImportClip(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"min", "max"});
  float low = attrs.Float("min", -INFINITY), high = attrs.Float("max", INFINITY);
  const auto bound = [&](int i, float& out) {
    if (!HasInput(node, i)) return;
    const ConstTensor& t = ConstInput(node, i, i == 1 ? "min" : "max");
    if (!t.has_values || !t.is_float || t.elements() != 1) {
      throw Error(where_ + ": its " + (i == 1 ? "min" : "max") + " must be one float value");
    }
    out = t.floats[0];
  };
  bound(1, low);
  bound(2, high);
  if (low == 0.0f && high == 6.0f) return ImportActivation(node, Activation::kRelu6);
  if (low != 0.0f || !std::isinf(high) || high < 0) {
    throw Error(where_ + ": Clip to [" + std::to_string(low) + ", " + std::to_string(high) +
                "]: only Clip to [0, inf) (relu) and to [0, 6] (relu6) are supported");
  }
  ImportActivation(node, Activation::kRelu);
}

void Importer::ImportPool(const ::onnx::NodeProto& node, const Attributes& attrs) {
  const bool max = node.op_type() == "MaxPool";
  if (max) {
    attrs.OnlyKnown(
        {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  } else {
    attrs.OnlyKnown(
        {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
  }
  const Value& x = Input(node, 0);
  if (x.kind == Value::Kind::kPadded && max) {
    throw Error(where_ + ": reads " + x.made_by +
                ": zero padding before a max pool is not a pool padding (which never wins)");
  }
  if (x.kind != Value::Kind::kPadded) MapInput(node, 0);
  PoolParams p;
  p.type = max ? PoolType::kMax : PoolType::kAvg;
  if (!attrs.Has("kernel_shape")) throw Error(where_ + ": no kernel_shape");
  p.kernel = Pair(attrs, "kernel_shape", 1);
  p.stride = Pair(attrs, "strides", 1);
  if (!(Pair(attrs, "dilations", 1) == Window{1, 1})) {
    throw Error(where_ + ": dilated pooling is not supported");
  }
  const Pads pads = Padding(attrs, x.shape, p.kernel, p.stride, Window{1, 1});
  if (!pads.symmetric() || (x.kind == Value::Kind::kPadded && !(x.pad_end_extra == Window{0, 0}))) {
    throw Error(where_ +
                ": asymmetric padding: a pool pads both sides equally (only "
                "convolutions take more padding at the bottom and right)");
  }
  p.padding = pads.begin;
  const bool padded_attr = p.padding.h > 0 || p.padding.w > 0;
  // ONNX's default leaves the padding out of the divisor; PyTorch exports
  // count_include_pad=1 unless told otherwise.
  p.exclude_padding = !max && padded_attr && attrs.Int("count_include_pad", 0, kFlagBounds) == 0;
  if (p.exclude_padding && x.kind == Value::Kind::kPadded) {
    throw Error(where_ + ": reads " + x.made_by +
                " and pads itself with count_include_pad=0: the Pad's zeros would count and "
                "its own padding not, which one pool cannot say");
  }
  if (x.kind == Value::Kind::kPadded) {
    p.padding.h += x.pad.h;
    p.padding.w += x.pad.w;
    Note("the zero Pad before " + Quoted(label_) + " became its padding (counted by the average)");
  }
  if (attrs.Int("ceil_mode", 0, kFlagBounds) != 0) {
    // Rounding the output size up matters only where it adds a window.
    OpParams floor_op, ceil_op;
    floor_op.kind = ceil_op.kind = OpKind::kPool;
    floor_op.pool = ceil_op.pool = p;
    ceil_op.pool.type = PoolType::kMax;
    ceil_op.pool.ceil = true;
    const Shape floor_shape = InferOpOutput(floor_op, {x.shape}, where_);
    const Shape ceil_shape = InferOpOutput(ceil_op, {x.shape}, where_);
    if (!(floor_shape == ceil_shape)) {
      if (!max) {
        throw Error(where_ + ": ceil_mode=1 makes the output " + std::to_string(ceil_shape.h) +
                    "x" + std::to_string(ceil_shape.w) + " instead of " +
                    std::to_string(floor_shape.h) + "x" + std::to_string(floor_shape.w) +
                    ", which this importer supports for max pooling only");
      }
      p.ceil = true;
    }
  }
  OpParams op;
  op.kind = OpKind::kPool;
  op.pool = p;
  const Inputs inputs = x.terms;
  Define(node, AddNode(op, inputs, TermShapes(inputs), ""));
}

void Importer::ImportGlobalPool(const ::onnx::NodeProto& node) {
  Attributes(node, where_).OnlyKnown({});
  Define(node, GlobalPool(node, node.op_type() == "GlobalMaxPool"));
}

Value Importer::GlobalPool(const ::onnx::NodeProto& node, bool max) {
  const Value& x = MapInput(node, 0);
  OpParams op;
  op.kind = OpKind::kPool;
  op.pool.type = max ? PoolType::kGlobalMax : PoolType::kGlobalAvg;
  // Like the zoo: a global pool's window is its input's size.
  op.pool.kernel = {x.shape.h, x.shape.w};
  op.pool.stride = {1, 1};
  return AddNode(op, x.terms, TermShapes(x.terms), "");
}

//! The mean (max) over height and width is a global average (max) pool,
//! as PyTorch exports `x.mean([2, 3])` (MNASNet); keepdims=0 leaves the
//! N x C a fully connected layer reads. Other axes are refused.
void Importer::ImportSpatialReduce(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"axes", "keepdims"});
  std::vector<int64_t> axes = attrs.Ints("axes");
  if (HasInput(node, 1)) throw Error(where_ + ": axes as an input (opset 18) are not supported");
  for (int64_t& axis : axes) axis = axis < 0 ? axis + 4 : axis;
  std::sort(axes.begin(), axes.end());
  if (axes != std::vector<int64_t>{2, 3}) {
    std::string text;
    for (const int64_t axis : attrs.Ints("axes"))
      text += (text.empty() ? "" : ",") + std::to_string(axis);
    throw Error(where_ + ": axes [" + text +
                "]: only a reduction over height and width (axes 2 and 3) is supported");
  }
  Value out = GlobalPool(node, node.op_type() == "ReduceMax");
  if (attrs.Int("keepdims", 1, kFlagBounds) == 0) out.kind = Value::Kind::kFlat;
  Define(node, out);
}

//! Zero padding of height and width, kept for the Conv or AveragePool
//! that reads it (which pads the same way).
void Importer::ImportPad(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"mode", "pads", "value"});
  const Value& x = Input(node, 0);
  if (attrs.String("mode", "constant") != "constant") {
    throw Error(where_ + ": mode " + Quoted(attrs.String("mode", "constant")) +
                ": only constant (zero) padding is supported");
  }
  std::vector<int64_t> pads = attrs.Ints("pads");
  std::string pads_field = "attribute 'pads'";
  float value = attrs.Float("value", 0.0f);
  if (HasInput(node, 1)) {
    const ConstTensor& t = ConstInput(node, 1, "pads");
    if (!t.has_values || t.is_float) throw Error(where_ + ": its pads must be constant integers");
    pads = t.ints;
    pads_field = "input 'pads' (" + Quoted(node.input(1)) + ")";
  }
  if (HasInput(node, 2)) {
    const ConstTensor& t = ConstInput(node, 2, "constant_value");
    if (!t.has_values || !t.is_float || t.elements() != 1) {
      throw Error(where_ + ": its constant_value must be one float");
    }
    value = t.floats[0];
  }
  if (HasInput(node, 3)) throw Error(where_ + ": padding chosen axes (input 'axes')");
  // Nothing to pad (Swin pads its windows only where they do not divide the
  // map): the value passes on as it is, whatever view it is.
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    Note("Pad " + Quoted(label_) + " pads nothing and was removed");
    PassedOn(node);
    return Define(node, x);
  }
  MapInput(node, 0);
  if (value != 0.0f) {
    throw Error(where_ + ": pads with " + std::to_string(value) +
                "; only zero padding is "
                "supported");
  }
  if (pads.size() != 8 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0) {
    throw Error(where_ +
                ": only padding of height and width is supported (pads: 8 values, "
                "zero for batch and channels)");
  }
  int p[8];
  for (int i = 0; i < 8; ++i) p[i] = Narrow(pads[i], kPaddingBounds, where_, pads_field);
  if (p[6] < p[2] || p[7] < p[3]) {
    throw Error(where_ + ": pads " + IntsText(pads) +
                " pad the top or left more than the bottom or right: only equal padding, or "
                "more at the bottom and right, is supported");
  }
  Value padded = x;
  padded.kind = Value::Kind::kPadded;
  padded.pad = {p[2], p[3]};
  padded.pad_end_extra = {p[6] - p[2], p[7] - p[3]};
  Define(node, padded);
}

}  // namespace ios::onnx_import::detail
