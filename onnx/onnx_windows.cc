// Swin's shifted windows as torchvision 0.14 exports them
// (`shifted_window_attention`):
//   x [N, H, W, C] channels-last, rolled by torch.roll(-s, -s): Slices of
//   rows [s, H) and [0, s) concatenated, then of columns alike;
//   partitioned: Reshape [N, H/w, w, W/w, w, C], Transpose [0, 1, 3, 2, 4,
//   5], Reshape [N*nW, w*w, C];
//   the q/k/v projection (MatMul, Add) per token;
//   Reshape [N*nW, w*w, 3, heads, d], Transpose [2, 0, 3, 1, 4], Gathers of
//   q, k, v; q times d^-0.5; MatMul(q, k^T); Add the relative position bias;
//   (shifted: Reshape, Add the mask, Reshape); Softmax; (Dropout); MatMul
//   by v; Transpose [0, 2, 1, 3]; Reshape [N*nW, w*w, C];
//   the output projection per token; the partition and the roll undone.
// The rolls and the partition are relabellings of the map, as ViT's token
// views are (onnx_tokens.cc): every operator between them works per pixel
// but the attention, which is recognised as a whole (as GELU is) and
// becomes one window_attention(heads, window, shift) operator on the map,
// the bias its weights, the mask checked against the one the shift implies.
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/op_kinds.h"
#include "common/op_kinds_transformer.h"
#include "common/printable.h"
#include "onnx/importer.h"
#include "onnx/onnx_chains.h"

namespace ios::onnx_import::detail {
namespace {

using Tokens = Value::Tokens;

//! Whether a Softmax of rank-`rank` scores [.., N, N] is over the keys:
//! its last axis (the default from opset 13; before, axis 1 and after).
bool LastAxis(const ::onnx::NodeProto& softmax, int64_t rank, int64_t opset) {
  for (const ::onnx::AttributeProto& a : softmax.attribute()) {
    if (a.name() == "axis") return a.i() == -1 || a.i() == rank - 1;
  }
  return opset >= 13;
}

bool IsPlainMap(const Value& v) {
  return v.kind == Value::Kind::kChannelsLast && v.tokens == Tokens::kNone && v.window_stage == 0;
}

class WindowAttentionFinder {
 public:
  WindowAttentionFinder(const NodeChains& chains, int64_t opset) : chains_(chains), opset_(opset) {}

