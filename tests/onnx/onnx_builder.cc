#include "tests/onnx/onnx_builder.h"

#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <exception>
#include <stdexcept>

#include "exec/weights.h"

namespace ios::onnx_import::testing {

::onnx::AttributeProto IntAttr(const std::string& name, int64_t value) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_INT);
  a.set_i(value);
  return a;
}

::onnx::AttributeProto FloatAttr(const std::string& name, float value) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_FLOAT);
  a.set_f(value);
  return a;
}

::onnx::AttributeProto IntsAttr(const std::string& name, const std::vector<int64_t>& values) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_INTS);
  for (int64_t v : values) a.add_ints(v);
  return a;
}

::onnx::AttributeProto StringAttr(const std::string& name, const std::string& value) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_STRING);
  a.set_s(value);
  return a;
}

namespace {

void SetShape(::onnx::ValueInfoProto& info, const std::vector<int64_t>& dims) {
  auto* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(::onnx::TensorProto_DataType_FLOAT);
  for (int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
}

}  // namespace

OnnxBuilder::OnnxBuilder(int c, int h, int w, int opset) {
  model_.set_ir_version(7);
  model_.set_producer_name("ios-farm tests");
  auto* op = model_.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* graph = model_.mutable_graph();
  graph->set_name("test_graph");
  auto* input = graph->add_input();
  input->set_name("input");
  SetShape(*input, {1, c, h, w});
}

std::string OnnxBuilder::Fresh() { return "t" + std::to_string(next_++); }

std::string OnnxBuilder::Weight(const std::vector<int64_t>& dims,
                                const std::vector<float>& values) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  if (count != static_cast<int64_t>(values.size())) throw std::logic_error("Weight: wrong count");
  auto* t = model_.mutable_graph()->add_initializer();
  const std::string name = Fresh();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto_DataType_FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  std::string raw(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(raw.data(), values.data(), raw.size());
  t->set_raw_data(raw);
  return name;
}

std::string OnnxBuilder::Weight(const std::vector<int64_t>& dims, uint64_t seed) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  return Weight(dims, exec::SeededValues(static_cast<size_t>(count), seed));
}

std::string Damaged(std::string bytes, std::mt19937_64& rng, int trial) {
  if (bytes.empty()) return bytes;
  switch (trial % 3) {
    case 0:
      for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
        bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      break;
    case 1:
      bytes.resize(rng() % bytes.size());
      break;
    default:
      bytes[rng() % bytes.size()] = static_cast<char>(rng() % 16);
      break;
  }
  return bytes;
}

std::string OnnxBuilder::Ints(const std::vector<int64_t>& values) {
  auto* t = model_.mutable_graph()->add_initializer();
  const std::string name = Fresh();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto_DataType_INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return name;
}

std::string OnnxBuilder::IntScalar(int64_t value) {
  auto* t = model_.mutable_graph()->add_initializer();
  const std::string name = Fresh();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto_DataType_INT64);
  t->add_int64_data(value);
  return name;
}

std::string OnnxBuilder::FloatConstant(float value) {
  ::onnx::AttributeProto attr;
  attr.set_name("value");
  attr.set_type(::onnx::AttributeProto::TENSOR);
  attr.mutable_t()->set_data_type(::onnx::TensorProto_DataType_FLOAT);
  attr.mutable_t()->add_float_data(value);
  return Node("Constant", {}, {attr});
}

std::string OnnxBuilder::WeightInput(const std::vector<int64_t>& dims) {
  auto* input = model_.mutable_graph()->add_input();
  const std::string name = Fresh();
  input->set_name(name);
  SetShape(*input, dims);
  return name;
}

void OnnxBuilder::InputDim(int axis, int64_t value) {
  model_.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(axis)
      ->set_dim_value(value);
}

std::string OnnxBuilder::Node(const std::string& op, const std::vector<std::string>& inputs,
                              const std::vector<::onnx::AttributeProto>& attrs,
                              const std::string& domain) {
  auto* node = model_.mutable_graph()->add_node();
  const std::string output = Fresh();
  node->set_name(op + "_" + output);
  node->set_op_type(op);
  if (!domain.empty()) node->set_domain(domain);
  for (const std::string& in : inputs) node->add_input(in);
  node->add_output(output);
  for (const auto& a : attrs) *node->add_attribute() = a;
  return output;
}

::onnx::NodeProto& OnnxBuilder::Last() {
  auto* graph = model_.mutable_graph();
  return *graph->mutable_node(graph->node_size() - 1);
}

std::string OnnxBuilder::Bytes(const std::string& output) { return Serialize({output}, true, 4); }

std::string OnnxBuilder::Bytes(const std::vector<std::string>& outputs) {
  return Serialize(outputs, true, 4);
}

std::string OnnxBuilder::UninferredBytes(const std::string& output, int rank) {
  return Serialize({output}, false, rank);
}

std::string OnnxBuilder::Serialize(const std::vector<std::string>& outputs, bool infer, int rank) {
  ::onnx::ModelProto model = model_;
  ::onnx::ModelProto inferred = model_;
  if (infer) {
    try {
      ::onnx::shape_inference::InferShapes(inferred);
    } catch (const std::exception&) {
    }
  }
  // The checker wants each output's type and shape, as exporters write
  // them: ONNX's own shape inference supplies them, and a rank-4 shape of
  // unknown sizes where it cannot (an operator of another domain).
  for (const std::string& output : outputs) {
    auto* out = model.mutable_graph()->add_output();
    out->set_name(output);
    for (const auto& info : inferred.graph().value_info()) {
      if (infer && info.name() == output) *out->mutable_type() = info.type();
    }
    if (!out->type().has_tensor_type() || !out->type().tensor_type().has_shape()) {
      auto* tensor = out->mutable_type()->mutable_tensor_type();
      tensor->set_elem_type(::onnx::TensorProto_DataType_FLOAT);
      for (int d = 0; d < rank; ++d)
        tensor->mutable_shape()->add_dim()->set_dim_param("d" + std::to_string(d));
    }
  }
  std::string bytes;
  model.SerializeToString(&bytes);
  return bytes;
}

}  // namespace ios::onnx_import::testing
