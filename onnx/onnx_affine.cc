// Per-channel affine maps y = a x + b, however a file writes them: Mul and
// Add by per-channel constants (a LayerNorm's scale and bias, ConvNeXt's
// layer scale, a bias after MatMul), BatchNormalization that has no
// convolution to fold into, and the pointwise MatMul of a channels-last map.
// Each is folded into a neighbouring convolution where that is exact: into
// the convolution whose output it is (its outputs scaled, its bias moved),
// or into the unpadded convolution that reads it (its input channels
// scaled, the shift summed into the bias). What cannot fold is one depthwise
// 1x1 convolution, an operator every backend already runs.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/activation.h"
#include "common/error.h"
#include "common/printable.h"
#include "onnx/importer.h"

namespace ios::onnx_import::detail {
namespace {

//! Whether a pending operator is a per-channel affine map: a depthwise 1x1
//! convolution with nothing after it.
bool IsAffine(const Pending& p) {
  const ConvParams& c = p.node.op.conv;
  return p.node.op.kind == OpKind::kConv && c.kernel == Window{1, 1} && c.stride == Window{1, 1} &&
         c.padding == Window{0, 0} && c.padding_end_extra == Window{0, 0} &&
         c.dilation == Window{1, 1} && c.groups == c.out_channels && c.act == Activation::kNone &&
         p.node.output.c == c.out_channels;
}

//! Whether the constant holds one value for every channel of `x` (or one
//! value for all): [C] or [1, .., C] along the last axis of a channels-last
//! or flat map, [C, 1, 1] or [1, C, 1, 1] along the channels of an N, C, H, W one.
bool PerChannel(const Value& x, const ConstTensor& t) {
  const int64_t c = x.shape.c;
  if (t.elements() == 1) return true;
  if (t.elements() != c) return false;
  const std::vector<int64_t>& d = t.dims;
  switch (x.kind) {
    case Value::Kind::kChannelsLast:
      return d.size() <= 4 && d.back() == c;
    case Value::Kind::kFlat:
      return x.shape.h == 1 && x.shape.w == 1 && d.size() <= 2 && d.back() == c;
    case Value::Kind::kTensor:
      return (d.size() == 3 || d.size() == 4) && d[d.size() - 3] == c;
    default:
      return false;
  }
}

}  // namespace

bool Importer::ImportChannelConstant(const ::onnx::NodeProto& node, const Value& x, int x_input,
                                     const ConstTensor& constant) {
  const bool add = node.op_type() == "Add";
  if (x.kind == Value::Kind::kPadded || x.kind == Value::Kind::kGrouped ||
      !PerChannel(x, constant)) {
    return false;
  }
  const int k = x.shape.c;
  const bool has_values = constant.has_values && constant.is_float;
  std::vector<float> values;
  if (has_values) {
    for (int c = 0; c < k; ++c) {
      values.push_back(constant.floats[constant.floats.size() == 1 ? 0 : static_cast<size_t>(c)]);
    }
  }
  Pending* conv = SoleProducer(node, x, x_input);
  if (conv != nullptr && conv->node.op.kind == OpKind::kConv &&
      conv->node.op.conv.act == Activation::kNone) {
    std::vector<double> a, b;
    if (has_values) {
      a.assign(static_cast<size_t>(k), 1.0);
      b.assign(static_cast<size_t>(k), 0.0);
      (add ? b : a).assign(values.begin(), values.end());
    }
    FoldAffineOutput(*conv, a, b, has_values);
    Note(node.op_type() + " " + Quoted(label_) + " by a per-channel constant was folded into " +
         Quoted(conv->node.name));
    Define(node, x);
    return true;
  }
  std::vector<float> a, b;
  if (has_values) {
    a.assign(static_cast<size_t>(k), 1.0f);
    b.assign(static_cast<size_t>(k), 0.0f);
    (add ? b : a) = values;
  }
  Note(node.op_type() + " " + Quoted(label_) +
       " by a per-channel constant became a per-channel affine operator");
  Define(node, AffineOperator(x, std::move(a), std::move(b), add ? "Shift" : "Scale"));
  return true;
}

void Importer::FoldAffineOutput(Pending& conv, const std::vector<double>& a,
                                const std::vector<double>& b, bool has_values) {
  const int k = conv.node.op.conv.out_channels;
  conv.node.op.conv.bias = true;
  conv.has_weights = conv.has_weights && has_values;
  if (!conv.has_weights) return;
  exec::ConvWeights& w = conv.weights;
  if (w.bias.empty()) w.bias.assign(static_cast<size_t>(k), 0.0f);
  const size_t per_output = w.kernel.size() / static_cast<size_t>(k);
  for (int o = 0; o < k; ++o) {
    for (size_t j = 0; j < per_output; ++j) {
      float& v = w.kernel[static_cast<size_t>(o) * per_output + j];
      v = static_cast<float>(v * a[o]);
    }
    w.bias[o] = static_cast<float>(double(w.bias[o]) * a[o] + b[o]);
  }
}

Value Importer::AffineOperator(const Value& x, std::vector<float> a, std::vector<float> b,
                               const std::string& hint) {
  const int k = x.shape.c;
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv.out_channels = k;
  op.conv.kernel = {1, 1};
  op.conv.groups = k;
  op.conv.bias = true;
  exec::ConvWeights weights;
  weights.out_channels = k;
  weights.in_per_group = 1;
  weights.kernel_h = weights.kernel_w = 1;
  const bool has_values = !a.empty();
  weights.kernel = std::move(a);
  weights.bias = std::move(b);
  Value out = AddNode(op, x.terms, TermShapes(x.terms), hint, std::move(weights), has_values);
  out = InLayoutOf(std::move(out), x);
  if (x.kind == Value::Kind::kPadded) out.kind = Value::Kind::kTensor;
  return out;
}

void Importer::FoldAffineInput(const ::onnx::NodeProto& node, const Value& x, ConvParams& conv,
                               exec::ConvWeights& weights, bool& has_values, Inputs& inputs) {
  // Padding would be zeros after the map, which the folded map would see as b.
  if (!(conv.padding == Window{0, 0}) || !(conv.padding_end_extra == Window{0, 0})) return;
  Pending* affine = SoleProducer(node, x);
  if (affine == nullptr || !IsAffine(*affine)) return;
  const exec::ConvWeights& map = affine->weights;
  has_values = has_values && affine->has_weights;
  if (has_values) {
    const int in_per_group = weights.in_per_group;
    const int outputs_per_group = conv.out_channels / conv.groups;
    const size_t taps = static_cast<size_t>(weights.kernel_h) * weights.kernel_w;
    if (weights.bias.empty()) weights.bias.assign(static_cast<size_t>(conv.out_channels), 0.0f);
    for (int o = 0; o < conv.out_channels; ++o) {
      double shift = 0;
      for (int i = 0; i < in_per_group; ++i) {
        const size_t channel = static_cast<size_t>((o / outputs_per_group) * in_per_group + i);
        for (size_t t = 0; t < taps; ++t) {
          float& w = weights.kernel[(static_cast<size_t>(o) * in_per_group + i) * taps + t];
          shift += double(w) * (map.bias.empty() ? 0.0 : map.bias[channel]);
          w *= map.kernel[channel];
        }
      }
      weights.bias[o] = static_cast<float>(weights.bias[o] + shift);
    }
  }
  conv.bias = conv.bias || affine->node.op.conv.bias;
  inputs = affine->node.inputs;
  affine->folded_forward = true;
  Note("the per-channel affine operator " + Quoted(affine->node.name) + " was folded into " +
       Quoted(label_));
}

void Importer::ImportChannelsLastMatMul(const ::onnx::NodeProto& node, const Value& x) {
  const ConstTensor& w = ConstInput(node, 1, "weight");
  if (w.dims.size() != 2 || w.dims[0] != x.shape.c) {
    throw Error(where_ + ": weight " + w.DimsText() + " does not multiply the " +
                std::to_string(x.shape.c) + " channels of " + ShapeText(x) +
                " (a [C, K] constant is expected)");
  }
  const int k =
      Narrow(w.dims[1], kExtentBounds, where_, "the output count of the weight " + w.DimsText());
  ConvParams c;
  c.out_channels = k;
  c.kernel = {1, 1};
  exec::ConvWeights weights;
  weights.out_channels = k;
  weights.in_per_group = x.shape.c;
  weights.kernel_h = weights.kernel_w = 1;
  bool has_values = w.has_values && w.is_float;
  if (has_values) {
    // ONNX's [C, K] is the transpose of the convolution's [K, C, 1, 1].
    weights.kernel = TransposedInPlace(TakeFloats(node, 1), x.shape.c, k, 1.0f, scratch_);
  }
  Inputs inputs = x.terms;
  FoldAffineInput(node, x, c, weights, has_values, inputs);
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv = c;
  Value out = AddNode(op, inputs, TermShapes(inputs), "Pointwise", std::move(weights), has_values);
  out = InLayoutOf(std::move(out), x);
  Define(node, out);
}

//! PRelu with a slope s per channel from operators every backend runs:
//! prelu(x) = x + (1 - s) relu(-x). Where every s <= 1 (as trained slopes
//! are), (1 - s) relu(-x) = relu((s - 1) x): one depthwise 1x1 convolution
//! with relu, and the add. A slope above 1 needs the scale after the relu:
//! relu(-x) by one depthwise convolution, (1 - s) by a second. Rounding
//! differs from s * x by an ulp of x, well inside --expect's tolerance.
bool Importer::ImportChannelPRelu(const ::onnx::NodeProto& node, const ConstTensor& slope) {
  const Value& x = Input(node, 0);
  if ((x.kind != Value::Kind::kTensor && x.kind != Value::Kind::kChannelsLast) ||
      !PerChannel(x, slope) || (slope.has_values && !slope.is_float)) {
    return false;
  }
  const size_t c = static_cast<size_t>(x.shape.c);
  std::vector<float> s;
  if (slope.has_values) {
    s = slope.floats.size() == 1 ? std::vector<float>(c, slope.floats[0]) : slope.floats;
  }
  const bool at_most_one = std::all_of(s.begin(), s.end(), [](float v) { return v <= 1; });
  const auto scales = [&](auto of) {
    std::vector<float> out;
    for (float v : s) out.push_back(of(v));
    return out;
  };
  const std::vector<float> zeros = s.empty() ? std::vector<float>{} : std::vector<float>(c, 0.0f);
  Value negative;  // (1 - s) relu(-x)
  if (at_most_one) {
    negative = AffineOperator(x, scales([](float v) { return v - 1; }), zeros, "PReluNegative");
    pending_.back().node.op.conv.act = Activation::kRelu;
  } else {
    const Value below = AffineOperator(x, scales([](float) { return -1.0f; }), zeros, "PReluBelow");
    pending_.back().node.op.conv.act = Activation::kRelu;
    negative = AffineOperator(below, scales([](float v) { return 1 - v; }), zeros, "PReluScale");
  }
  OpParams add;
  add.kind = OpKind::kEltwise;
  add.eltwise = EltwiseType::kAdd;
  const Inputs inputs = {x.terms.size() == 1 ? x.terms[0] : Materialize(x, "_concat").terms.at(0),
                         negative.terms.at(0)};
  Value out = InLayoutOf(AddNode(add, inputs, TermShapes(inputs), "PRelu"), x);
  Define(node, out);
  return true;
}

}  // namespace ios::onnx_import::detail