  bool Match(const ::onnx::NodeProto& softmax, WindowAttentionMatch& match) const {
    std::vector<std::string> inner;
    if (softmax.input_size() < 1 || !LastAxis(softmax, 4, opset_)) return false;
    // Scores, biased (and masked).
    const ::onnx::NodeProto* in = chains_.ProducerOf(softmax.input(0));
    const ::onnx::NodeProto* biased = in;
    if (in != nullptr && in->op_type() == "Reshape") {
      const ::onnx::NodeProto* masked = chains_.Producer(*in, 0, "Add");
      const ::onnx::NodeProto* split =
          masked != nullptr ? chains_.Producer(*masked, 0, "Reshape") : nullptr;
      if (split == nullptr) return false;
      match.mask = masked->input(1);
      biased = chains_.Producer(*split, 0, "Add");
      inner.insert(inner.end(), {in->output(0), masked->output(0), split->output(0)});
    }
    if (biased == nullptr || biased->op_type() != "Add" || biased->input_size() < 2) return false;
    const ::onnx::NodeProto* scores = chains_.Producer(*biased, 0, "MatMul");
    if (scores == nullptr) return false;
    match.bias = biased->input(1);
    inner.push_back(biased->output(0));
    // q times the scale; k transposed; all three Gathers of one Transpose.
    const ::onnx::NodeProto* scaled = chains_.Producer(*scores, 0, "Mul");
    const ::onnx::NodeProto* k_t = chains_.Producer(*scores, 1, "Transpose");
    if (scaled == nullptr || k_t == nullptr ||
        NodeChains::PermOf(*k_t) != std::vector<int64_t>{0, 1, 3, 2}) {
      return false;
    }
    const ::onnx::NodeProto* q = chains_.Producer(*scaled, 0, "Gather");
    match.scale = scaled->input(1);
    if (q == nullptr) {
      q = chains_.Producer(*scaled, 1, "Gather");
      match.scale = scaled->input(0);
    }
    const ::onnx::NodeProto* k = chains_.Producer(*k_t, 0, "Gather");
    // After the softmax: an optional Dropout, the product by v.
    const ::onnx::NodeProto* after = chains_.OnlyReader(softmax, "Dropout");
    if (after != nullptr) inner.push_back(after->output(0));
    const ::onnx::NodeProto* weighted =
        chains_.OnlyReader(after != nullptr ? *after : softmax, "MatMul");
    const ::onnx::NodeProto* v =
        weighted != nullptr ? chains_.Producer(*weighted, 1, "Gather") : nullptr;
    if (q == nullptr || k == nullptr || v == nullptr) return false;
    const ::onnx::NodeProto* split = chains_.Producer(*q, 0, "Transpose");
    if (split == nullptr || NodeChains::PermOf(*split) != std::vector<int64_t>{2, 0, 3, 1, 4} ||
        k->input(0) != split->output(0) || v->input(0) != split->output(0) ||
        chains_.Readers(split->output(0)) != 3 || !Index(*q, 0) || !Index(*k, 1) || !Index(*v, 2)) {
      return false;
    }
    const ::onnx::NodeProto* heads = chains_.Producer(*split, 0, "Reshape");
    const ::onnx::NodeProto* back = chains_.OnlyReader(*weighted, "Transpose");
    const ::onnx::NodeProto* top =
        back != nullptr && NodeChains::PermOf(*back) == std::vector<int64_t>{0, 2, 1, 3}
            ? chains_.OnlyReader(*back, "Reshape")
            : nullptr;
    if (heads == nullptr || top == nullptr) return false;
    match.x = heads->input(0);
    match.heads = heads->input(1);
    match.top = top->output(0);
    inner.insert(inner.end(), {heads->output(0), q->output(0), k->output(0), v->output(0),
                               scaled->output(0), k_t->output(0), scores->output(0),
                               softmax.output(0), weighted->output(0), back->output(0)});
    for (const std::string& name : inner) {
      if (name != split->output(0) && chains_.Readers(name) != 1) return false;
    }
    inner.push_back(split->output(0));
    match.inner = std::move(inner);
    return true;
  }

 private:
  //! Whether `gather` takes index `i` of axis 0.
  bool Index(const ::onnx::NodeProto& gather, int64_t i) const {
    for (const ::onnx::AttributeProto& a : gather.attribute()) {
      if (a.name() == "axis" && a.i() != 0) return false;
    }
    const std::optional<std::vector<int64_t>> index = chains_.Ints(gather.input(1));
    return index && index->size() == 1 && (*index)[0] == i;
  }

