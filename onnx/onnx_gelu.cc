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
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/printable.h"
#include "onnx/importer.h"

namespace ios::onnx_import::detail {
namespace {

// The formula's constants as float32, compared within this relative
// difference: an exporter writes them rounded to float, never otherwise.
constexpr double kConstantTolerance = 1e-6;

class GeluFinder {
 public:
  GeluFinder(const ::onnx::GraphProto& graph, const std::map<std::string, Value>& values,
             const std::map<std::string, int>& readers)
      : values_(values), readers_(readers) {
    for (const ::onnx::NodeProto& node : graph.node()) {
      for (const std::string& output : node.output()) producer_[output] = &node;
      for (const std::string& input : node.input()) reader_of_[input].push_back(&node);
    }
  }

  //! The exact GELU whose Erf is `erf`: its matched nodes, or false.
  bool MatchExact(const ::onnx::NodeProto& erf, GeluMatch& match) const {
    const ::onnx::NodeProto* div = Producer(erf, 0);
    if (div == nullptr || div->op_type() != "Div" || div->input_size() != 2 ||
        !IsScalar(div->input(1), std::sqrt(2.0))) {
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
    return EachInnerValueReadOnce(match);
  }

  //! The tanh-approximated GELU whose Tanh is `tanh`, or false.
  bool MatchTanh(const ::onnx::NodeProto& tanh, GeluMatch& match) const {
    const ::onnx::NodeProto* scaled = Producer(tanh, 0);
    const std::string* inner = scaled != nullptr && scaled->op_type() == "Mul"
                                   ? ScalarOperand(*scaled, std::sqrt(2.0 / std::numbers::pi))
                                   : nullptr;
    const ::onnx::NodeProto* sum = inner != nullptr ? ProducerOf(*inner) : nullptr;
    if (sum == nullptr || sum->op_type() != "Add" || sum->input_size() != 2) return false;
    // One operand of the sum is x, the other 0.044715 x^3 = Mul(k, Mul(x, Mul(x, x))).
    for (int side = 0; side < 2; ++side) {
      const std::string& x = sum->input(side);
      const ::onnx::NodeProto* cubic = ProducerOf(sum->input(1 - side));
      const std::string* cube =
          cubic != nullptr && cubic->op_type() == "Mul" ? ScalarOperand(*cubic, 0.044715) : nullptr;
      const ::onnx::NodeProto* x_cube = cube != nullptr ? ProducerOf(*cube) : nullptr;
      if (x_cube == nullptr || x_cube->op_type() != "Mul" || x_cube->input_size() != 2) continue;
      const int x_at = x_cube->input(0) == x ? 0 : x_cube->input(1) == x ? 1 : -1;
      const ::onnx::NodeProto* square = x_at < 0 ? nullptr : ProducerOf(x_cube->input(1 - x_at));
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
      return EachInnerValueReadOnce(match);
    }
    return false;
  }

  //! Both formulas end alike: 0.5 * (x * (1 + f)), f being the Erf or the
  //! Tanh. `half` is null when the chain after `f` is not that.
  struct Tail {
    const ::onnx::NodeProto* plus_one = nullptr;
    const ::onnx::NodeProto* times_x = nullptr;
    const ::onnx::NodeProto* half = nullptr;
  };
  Tail MatchTail(const ::onnx::NodeProto& f, const std::string& x) const {
    const ::onnx::NodeProto* plus_one = SoleReader(f, "Add");
    const std::string* one = plus_one != nullptr ? Other(*plus_one, f.output(0)) : nullptr;
    if (one == nullptr || !IsScalar(*one, 1.0)) return {};
    const ::onnx::NodeProto* times_x = SoleReader(*plus_one, "Mul");
    const std::string* x_again =
        times_x != nullptr ? Other(*times_x, plus_one->output(0)) : nullptr;
    if (x_again == nullptr || *x_again != x) return {};
    const ::onnx::NodeProto* half = SoleReader(*times_x, "Mul");
    const std::string* factor = half != nullptr ? Other(*half, times_x->output(0)) : nullptr;
    if (factor == nullptr || !IsScalar(*factor, 0.5)) return {};
    return {plus_one, times_x, half};
  }

  //! The chain is all that reads its inner values: nothing else sees them.
  bool EachInnerValueReadOnce(const GeluMatch& match) const {
    for (const std::string& name : match.inner) {
      if (Readers(name) != 1) return false;
    }
    return true;
  }

  int Readers(const std::string& name) const {
    const auto it = readers_.find(name);
    return it == readers_.end() ? 0 : it->second;
  }

 private:
  const ::onnx::NodeProto* ProducerOf(const std::string& name) const {
    const auto it = producer_.find(name);
    return it == producer_.end() ? nullptr : it->second;
  }

  const ::onnx::NodeProto* Producer(const ::onnx::NodeProto& node, int input) const {
    return input < node.input_size() ? ProducerOf(node.input(input)) : nullptr;
  }

  //! The one node reading `node`'s output, when it is of type `op`.
  const ::onnx::NodeProto* SoleReader(const ::onnx::NodeProto& node, const std::string& op) const {
    if (node.output_size() < 1 || Readers(node.output(0)) != 1) return nullptr;
    const auto it = reader_of_.find(node.output(0));
    if (it == reader_of_.end() || it->second.size() != 1) return nullptr;
    const ::onnx::NodeProto* reader = it->second[0];
    return reader->op_type() == op && reader->input_size() == 2 ? reader : nullptr;
  }

  //! The operand of binary `node` that is not `name` (nullptr when neither is).
  static const std::string* Other(const ::onnx::NodeProto& node, const std::string& name) {
    if (node.input(0) == name) return &node.input(1);
    if (node.input(1) == name) return &node.input(0);
    return nullptr;
  }

  //! The operand of binary `node` beside a scalar constant equal to `value`.
  const std::string* ScalarOperand(const ::onnx::NodeProto& node, double value) const {
    if (node.input_size() != 2) return nullptr;
    if (IsScalar(node.input(1), value)) return &node.input(0);
    if (IsScalar(node.input(0), value)) return &node.input(1);
    return nullptr;
  }

  //! Whether tensor `name` is a one-element float constant equal to `value`
  //! (an initializer, or a Constant node not yet imported).
  bool IsScalar(const std::string& name, double value) const {
    ConstTensor read;
    const ConstTensor* t = nullptr;
    if (const auto it = values_.find(name);
        it != values_.end() && it->second.kind == Value::Kind::kConstant) {
      t = it->second.constant;
    } else if (const ::onnx::NodeProto* node = ProducerOf(name);
               node != nullptr && node->op_type() == "Constant" && node->attribute_size() == 1 &&
               node->attribute(0).name() == "value" && node->attribute(0).has_t()) {
      read = ReadTensor(node->attribute(0).t(), "Constant " + name);
      t = &read;
    }
    if (t == nullptr || !t->has_values || !t->is_float || t->floats.size() != 1) return false;
    return std::abs(t->floats[0] - value) <= kConstantTolerance * std::abs(value);
  }

  const std::map<std::string, Value>& values_;
  const std::map<std::string, int>& readers_;
  std::map<std::string, const ::onnx::NodeProto*> producer_;
  std::map<std::string, std::vector<const ::onnx::NodeProto*>> reader_of_;
};

}  // namespace

void Importer::FindGelus() {
  const GeluFinder finder(model_.graph(), values_, readers_);
  for (const ::onnx::NodeProto& node : model_.graph().node()) {
    GeluMatch match;
    const bool found = (node.op_type() == "Erf" && finder.MatchExact(node, match)) ||
                       (node.op_type() == "Tanh" && finder.MatchTanh(node, match));
    if (!found) continue;
    for (const std::string& name : match.inner) gelu_inner_.insert(name);
    gelus_[match.top] = std::move(match);
  }
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
  if (x.kind != Value::Kind::kTensor && x.kind != Value::Kind::kFlat) {
    throw Error(where_ + ": the GELU's input " + Quoted(match.x) + " is " + KindText(x) +
                "; a feature map is expected");
  }
  const auto readers = readers_.find(match.x);
  const bool only_the_chain = readers != readers_.end() && readers->second == match.x_reads;
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
