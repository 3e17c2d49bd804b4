// MaxViT's block and grid attention as torchvision 0.14 exports them:
//   partition: a channels-first map Reshaped to [N, C, H/p, p, W/p, p],
//   Transposed [0, 2, 4, 3, 5, 1], Reshaped to [N, windows, p^2, C] (the
//   grid's the same with p = H/G, then a Transpose [0, 2, 1, 3] that swaps
//   windows and tokens: its windows are pixels H/G apart);
//   per token: LayerNorm, the q/k/v projection, q, k, v as Slices;
//   each Reshaped to [N, windows, p^2, heads, d] and Transposed [0, 1, 3,
//   2, 4]; k scaled; Einsum q.k; Add of the relative position bias;
//   Softmax; Einsum by v; Transpose back; Reshape to [N, windows, p^2, C];
//   the output projection, residual, LayerNorm, MLP, residual, all per token;
//   the reverse of the partition.
// As for Swin (onnx_windows.cc) the partitions are relabellings of the map
// and the attention is recognised as a whole: one window_attention(heads,
// window, 0, grid) operator reading q, k and v stacked on the channels.
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/op_kinds.h"
#include "common/printable.h"
#include "onnx/importer.h"
#include "onnx/onnx_chains.h"

namespace ios::onnx_import::detail {
namespace {

using Tokens = Value::Tokens;

//! The Einsum's equation without spaces ("" when `node` is none).
std::string Equation(const ::onnx::NodeProto* node) {
  std::string text;
  if (node == nullptr || node->op_type() != "Einsum") return text;
  for (const ::onnx::AttributeProto& a : node->attribute()) {
    if (a.name() != "equation") continue;
    for (const char c : a.s()) {
      if (c != ' ') text += c;
    }
  }
  return text;
}

class SampleWindowAttentionFinder {
 public:
  SampleWindowAttentionFinder(const NodeChains& chains, int64_t opset)
      : chains_(chains), opset_(opset) {}

  bool Match(const ::onnx::NodeProto& softmax, SampleWindowAttentionMatch& match) const {
    // Over the keys: the last axis of [N, windows, heads, p^2, p^2] (the
    // default from opset 13; before it, axis 1 and everything after).
    bool keys = opset_ >= 13;
    for (const ::onnx::AttributeProto& a : softmax.attribute()) {
      if (a.name() == "axis") keys = a.i() == -1 || a.i() == 4;
    }
    if (!keys) return false;
    const ::onnx::NodeProto* biased = chains_.Producer(softmax, 0, "Add");
    const ::onnx::NodeProto* scores =
        biased != nullptr ? chains_.ProducerOf(biased->input(0)) : nullptr;
    if (Equation(scores) != "BGHID,BGHJD->BGHIJ") return false;
    match.bias = biased->input(1);
    std::vector<std::string> inner = {biased->output(0), scores->output(0), softmax.output(0)};
    const ::onnx::NodeProto* scaled = chains_.Producer(*scores, 1, "Mul");
    if (scaled == nullptr) return false;
    int k_side = 0;
    if (chains_.Scalar(scaled->input(1))) {
      match.scale = scaled->input(1);
    } else if (chains_.Scalar(scaled->input(0))) {
      match.scale = scaled->input(0);
      k_side = 1;
    } else {
      return false;
    }
    const ::onnx::NodeProto* after = chains_.OnlyReader(softmax, "Dropout");
    if (after != nullptr) inner.push_back(after->output(0));
    const ::onnx::NodeProto* weighted =
        chains_.OnlyReader(after != nullptr ? *after : softmax, "Einsum");
    if (Equation(weighted) != "BGHIJ,BGHJD->BGHID") return false;
    const ::onnx::NodeProto* q = Heads(*scores, 0, inner);
    const ::onnx::NodeProto* k = Heads(*scaled, k_side, inner);
    const ::onnx::NodeProto* v = Heads(*weighted, 1, inner);
    const ::onnx::NodeProto* back = chains_.OnlyReader(*weighted, "Transpose");
    const ::onnx::NodeProto* top =
        back != nullptr && NodeChains::PermOf(*back) == std::vector<int64_t>{0, 1, 3, 2, 4}
            ? chains_.OnlyReader(*back, "Reshape")
            : nullptr;
    if (q == nullptr || k == nullptr || v == nullptr || top == nullptr) return false;
    match.q = q->input(0);
    match.k = k->input(0);
    match.v = v->input(0);
    match.heads = q->input(1);
    match.k_heads = k->input(1);
    match.v_heads = v->input(1);
    match.top = top->output(0);
    inner.insert(inner.end(), {scaled->output(0), weighted->output(0), back->output(0)});
    match.inner = std::move(inner);
    return chains_.EachReadOnce(match.inner);
  }

