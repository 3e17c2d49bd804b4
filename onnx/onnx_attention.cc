// Multi-head attention as PyTorch 1.13 exports nn.MultiheadAttention:
//   q, k, v: [L, N, C] (channel ranges of the in-projection's output)
//   Reshape each to [L, N*heads, d]; Transpose q and v by [1, 0, 2], k by
//   [1, 2, 0]; Div q by sqrt(d); MatMul(q, k); Softmax over the last axis;
//   MatMul by v; Transpose [1, 0, 2]; Reshape to [L*N, C].
// Only the first and the last tensor are feature maps the IR can hold (the
// heads' [N*heads, L, d] views mix the batch into another axis), so the
// chain is recognised before import, as GELU and LayerNorm are: its inner
// nodes become nothing and its last Reshape one attention(heads) operator
// reading q, k and v stacked on the channels.
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

class AttentionFinder {
 public:
  AttentionFinder(const NodeChains& chains, int64_t opset) : chains_(chains), opset_(opset) {}

  bool Match(const ::onnx::NodeProto& softmax, AttentionMatch& match) const {
    // Over the keys, the last axis of [N*heads, L, L]: below opset 13 a
    // Softmax without an axis is over axis 1 and everything after it.
    bool keys = opset_ >= 13;
    for (const ::onnx::AttributeProto& a : softmax.attribute()) {
      if (a.name() == "axis") keys = a.i() == -1 || a.i() == 2;
    }
    if (!keys) return false;
    const ::onnx::NodeProto* scores = chains_.Producer(softmax, 0, "MatMul");
    const ::onnx::NodeProto* weighted = chains_.OnlyReader(softmax, "MatMul");
    if (scores == nullptr || weighted == nullptr || weighted->input(0) != softmax.output(0)) {
      return false;
    }
    // The queries are scaled by a scalar: Div by sqrt(d) (PyTorch 1.13), or Mul.
    const ::onnx::NodeProto* scaled = chains_.ProducerOf(scores->input(0));
    if (scaled == nullptr || scaled->input_size() != 2) return false;
    int q_side = 0;
    if (scaled->op_type() == "Div" && chains_.Scalar(scaled->input(1))) {
      match.scale = scaled->input(1);
    } else if (scaled->op_type() == "Mul" && chains_.Scalar(scaled->input(1))) {
      match.scale = scaled->input(1);
      match.multiplies = true;
    } else if (scaled->op_type() == "Mul" && chains_.Scalar(scaled->input(0))) {
      match.scale = scaled->input(0);
      match.multiplies = true;
      q_side = 1;
    } else {
      return false;
    }
    const ::onnx::NodeProto* q_t = Transposed(*scaled, q_side, {1, 0, 2});
    const ::onnx::NodeProto* k_t = Transposed(*scores, 1, {1, 2, 0});
    const ::onnx::NodeProto* v_t = Transposed(*weighted, 1, {1, 0, 2});
    if (q_t == nullptr || k_t == nullptr || v_t == nullptr) return false;
    const ::onnx::NodeProto* q_r = chains_.Producer(*q_t, 0, "Reshape");
    const ::onnx::NodeProto* k_r = chains_.Producer(*k_t, 0, "Reshape");
    const ::onnx::NodeProto* v_r = chains_.Producer(*v_t, 0, "Reshape");
    const ::onnx::NodeProto* out_t = chains_.OnlyReader(*weighted, "Transpose");
    const ::onnx::NodeProto* out_r =
        out_t != nullptr && NodeChains::PermOf(*out_t) == std::vector<int64_t>{1, 0, 2}
            ? chains_.OnlyReader(*out_t, "Reshape")
            : nullptr;
    if (q_r == nullptr || k_r == nullptr || v_r == nullptr || out_r == nullptr) return false;
    match.q = q_r->input(0);
    match.k = k_r->input(0);
    match.v = v_r->input(0);
    match.q_heads = q_r->output(0);
    match.k_heads = k_r->output(0);
    match.v_heads = v_r->output(0);
    match.top = out_r->output(0);
    match.inner = {q_r->output(0),    q_t->output(0),      scaled->output(0), k_r->output(0),
                   k_t->output(0),    v_r->output(0),      v_t->output(0),    scores->output(0),
                   softmax.output(0), weighted->output(0), out_t->output(0)};
    return chains_.EachReadOnce(match.inner);
  }

 private:
  //! The Transpose by `perm` that is `node`'s input `input`, or nullptr.
  const ::onnx::NodeProto* Transposed(const ::onnx::NodeProto& node, int input,
                                      const std::vector<int64_t>& perm) const {
    const ::onnx::NodeProto* t = chains_.Producer(node, input, "Transpose");
    return t != nullptr && NodeChains::PermOf(*t) == perm ? t : nullptr;
  }

  const NodeChains& chains_;
  int64_t opset_;
};

}  // namespace

void Importer::FindAttentions(const NodeChains& chains) {
  const AttentionFinder finder(chains, opset_);
  const auto match_at = [&](const ::onnx::NodeProto& node, AttentionMatch& match) {
    return node.op_type() == "Softmax" && finder.Match(node, match);
  };
  FindFormulas(model_.graph(), match_at, attentions_, formula_inner_);
}

