// GELU as exporters write it. Below opset 20 ONNX has no Gelu operator, and
// PyTorch 1.13 exports nn.GELU() as its formula:
//   exact: Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)
//   tanh:  Mul(0.5, Mul(x, Add(1, Tanh(Mul(sqrt(2/pi), Add(x, Mul(0.044715,
//          Mul(x, Mul(x, x)))))))))
// None of those nodes is an operator the IR has on its own (an Erf, a Div of a
// feature map), so the whole chain is recognised before import: its inner
// nodes are skipped and its last Mul becomes the gelu (gelu_tanh) activation
// of x, fused into x's convolution when the chain is all that reads x.
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/printable.h"
#include "onnx/importer.h"
#include "onnx/onnx_chains.h"

namespace ios::onnx_import::detail {
namespace {

class GeluFinder {
 public:
  explicit GeluFinder(const NodeChains& chains) : chains_(chains) {}

  //! The exact GELU whose Erf is `erf`: its matched nodes, or false.
  bool MatchExact(const ::onnx::NodeProto& erf, GeluMatch& match) const {
    const ::onnx::NodeProto* div = chains_.Producer(erf, 0, "Div");
    if (div == nullptr || div->input_size() != 2 ||
        !chains_.IsScalar(div->input(1), std::sqrt(2.0))) {
      return false;
    }
    const std::string& x = div->input(0);
    const Tail tail = MatchTail(erf, x);
    if (tail.half == nullptr) return false;
    match = {x,
             Activation::kGelu,
             2,
             tail.half->output(0),
             {div->output(0), erf.output(0), tail.plus_one->output(0), tail.times_x->output(0)}};
    return chains_.EachReadOnce(match.inner);
  }

  //! The tanh-approximated GELU whose Tanh is `tanh`, or false.
  bool MatchTanh(const ::onnx::NodeProto& tanh, GeluMatch& match) const {
    const ::onnx::NodeProto* scaled = chains_.Producer(tanh, 0, "Mul");
    const std::string* inner =
        scaled != nullptr ? chains_.ScalarOperand(*scaled, std::sqrt(2.0 / std::numbers::pi))
                          : nullptr;
    const ::onnx::NodeProto* sum = inner != nullptr ? chains_.ProducerOf(*inner) : nullptr;
    if (sum == nullptr || sum->op_type() != "Add" || sum->input_size() != 2) return false;
    // One operand of the sum is x, the other 0.044715 x^3 = Mul(k, Mul(x, Mul(x, x))).
    for (int side = 0; side < 2; ++side) {
      const std::string& x = sum->input(side);
      const ::onnx::NodeProto* cubic = chains_.Producer(*sum, 1 - side, "Mul");
      const std::string* cube =
          cubic != nullptr ? chains_.ScalarOperand(*cubic, 0.044715) : nullptr;
      const ::onnx::NodeProto* x_cube = cube != nullptr ? chains_.ProducerOf(*cube) : nullptr;
      if (x_cube == nullptr || x_cube->op_type() != "Mul" || x_cube->input_size() != 2) continue;
      const std::string* x_squared = NodeChains::Other(*x_cube, x);
      const ::onnx::NodeProto* square =
          x_squared != nullptr ? chains_.ProducerOf(*x_squared) : nullptr;
      if (square == nullptr || square->op_type() != "Mul" || square->input_size() != 2 ||
          square->input(0) != x || square->input(1) != x) {
        continue;
      }
      const Tail tail = MatchTail(tanh, x);
      if (tail.half == nullptr) return false;
      match = {
          x,
          Activation::kGeluTanh,
          5,
          tail.half->output(0),
          {square->output(0), x_cube->output(0), cubic->output(0), sum->output(0),
           scaled->output(0), tanh.output(0), tail.plus_one->output(0), tail.times_x->output(0)}};
      return chains_.EachReadOnce(match.inner);
    }
    return false;
  }

 private:
  //! Both formulas end alike: 0.5 * (x * (1 + f)), f being the Erf or the
  //! Tanh. `half` is null when the chain after `f` is not that.
  struct Tail {
    const ::onnx::NodeProto* plus_one = nullptr;
    const ::onnx::NodeProto* times_x = nullptr;
    const ::onnx::NodeProto* half = nullptr;
  };
  Tail MatchTail(const ::onnx::NodeProto& f, const std::string& x) const {
    const ::onnx::NodeProto* plus_one = chains_.SoleReader(f, "Add");
    const std::string* one =
        plus_one != nullptr ? NodeChains::Other(*plus_one, f.output(0)) : nullptr;
    if (one == nullptr || !chains_.IsScalar(*one, 1.0)) return {};
    const ::onnx::NodeProto* times_x = chains_.SoleReader(*plus_one, "Mul");
    const std::string* x_again =
        times_x != nullptr ? NodeChains::Other(*times_x, plus_one->output(0)) : nullptr;
    if (x_again == nullptr || *x_again != x) return {};
    const ::onnx::NodeProto* half = chains_.SoleReader(*times_x, "Mul");
    const std::string* factor =
        half != nullptr ? NodeChains::Other(*half, times_x->output(0)) : nullptr;
    if (factor == nullptr || !chains_.IsScalar(*factor, 0.5)) return {};
    return {plus_one, times_x, half};
  }

  const NodeChains& chains_;
};

}  // namespace

void Importer::FindGelus(const NodeChains& chains) {
  const GeluFinder finder(chains);
  const auto match_at = [&](const ::onnx::NodeProto& node, GeluMatch& match) {
    return (node.op_type() == "Erf" && finder.MatchExact(node, match)) ||
           (node.op_type() == "Tanh" && finder.MatchTanh(node, match));
  };
  FindFormulas(model_.graph(), match_at, gelus_, formula_inner_);
}

//! The last Mul of a GELU chain: x's activation, in x's convolution when
//! the chain's reads of x are all x's reads.
void Importer::ImportGelu(const ::onnx::NodeProto& node, const GeluMatch& match) {
  const auto it = values_.find(match.x);
  if (it == values_.end()) {
    throw Error(where_ + ": the GELU's input " + Quoted(match.x) +
                " is produced by no earlier node");
  }
  const Value& x = it->second;
  if (x.kind != Value::Kind::kTensor && x.kind != Value::Kind::kFlat &&
      x.kind != Value::Kind::kChannelsLast) {
    throw Error(where_ + ": the GELU's input " + Quoted(match.x) + " is " + KindText(x) +
                "; a feature map is expected");
  }
  const bool only_the_chain = ReadOnlyBy(match.x, match.x_reads);
  if (only_the_chain && x.terms.size() == 1 && x.terms[0].size() == 1) {
    const Slice& s = x.terms[0][0];
    Pending& producer = pending_.at(s.producer);
    if (s.begin == 0 && s.end == producer.node.output.c && producer.node.op.kind == OpKind::kConv &&
        producer.node.op.conv.act == Activation::kNone) {
      producer.node.op.conv.act = match.act;
      Note(std::string(match.act == Activation::kGelu ? "GELU" : "GELU (tanh)") + " " +
           Quoted(label_) + " was fused into the convolution before it");
      return Define(node, x);
    }
  }
  OpParams op;
  op.kind = OpKind::kActivation;
  op.act = match.act;
  DefineShapeKeeping(node, x, std::move(op));
}

}  // namespace ios::onnx_import::detail
