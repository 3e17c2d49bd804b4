// LayerNorm over the channels of each pixel, as ConvNeXt (and the attention
// models' pre-norms) use it. ONNX has LayerNormalization only from opset 17;
// below it PyTorch 1.13 exports F.layer_norm as its formula:
//   d = x - ReduceMean(x), y = d / Sqrt(ReduceMean(Pow(d, 2)) + eps)
// then Mul by the scale and Add of the bias. The formula is recognised before
// import (its inner nodes are skipped; its Div becomes one layernorm
// operator); the scale and bias are per-channel constants, which
// onnx_affine.cc folds into the convolution that reads them where exact.
// Only a norm over the channels is an IR operator: the last axis of a
// channels-last map (ConvNeXt's Transpose first), or axis 1 of an
// N, C, H, W one (a norm written by hand over the channels).
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "onnx/importer.h"
#include "onnx/onnx_chains.h"

namespace ios::onnx_import::detail {
namespace {

class LayerNormFinder {
 public:
  LayerNormFinder(const NodeChains& chains, int64_t opset) : chains_(chains), opset_(opset) {}

  //! The formula whose last node is the Div `div`: its matched nodes, or false.
  bool Match(const ::onnx::NodeProto& div, LayerNormMatch& match) const {
    if (div.input_size() != 2) return false;
    const ::onnx::NodeProto* sqrt = chains_.Producer(div, 1, "Sqrt");
    const ::onnx::NodeProto* sub = chains_.Producer(div, 0, "Sub");
    if (sqrt == nullptr || sub == nullptr || sub->input_size() != 2) return false;
    const std::string& x = sub->input(0);
    const ::onnx::NodeProto* mean = chains_.Producer(*sub, 1, "ReduceMean");
    if (mean == nullptr || mean->input(0) != x) return false;
    const ::onnx::NodeProto* plus_eps = chains_.Producer(*sqrt, 0, "Add");
    if (plus_eps == nullptr || plus_eps->input_size() != 2) return false;
    for (int side = 0; side < 2; ++side) {
      const ::onnx::NodeProto* variance = chains_.Producer(*plus_eps, side, "ReduceMean");
      const std::optional<double> eps = chains_.Scalar(plus_eps->input(1 - side));
      const ::onnx::NodeProto* square =
          variance != nullptr ? chains_.Producer(*variance, 0, "Pow") : nullptr;
      if (!eps || square == nullptr || square->input_size() != 2 ||
          square->input(0) != sub->output(0) || !chains_.IsScalar(square->input(1), 2.0)) {
        continue;
      }
      const std::optional<std::vector<int64_t>> axes = Axes(*mean);
      if (!axes || Axes(*variance) != axes || !KeepsDims(*mean) || !KeepsDims(*variance)) {
        return false;
      }
      match = {x,
               *axes,
               *eps,
               div.output(0),
               {mean->output(0), sub->output(0), square->output(0), variance->output(0),
                plus_eps->output(0), sqrt->output(0)}};
      // d is read twice (the Pow and the Div), the rest once: by the formula.
      std::vector<std::string> once = match.inner;
      once.erase(once.begin() + 1);
      return chains_.Readers(sub->output(0)) == 2 && chains_.EachReadOnce(once);
    }
    return false;
  }

 private:
  //! ReduceMean's axes: an attribute below opset 18, an input from it.
  std::optional<std::vector<int64_t>> Axes(const ::onnx::NodeProto& reduce) const {
    for (const ::onnx::AttributeProto& a : reduce.attribute()) {
      if (a.name() == "axes") return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    }
    if (opset_ >= 18 && reduce.input_size() > 1) return chains_.Ints(reduce.input(1));
    return std::nullopt;  // every axis: not a norm over channels
  }

  static bool KeepsDims(const ::onnx::NodeProto& reduce) {
    for (const ::onnx::AttributeProto& a : reduce.attribute()) {
      if (a.name() == "keepdims") return a.i() != 0;
    }
    return true;
  }

  const NodeChains& chains_;
  int64_t opset_;
};

}  // namespace

void Importer::FindLayerNorms(const NodeChains& chains) {
  const LayerNormFinder finder(chains, opset_);
  const auto match_at = [&](const ::onnx::NodeProto& node, LayerNormMatch& match) {
    return node.op_type() == "Div" && finder.Match(node, match);
  };
  FindFormulas(model_.graph(), match_at, layer_norms_, formula_inner_);
}

Value Importer::LayerNorm(const Value& x, const std::vector<int64_t>& axes, double eps) {
  const bool flat_pixel = x.kind == Value::Kind::kFlat && x.shape.h == 1 && x.shape.w == 1;
  const bool last_is_channels = x.kind == Value::Kind::kChannelsLast || flat_pixel;
  const auto rank = static_cast<int64_t>(OnnxDims(x, batch_).size());
  const int64_t axis = axes.size() == 1 ? (axes[0] < 0 ? axes[0] + rank : axes[0]) : -1;
  const bool over_channels = (last_is_channels && axis == rank - 1) ||
                             ((x.kind == Value::Kind::kTensor || flat_pixel) && axis == 1);
  if (!over_channels) {
    throw Error(where_ + ": a LayerNorm over axes " + IntsText(axes) + " of " + KindText(x) +
                ": only a norm over the channels (the last axis after a Transpose to "
                "channels-last, or axis 1) is supported");
  }
  if (!(eps > 0 && eps <= 1)) {
    throw Error(where_ + ": epsilon " + std::to_string(eps) + " is not in (0, 1]");
  }
  OpParams op = MakeRegisteredOp(RegisteredKind::kLayerNorm);
  SetFloatAttribute(op.registered, "eps", static_cast<float>(eps), where_);
  return InLayoutOf(AddNode(std::move(op), x.terms, TermShapes(x.terms), "LayerNorm"), x);
}

void Importer::ImportLayerNormChain(const ::onnx::NodeProto& node, const LayerNormMatch& match) {
  const auto it = values_.find(match.x);
  if (it == values_.end()) {
    throw Error(where_ + ": the LayerNorm's input " + Quoted(match.x) +
                " is produced by no earlier node");
  }
  Note("the LayerNorm formula ending in " + Quoted(label_) + " became a layernorm operator");
  Define(node, LayerNorm(it->second, match.axes, match.eps));
}

void Importer::ImportLayerNormalization(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"axis", "epsilon", "stash_type"});
  const Value& x = Input(node, 0);
  const Value normalised = LayerNorm(x, {attrs.Int("axis", -1)}, attrs.Float("epsilon", 1e-5f));
  const int k = x.shape.c;
  const ConstTensor& scale = ConstInput(node, 1, "scale");
  const ConstTensor* bias = HasInput(node, 2) ? &ConstInput(node, 2, "bias") : nullptr;
  for (const ConstTensor* t : {&scale, bias}) {
    if (t != nullptr && t->elements() != k) {
      throw Error(where_ + ": its " + (t == &scale ? "scale " : "bias ") + t->DimsText() + " for " +
                  std::to_string(k) + " channels");
    }
  }
  const bool has_values =
      scale.has_values && scale.is_float && (!bias || (bias->has_values && bias->is_float));
  std::vector<float> a, b;
  if (has_values) {
    a = scale.floats;
    b = bias ? bias->floats : std::vector<float>(static_cast<size_t>(k), 0.0f);
  }
  Define(node, AffineOperator(normalised, std::move(a), std::move(b), "LayerNormAffine"));
}

}  // namespace ios::onnx_import::detail