 private:
  //! The Reshape to heads whose Transpose [0, 1, 3, 2, 4] is `node`'s input
  //! `input`; both outputs join `inner`.
  const ::onnx::NodeProto* Heads(const ::onnx::NodeProto& node, int input,
                                 std::vector<std::string>& inner) const {
    const ::onnx::NodeProto* t = chains_.Producer(node, input, "Transpose");
    if (t == nullptr || NodeChains::PermOf(*t) != std::vector<int64_t>{0, 1, 3, 2, 4})
      return nullptr;
    const ::onnx::NodeProto* r = chains_.Producer(*t, 0, "Reshape");
    if (r == nullptr) return nullptr;
    inner.insert(inner.end(), {t->output(0), r->output(0)});
    return r;
  }

  const NodeChains& chains_;
  int64_t opset_;
};

}  // namespace

void Importer::FindSampleWindowAttentions(const NodeChains& chains) {
  const SampleWindowAttentionFinder finder(chains, opset_);
  const auto match_at = [&](const ::onnx::NodeProto& node, SampleWindowAttentionMatch& match) {
    return node.op_type() == "Softmax" && finder.Match(node, match);
  };
  FindFormulas(model_.graph(), match_at, sample_window_attentions_, formula_inner_);
}

bool Importer::ReshapeSampleWindows(const ::onnx::NodeProto& node, const Value& x,
                                    const std::vector<int64_t>& shape) {
  const auto batch = [&](int64_t d) { return d == batch_ || d == 0 || d == -1; };
  const Shape& s = x.shape;
  const int64_t w = x.window;
  Value out = x;
  const bool plain_map =
      x.kind == Value::Kind::kTensor && x.tokens == Tokens::kNone && x.window_stage == 0;
  if (plain_map && shape.size() == 6 && batch(shape[0]) && shape[1] == s.c && shape[3] > 0 &&
      shape[3] == shape[5] && Times(shape[2], shape[3], s.h) && Times(shape[4], shape[5], s.w)) {
    out.window = static_cast<int>(shape[3]);  // a partition's first Reshape
    out.window_stage = 3;
  } else if (x.kind == Value::Kind::kChannelsLast && x.window_stage == 2 &&
             x.tokens == Tokens::kNone && x.roll_y == 0 && x.roll_x == 0 && shape.size() == 4 &&
             batch(shape[0]) && shape[1] == (s.h / w) * (s.w / w) && shape[2] == w * w &&
             shape[3] == s.c) {
    out.window_stage = 0;  // into each sample's windows of tokens
    out.tokens = Tokens::kSampleWindows;
  } else if (x.kind == Value::Kind::kChannelsLast && x.tokens == Tokens::kSampleWindows &&
             !x.grid && shape.size() == 6 && batch(shape[0]) && Times(shape[1], w, s.h) &&
             Times(shape[2], w, s.w) && shape[3] == w && shape[4] == w && shape[5] == s.c) {
    out.tokens = Tokens::kNone;  // the reverse's first Reshape
    out.window_stage = 2;
  } else if (x.kind == Value::Kind::kTensor && x.window_stage == 3 && shape.size() == 4 &&
             batch(shape[0]) && shape[1] == s.c && shape[2] == s.h && shape[3] == s.w) {
    out.window_stage = 0;  // back to the map
    out.window = 0;
  } else {
    return false;
  }
  PassedOn(node);
  Define(node, out);
  return true;
}

bool Importer::TransposeSampleWindows(const ::onnx::NodeProto& node, const Value& x,
                                      const std::vector<int64_t>& perm) {
  Value out = x;
  if (x.kind == Value::Kind::kTensor && x.window_stage == 3 &&
      perm == std::vector<int64_t>{0, 2, 4, 3, 5, 1}) {
    out.kind = Value::Kind::kChannelsLast;
    out.window_stage = 2;
  } else if (x.kind == Value::Kind::kChannelsLast && x.window_stage == 2 &&
             x.tokens == Tokens::kNone && x.roll_y == 0 && x.roll_x == 0 &&
             perm == std::vector<int64_t>{0, 5, 1, 3, 2, 4}) {
    out.kind = Value::Kind::kTensor;
    out.window_stage = 3;
  } else if (x.kind == Value::Kind::kChannelsLast && x.tokens == Tokens::kSampleWindows &&
             perm == std::vector<int64_t>{0, 2, 1, 3} && x.shape.h == x.shape.w) {
    // Windows and tokens swapped: blocks of p pixels become a grid of
    // H / p (MaxViT's grid partition), and back.
    out.grid = !x.grid;
    out.window = x.shape.h / x.window;
  } else {
    return false;
  }
  PassedOn(node);
  Define(node, out);
  return true;
}

void Importer::ImportSampleWindowAttention(const ::onnx::NodeProto& node,
                                           const SampleWindowAttentionMatch& match) {
  const std::array<const Value*, 3> qkv =
      AttentionOperands({match.q, match.k, match.v}, Tokens::kSampleWindows,
                        "queries, keys and values of one partition into windows are expected");
  const Value& q = *qkv[0];
  const int64_t size = int64_t{q.window} * q.window;
  const auto shape_of = [&](const std::string& name) {
    const ConstTensor* shape = ConstantValue(values_, name);
    return shape != nullptr && shape->has_values && !shape->is_float ? shape->ints
                                                                     : std::vector<int64_t>{};
  };
  const std::vector<int64_t> dims = shape_of(match.heads);
  if (dims.size() != 5 || dims[2] != size || dims[3] < 1 || dims[4] < 1 ||
      !Times(dims[3], dims[4], q.shape.c)) {
    throw Error(where_ + ": the attention's queries are reshaped to " + IntsText(dims) +
                ": [N, windows, " + std::to_string(size) + ", heads, C/heads] is expected");
  }
  for (const std::string* other : {&match.k_heads, &match.v_heads}) {
    if (shape_of(*other) != dims) {
      throw Error(where_ + ": the attention's " + (other == &match.k_heads ? "keys" : "values") +
                  " are reshaped to " + IntsText(shape_of(*other)) + ", its queries to " +
                  IntsText(dims) + ": heads of one shape are expected");
    }
  }
  const int heads = static_cast<int>(dims[3]);
  // torchvision's MaxViT scales by 1/sqrt(C), not by 1/sqrt(C/heads).
  const ConstTensor* scale = ConstantValue(values_, match.scale);
  if (scale == nullptr || !scale->has_values || !scale->is_float || scale->elements() != 1 ||
      !(scale->floats[0] > 0 && scale->floats[0] <= 1e6f)) {
    throw Error(where_ + ": the attention's keys are scaled by " + Quoted(match.scale) +
                "; a positive constant scalar is expected");
  }
  const double standard = 1 / std::sqrt(static_cast<double>(dims[4]));
  exec::ConvWeights bias = ScoreBias(match.bias, heads, size);
  OpParams op = MakeRegisteredOp(RegisteredKind::kWindowAttention);
  SetAttribute(op.registered, "heads", heads, where_);
  SetAttribute(op.registered, "window", q.window, where_);
  SetAttribute(op.registered, "shift", 0, where_);
  SetAttribute(op.registered, "grid", q.grid ? 1 : 0, where_);
  if (std::abs(scale->floats[0] - standard) > 1e-6 * standard) {
    SetFloatAttribute(op.registered, "scale", scale->floats[0], where_);
  }
  Inputs inputs;
  for (const Value* v : qkv) inputs.insert(inputs.end(), v->terms.begin(), v->terms.end());
  const bool known = !bias.kernel.empty();
  Value out = InLayoutOf(
      AddNode(std::move(op), inputs, TermShapes(inputs), "WindowAttention", std::move(bias), known),
      q);
  Note("the " + std::string(q.grid ? "grid" : "block") + " attention ending in " + Quoted(label_) +
       " (" + std::to_string(heads) +
       " heads) became a window_attention "
       "operator");
  Define(node, out);
}

}  // namespace ios::onnx_import::detail
