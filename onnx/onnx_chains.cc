#include "onnx/onnx_chains.h"

#include <cmath>
#include <set>

namespace ios::onnx_import::detail {
namespace {

// The formulas' constants as float32, compared within this relative
// difference: an exporter writes them rounded to float, never otherwise.
constexpr double kConstantTolerance = 1e-6;

}  // namespace

NodeChains::NodeChains(const ::onnx::GraphProto& graph, const std::map<std::string, Value>& values,
                       const std::map<std::string, int>& readers)
    : values_(values), readers_(readers) {
  for (const ::onnx::NodeProto& node : graph.node()) {
    for (const std::string& output : node.output()) producer_[output] = &node;
    for (const std::string& input : node.input()) reader_of_[input].push_back(&node);
  }
}

const ::onnx::NodeProto* NodeChains::ProducerOf(const std::string& name) const {
  const auto it = producer_.find(name);
  return it == producer_.end() ? nullptr : it->second;
}

const ::onnx::NodeProto* NodeChains::Producer(const ::onnx::NodeProto& node, int input) const {
  return input < node.input_size() ? ProducerOf(node.input(input)) : nullptr;
}

const ConstTensor* ConstantValue(const std::map<std::string, Value>& values,
                                 const std::string& name) {
  const auto it = values.find(name);
  return it != values.end() && it->second.kind == Value::Kind::kConstant ? it->second.constant
                                                                         : nullptr;
}

std::vector<int64_t> NodeChains::PermOf(const ::onnx::NodeProto& node) {
  for (const ::onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == "perm") return {a.ints().begin(), a.ints().end()};
  }
  return {};
}

int NodeChains::Arity(const std::string& op) {
  // The inputs a matcher reads of each operator it walks through: a file
  // may leave them out (a malformed node reaches the matchers before the
  // importer's own checks), and reading one that is not there is no refusal.
  static const std::set<std::string> kBinary = {"Add",    "Sub",    "Mul",     "Div", "MatMul",
                                                "Einsum", "Gather", "Reshape", "Pow"};
  return kBinary.count(op) ? 2 : 1;
}

const ::onnx::NodeProto* NodeChains::Producer(const ::onnx::NodeProto& node, int input,
                                              const std::string& op) const {
  const ::onnx::NodeProto* p = Producer(node, input);
  return p != nullptr && p->op_type() == op && p->input_size() >= Arity(op) ? p : nullptr;
}

const ::onnx::NodeProto* NodeChains::SoleReader(const ::onnx::NodeProto& node,
                                                const std::string& op) const {
  if (node.output_size() < 1 || Readers(node.output(0)) != 1) return nullptr;
  const auto it = reader_of_.find(node.output(0));
  if (it == reader_of_.end() || it->second.size() != 1) return nullptr;
  const ::onnx::NodeProto* reader = it->second[0];
  return reader->op_type() == op && reader->input_size() == 2 ? reader : nullptr;
}

const ::onnx::NodeProto* NodeChains::OnlyReader(const ::onnx::NodeProto& node,
                                                const std::string& op) const {
  if (node.output_size() < 1 || Readers(node.output(0)) != 1) return nullptr;
  const auto it = reader_of_.find(node.output(0));
  if (it == reader_of_.end() || it->second.size() != 1) return nullptr;
  const ::onnx::NodeProto* reader = it->second[0];
  return reader->op_type() == op && reader->input_size() >= Arity(op) ? reader : nullptr;
}

const std::string* NodeChains::Other(const ::onnx::NodeProto& node, const std::string& name) {
  if (node.input_size() != 2) return nullptr;
  if (node.input(0) == name) return &node.input(1);
  if (node.input(1) == name) return &node.input(0);
  return nullptr;
}

const std::string* NodeChains::ScalarOperand(const ::onnx::NodeProto& node, double value) const {
  if (node.input_size() != 2) return nullptr;
  if (IsScalar(node.input(1), value)) return &node.input(0);
  if (IsScalar(node.input(0), value)) return &node.input(1);
  return nullptr;
}

const ConstTensor* NodeChains::Constant(const std::string& name, ConstTensor& scratch) const {
  if (const auto it = values_.find(name);
      it != values_.end() && it->second.kind == Value::Kind::kConstant) {
    return it->second.constant;
  }
  const ::onnx::NodeProto* node = ProducerOf(name);
  if (node != nullptr && node->op_type() == "Constant" && node->attribute_size() == 1 &&
      node->attribute(0).name() == "value" && node->attribute(0).has_t()) {
    scratch = ReadTensor(node->attribute(0).t(), "Constant " + name);
    return &scratch;
  }
  return nullptr;
}

std::optional<double> NodeChains::Scalar(const std::string& name) const {
  ConstTensor scratch;
  const ConstTensor* t = Constant(name, scratch);
  if (t == nullptr || !t->has_values || !t->is_float || t->floats.size() != 1) return std::nullopt;
  return t->floats[0];
}

bool NodeChains::IsScalar(const std::string& name, double value) const {
  const std::optional<double> v = Scalar(name);
  return v && std::abs(*v - value) <= kConstantTolerance * std::abs(value);
}

std::optional<std::vector<int64_t>> NodeChains::Ints(const std::string& name) const {
  ConstTensor scratch;
  const ConstTensor* t = Constant(name, scratch);
  if (t == nullptr || !t->has_values || t->is_float) return std::nullopt;
  return t->ints;
}

int NodeChains::Readers(const std::string& name) const {
  const auto it = readers_.find(name);
  return it == readers_.end() ? 0 : it->second;
}

bool NodeChains::EachReadOnce(const std::vector<std::string>& names) const {
  for (const std::string& name : names) {
    if (Readers(name) != 1) return false;
  }
  return true;
}

}  // namespace ios::onnx_import::detail