  const NodeChains& chains_;
  int64_t opset_;
};

}  // namespace

void Importer::FindWindowAttentions(const NodeChains& chains) {
  const WindowAttentionFinder finder(chains, opset_);
  const auto match_at = [&](const ::onnx::NodeProto& node, WindowAttentionMatch& match) {
    return node.op_type() == "Softmax" && finder.Match(node, match);
  };
  FindFormulas(model_.graph(), match_at, window_attentions_, formula_inner_);
}

bool Importer::SliceRollPart(const ::onnx::NodeProto& node, const Value& x,
                             const std::vector<int64_t>& axes, const std::vector<int64_t>& starts,
                             const std::vector<int64_t>& ends, const std::vector<int64_t>& steps) {
  if (!IsPlainMap(x) || axes.size() != 1 || starts.size() != 1 || ends.size() != 1 ||
      (!steps.empty() && steps[0] != 1)) {
    return false;
  }
  const int64_t axis = axes[0] < 0 ? axes[0] + 4 : axes[0];
  if (axis != 1 && axis != 2) return false;
  const int64_t n = axis == 1 ? x.shape.h : x.shape.w;
  const int64_t b = std::clamp(starts[0] < 0 ? starts[0] + n : starts[0], int64_t{0}, n);
  const int64_t e = std::clamp(ends[0] < 0 ? ends[0] + n : ends[0], int64_t{0}, n);
  if (b == 0 && e == n) return false;  // the whole axis: nothing
  if (e <= b || (b != 0 && e != n)) return false;
  Value part = x;
  part.kind = Value::Kind::kRollPart;
  part.part_axis = static_cast<int>(axis);
  part.part_begin = static_cast<int>(b);
  part.part_end = static_cast<int>(e);
  Define(node, part);
  return true;
}

bool Importer::ConcatRoll(const ::onnx::NodeProto& node, int64_t axis) {
  if (node.input_size() != 2) return false;
  const Value& a = Input(node, 0);
  const Value& b = Input(node, 1);
  if (a.kind != Value::Kind::kRollPart) return false;
  const int64_t n = a.part_axis == 1 ? a.shape.h : a.shape.w;
  const bool halves =
      b.kind == Value::Kind::kRollPart && b.terms == a.terms && b.part_axis == a.part_axis &&
      (axis == a.part_axis || axis == a.part_axis - 4) && a.part_end == n && b.part_begin == 0 &&
      b.part_end == a.part_begin && a.roll_y == b.roll_y && a.roll_x == b.roll_x;
  if (!halves) {
    throw Error(where_ + ": a Concat of " + KindText(a) + " and " + KindText(b) +
                ": only both halves of one roll ([s, end) then [0, s) of one axis) are supported");
  }
  Value rolled = a;
  rolled.kind = Value::Kind::kChannelsLast;
  int& roll = a.part_axis == 1 ? rolled.roll_y : rolled.roll_x;
  roll = static_cast<int>((roll + a.part_begin) % n);
  Define(node, rolled);
  return true;
}

bool Importer::ReshapeWindows(const ::onnx::NodeProto& node, const Value& x,
                              const std::vector<int64_t>& shape) {
  if (x.kind != Value::Kind::kChannelsLast) return false;
  const auto batch = [&](int64_t d) { return d == batch_ || d == 0 || d == -1; };
  const Shape& s = x.shape;
  Value out = x;
  if (IsPlainMap(x) && shape.size() == 6 && batch(shape[0]) && shape[2] == shape[4] &&
      shape[2] > 0 && shape[5] == s.c && Times(shape[1], shape[2], s.h) &&
      Times(shape[3], shape[4], s.w)) {
    out.window = static_cast<int>(shape[2]);  // the partition's first Reshape
    out.window_stage = 1;
  } else if (x.window_stage == 2 && x.tokens == Tokens::kNone && shape.size() == 3 &&
             shape[1] == int64_t{x.window} * x.window && shape[2] == s.c) {
    out.window_stage = 0;  // into the windows' tokens
    out.tokens = Tokens::kWindows;
  } else if (x.tokens == Tokens::kWindows && shape.size() == 6 && batch(shape[0]) &&
             Times(shape[1], x.window, s.h) && Times(shape[2], x.window, s.w) &&
             shape[3] == x.window && shape[4] == x.window && shape[5] == s.c) {
    out.tokens = Tokens::kNone;  // the reverse's first Reshape
    out.window_stage = 2;
  } else if (x.window_stage == 1 && shape.size() == 4 && batch(shape[0]) && shape[1] == s.h &&
             shape[2] == s.w && shape[3] == s.c) {
    out.window_stage = 0;  // back to the map
    out.window = 0;
  } else {
    return false;
  }
  PassedOn(node);
  Define(node, out);
  return true;
}

void Importer::ImportWindowAttention(const ::onnx::NodeProto& node,
                                     const WindowAttentionMatch& match) {
  const auto it = values_.find(match.x);
  if (it == values_.end()) {
    throw Error(where_ + ": the window attention's input " + Quoted(match.x) +
                " is produced by no earlier node");
  }
  const Value& x = it->second;
  if (x.kind != Value::Kind::kChannelsLast || x.tokens != Tokens::kWindows ||
      x.roll_y != x.roll_x || x.shape.c % 3 != 0) {
    throw Error(where_ + ": the window attention's input " + Quoted(match.x) + " is " +
                KindText(x) + " " + ShapeText(x) +
                "; queries, keys and values of the tokens of windows rolled alike along "
                "both axes are expected");
  }
  const int window = x.window, shift = x.roll_y, channels = x.shape.c / 3;
  const int64_t size = int64_t{window} * window;
  // The Reshape's shape is computed by the graph (folded by now), so ONNX's
  // shape inference may not know the result's.
  const ConstTensor* shape = ConstantValue(values_, match.heads);
  const std::vector<int64_t> dims = shape != nullptr && shape->has_values && !shape->is_float
                                        ? shape->ints
                                        : std::vector<int64_t>{};
  if (dims.size() != 5 || dims[1] != size || dims[2] != 3 || dims[3] < 1 || dims[4] < 1 ||
      !Times(dims[3], dims[4], channels)) {
    throw Error(where_ + ": the window attention's heads are " + IntsText(dims) + ": [N*windows, " +
                std::to_string(size) + ", 3, heads, C/heads] is expected");
  }
  const int heads = static_cast<int>(dims[3]);
  const ConstTensor* scale = ConstantValue(values_, match.scale);
  const double want = 1 / std::sqrt(static_cast<double>(dims[4]));
  if (scale == nullptr || !scale->has_values || !scale->is_float || scale->elements() != 1 ||
      std::abs(scale->floats[0] - want) > 1e-5 * want) {
    throw Error(where_ + ": the window attention's queries are scaled by " + Quoted(match.scale) +
                "; only 1/sqrt(" + std::to_string(dims[4]) + ") is supported");
  }
  exec::ConvWeights bias = ScoreBias(match.bias, heads, size);
  // The mask must be the one the shift implies (WindowRegion), window by window.
  if (shift > 0 || !match.mask.empty()) {
    const ConstTensor* mask = ConstantValue(values_, match.mask);
    const int wide = x.shape.w / window;
    const int64_t windows = int64_t{x.shape.h / window} * wide;
    bool same = shift > 0 && mask != nullptr && mask->has_values &&
                mask->elements() == windows * size * size;
    for (int64_t i = 0; same && i < mask->elements(); ++i) {
      const int64_t w = i / (size * size), a = i / size % size, b = i % size;
      const auto region = [&](int64_t t) {
        const int y = static_cast<int>(w / wide * window + t / window);
        const int col = static_cast<int>(w % wide * window + t % window);
        return op_kinds_detail::WindowRegion(y, x.shape.h, window, shift) * 3 +
               op_kinds_detail::WindowRegion(col, x.shape.w, window, shift);
      };
      const double expected = region(a) != region(b) ? -100.0 : 0.0;
      const double got = mask->is_float ? double{mask->floats[static_cast<size_t>(i)]}
                                        : static_cast<double>(mask->ints[static_cast<size_t>(i)]);
      same = got == expected;
    }
    if (!same) {
      throw Error(where_ + ": the window attention's mask " + Quoted(match.mask) +
                  " is not Swin's for a shift of " + std::to_string(shift) + " (-100 between " +
                  "regions of the rolled map, 0 within one)");
    }
  }
  OpParams op = MakeRegisteredOp(RegisteredKind::kWindowAttention);
  SetAttribute(op.registered, "heads", heads, where_);
  SetAttribute(op.registered, "window", window, where_);
  SetAttribute(op.registered, "shift", shift, where_);
  const bool known = !bias.kernel.empty();
  Value out = InLayoutOf(AddNode(std::move(op), x.terms, TermShapes(x.terms), "WindowAttention",
                                 std::move(bias), known),
                         x);
  Note("the window attention ending in " + Quoted(label_) + " (" + std::to_string(heads) +
       " heads, " + std::to_string(window) + "x" + std::to_string(window) + " windows" +
       (shift > 0 ? ", shifted by " + std::to_string(shift) : "") +
       ") became a window_attention operator");
  Define(node, out);
}

}  // namespace ios::onnx_import::detail