std::array<const Value*, 3> Importer::AttentionOperands(const std::array<std::string, 3>& names,
                                                        Value::Tokens tokens,
                                                        const std::string& expected) const {
  std::array<const Value*, 3> qkv{};
  for (size_t i = 0; i < names.size(); ++i) {
    const auto it = values_.find(names[i]);
    if (it == values_.end()) {
      throw Error(where_ + ": the attention's input " + Quoted(names[i]) +
                  " is produced by no earlier node");
    }
    const Value& v = it->second;
    if (v.kind != Value::Kind::kChannelsLast || v.tokens != tokens ||
        (i > 0 && !(v.shape == qkv[0]->shape && SameView(v, *qkv[0])))) {
      throw Error(where_ + ": the attention's input " + Quoted(names[i]) + " is " + KindText(v) +
                  " " + ShapeText(v) + "; " + expected);
    }
    qkv[i] = &v;
  }
  return qkv;
}

exec::ConvWeights Importer::ScoreBias(const std::string& name, int heads, int64_t size) const {
  const ConstTensor* bias = ConstantValue(values_, name);
  if (bias == nullptr || !bias->is_float || !BiasShaped(*bias, heads, size)) {
    throw Error(where_ + ": the window attention's score bias " + Quoted(name) +
                " is not a constant [heads, " + std::to_string(size) + ", " + std::to_string(size) +
                "]");
  }
  exec::ConvWeights weights;
  weights.out_channels = heads;
  weights.in_per_group = 1;
  weights.kernel_h = weights.kernel_w = static_cast<int>(size);
  if (bias->has_values) weights.kernel = bias->floats;
  return weights;
}

void Importer::ImportAttention(const ::onnx::NodeProto& node, const AttentionMatch& match) {
  const std::array<const Value*, 3> qkv =
      AttentionOperands({match.q, match.k, match.v}, Value::Tokens::kBatchSecond,
                        "queries, keys and values are expected as tokens [L, N, C] of one shape");
  const Shape& s = qkv[0]->shape;
  // The heads: from the queries' [L, N*heads, d] as ONNX's shape inference
  // gives it; the keys' and values' must be the same.
  const auto inferred_dims = [&](const std::string& name) {
    const auto inferred = inferred_.find(name);
    std::vector<int64_t> dims;
    if (inferred != inferred_.end() && inferred->second->has_tensor_type()) {
      for (const auto& d : inferred->second->tensor_type().shape().dim()) {
        dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
      }
    }
    return dims;
  };
  const std::vector<int64_t> heads_dims = inferred_dims(match.q_heads);
  for (const std::string* other : {&match.k_heads, &match.v_heads}) {
    if (inferred_dims(*other) != heads_dims) {
      throw Error(where_ + ": the attention's " + (other == &match.k_heads ? "keys" : "values") +
                  " are reshaped to " + IntsText(inferred_dims(*other)) + ", its queries to " +
                  IntsText(heads_dims) + ": heads of one shape are expected");
    }
  }
  const int64_t tokens = int64_t{s.h} * s.w;
  const bool shaped = heads_dims.size() == 3 && heads_dims[0] == tokens && heads_dims[2] > 0 &&
                      s.c % heads_dims[2] == 0 && heads_dims[1] == batch_ * (s.c / heads_dims[2]);
  if (!shaped) {
    throw Error(where_ + ": the attention's queries are reshaped to " + IntsText(heads_dims) +
                " (" + Quoted(match.q_heads) + "): [" + std::to_string(tokens) +
                ", N*heads, C/heads] with a head size dividing " + std::to_string(s.c) +
                " is expected");
  }
  const int64_t depth = heads_dims[2];
  const int heads = static_cast<int>(s.c / depth);
  const auto scale = values_.find(match.scale);
  const bool scalar = scale != values_.end() && scale->second.kind == Value::Kind::kConstant &&
                      scale->second.constant->has_values && scale->second.constant->is_float &&
                      scale->second.constant->elements() == 1;
  const double root = std::sqrt(static_cast<double>(depth));
  const double by = scalar ? scale->second.constant->floats[0] : 0;
  const double want = match.multiplies ? 1 / root : root;
  if (!scalar || std::abs(by - want) > 1e-5 * want) {
    throw Error(where_ + ": the attention's scores are " +
                (match.multiplies ? "multiplied by " : "divided by ") +
                (scalar ? std::to_string(by) : Quoted(match.scale)) +
                "; only scaled dot products " + "(1/sqrt(" + std::to_string(depth) +
                ") for heads of " + std::to_string(depth) + ") are supported");
  }
  OpParams op = MakeRegisteredOp(RegisteredKind::kAttention);
  SetAttribute(op.registered, "heads", heads, where_);
  Inputs inputs;
  for (const Value* v : qkv) inputs.insert(inputs.end(), v->terms.begin(), v->terms.end());
  Value out = InLayoutOf(AddNode(std::move(op), inputs, TermShapes(inputs), "Attention"), *qkv[0]);
  out.tokens = Value::Tokens::kRows;
  Note("the attention ending in " + Quoted(label_) + " (" + std::to_string(heads) +
       " heads) became an attention operator");
  Define(node, out);
}

}  // namespace ios::onnx_import::detail
