// Writing a graph (and a schedule) as IOS JSON (common/ios_json.h): the
// inverse of the loader, in the reference's own field names.
#include <charconv>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/ios_json.h"
#include "common/op_kinds.h"
#include "common/slices.h"

namespace ios {
namespace {

using nlohmann::json;

json ShapeJson(const Shape& s) { return json::array({s.c, s.h, s.w}); }
json PairJson(const Window& w) { return json::array({w.h, w.w}); }

const char* ActJson(Activation act) {
  return act == Activation::kNone ? "identity" : ToString(act);
}

// A float attribute as a JSON number: the double nearest its shortest
// decimal, so the file says 1e-06 rather than 9.999999974752427e-07 (the
// float's exact value), unless that double would not round back to the
// same float; then the exact value, which always does.
json FloatJson(const OpAttribute& attribute, int bits) {
  const float value = FloatOfBits(bits);
  const std::string text = AttributeText(attribute, bits);
  double shortest = 0;
  std::from_chars(text.data(), text.data() + text.size(), shortest);
  return static_cast<float>(shortest) == value ? shortest : static_cast<double>(value);
}

void WriteOp(json& jn, const OpParams& op) {
  switch (op.kind) {
    case OpKind::kConv:
      jn["type"] = "conv";
      jn["out_channels"] = op.conv.out_channels;
      jn["kernel"] = PairJson(op.conv.kernel);
      jn["stride"] = PairJson(op.conv.stride);
      jn["padding"] = PairJson(op.conv.padding);
      if (!(op.conv.padding_end_extra == Window{0, 0})) {
        jn["padding_end_extra"] = PairJson(op.conv.padding_end_extra);
      }
      if (!(op.conv.dilation == Window{1, 1})) jn["dilation"] = PairJson(op.conv.dilation);
      jn["groups"] = op.conv.groups;
      if (!op.conv.bias) jn["bias"] = false;
      jn["act"] = ActJson(op.conv.act);
      break;
    case OpKind::kPool:
      jn["type"] = "pool";
      jn["pool_type"] = ToString(op.pool.type);
      jn["kernel"] = PairJson(op.pool.kernel);
      jn["stride"] = PairJson(op.pool.stride);
      jn["padding"] = PairJson(op.pool.padding);
      if (op.pool.ceil) jn["ceil_mode"] = true;
      if (op.pool.exclude_padding) jn["count_include_pad"] = false;
      break;
    case OpKind::kActivation:
      if (op.act == Activation::kRelu) {
        jn["type"] = "relu";
      } else {
        jn["type"] = "activation";
        jn["act_type"] = ActJson(op.act);
      }
      break;
    case OpKind::kEltwise:
      jn["type"] = "element";
      jn["op_type"] = op.eltwise == EltwiseType::kAdd ? "add" : "mul";
      break;
    case OpKind::kIdentity:
      jn["type"] = "identity";
      break;
    case OpKind::kSequential:
      jn["type"] = "sequential";
      break;
    case OpKind::kRegistered: {
      const OpKindSpec& spec = SpecOf(op.registered.kind);
      jn["type"] = spec.name;
      // Attributes at their defaults are left out, as a file writer would.
      for (size_t i = 0; i < spec.attributes.size(); ++i) {
        const OpAttribute& attribute = spec.attributes[i];
        const int value = op.registered.attributes.at(i);
        if (value == attribute.default_value) continue;
        jn[std::string(attribute.name)] =
            attribute.is_float ? FloatJson(attribute, value) : json(value);
      }
      break;
    }
    case OpKind::kInput:
      jn["type"] = "placeholder";
      break;
  }
}

json InputsJson(const Graph& g, const Inputs& inputs) {
  json terms = json::array();
  for (const Term& term : inputs) {
    json jt = json::array();
    for (const Slice& s : term)
      jt.push_back(json::array({g.node(s.producer).name, s.begin, s.end}));
    terms.push_back(std::move(jt));
  }
  return terms;
}

json NodeJson(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  json jn = json::object();
  WriteOp(jn, node.op);
  jn["name"] = node.name;
  jn["hint_name"] = node.hint;
  if (node.op.kind == OpKind::kSequential) {
    json steps = json::array();
    std::string previous;
    Shape shape = node.output;
    for (size_t i = 0; i < node.op.chain.size(); ++i) {
      json js = json::object();
      WriteOp(js, node.op.chain[i]);
      // Step names only need to be unique inside the step list.
      const std::string name = node.name + "." + std::to_string(i);
      js["name"] = name;
      js["hint_name"] = name;
      js["inputs"] = i == 0 ? InputsJson(g, node.inputs)
                            : json::array({json::array({json::array({previous, 0, shape.c})})});
      // Step output shapes are re-derived on import; record the channels.
      if (i == 0) {
        const ResolvedInput in = ResolveNodeInput(g, id, node.op.kind, node.inputs);
        shape = InferOpOutput(node.op.chain[0], in.TermShapes(), node.name);
      } else {
        shape = InferOpOutput(node.op.chain[i], {shape}, node.name);
      }
      js["output_shape"] = ShapeJson(shape);
      previous = name;
      steps.push_back(std::move(js));
    }
    jn["nodes"] = std::move(steps);
  } else if (node.op.kind != OpKind::kInput) {
    jn["inputs"] = InputsJson(g, node.inputs);
  }
  jn["output_shape"] = ShapeJson(node.output);
  return jn;
}

}  // namespace

std::string ToIosJson(
    const Graph& graph,
    const std::vector<std::vector<std::vector<std::vector<std::string>>>>& stages) {
  json doc = json::object();
  doc["name"] = graph.name;
  json input = json::object();
  input["type"] = "placeholder";
  input["name"] = graph.node(0).name;
  input["hint_name"] = graph.node(0).hint;
  input["output_shape"] = ShapeJson(graph.node(0).output);
  doc["input"] = input;
  json blocks = json::array();
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    const Block& block = graph.blocks[b];
    json jb = json::object();
    jb["enter_name"] = graph.node(block.enter).name;
    jb["enter_node"] = block.enter == 0 ? input : NodeJson(graph, block.enter);
    json inner = json::array();
    for (NodeId id : block.inner) inner.push_back(NodeJson(graph, id));
    jb["inner_nodes"] = std::move(inner);
    jb["exit_node"] = NodeJson(graph, block.exit);
    if (!block.parts.empty()) {
      json parts = json::array();
      for (const auto& part : block.parts) {
        json names = json::array();
        for (NodeId id : part) names.push_back(graph.node(id).name);
        parts.push_back(std::move(names));
      }
      jb["parts"] = std::move(parts);
    }
    jb["stages"] = b < stages.size() ? json(stages[b]) : json::array();
    blocks.push_back(std::move(jb));
  }
  doc["blocks"] = std::move(blocks);
  return doc.dump(2);
}

}  // namespace ios
