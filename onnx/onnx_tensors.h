// Internal to the ONNX importer: reading ONNX tensors and node attributes
// into plain values, with errors that name the node and the field.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ios::onnx_import::detail {

//! A constant tensor (an initializer, a Constant node's value, or a weight
//! the file declares as a graph input without values).
struct ConstTensor {
  std::string name;
  std::vector<int64_t> dims;
  bool has_values = false;  // false: only the shape is known
  bool is_float = true;     // floats hold the values; otherwise ints do
  std::vector<float> floats;
  std::vector<int64_t> ints;

  int64_t elements() const;
  //! "[64, 3, 7, 7]".
  std::string DimsText() const;
};

//! The values of `tensor` (FLOAT, or INT64/INT32 read as integers).
//! Throws ios::Error naming `where` for other element types, external data
//! or a size that disagrees with the dims.
ConstTensor ReadTensor(const ::onnx::TensorProto& tensor, const std::string& where);

//! A node's attributes by name, with typed getters that name the node and
//! the attribute when the type is wrong.
class Attributes {
 public:
  Attributes(const ::onnx::NodeProto& node, std::string where);

  bool Has(const std::string& name) const;
  int64_t Int(const std::string& name, int64_t fallback) const;
  float Float(const std::string& name, float fallback) const;
  std::string String(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> Ints(const std::string& name) const;  // empty when absent
  std::optional<::onnx::TensorProto> Tensor(const std::string& name) const;
  //! Refuses any attribute not in `known`, naming it.
  void OnlyKnown(const std::vector<std::string>& known) const;

 private:
  const ::onnx::AttributeProto* Find(const std::string& name,
                                     ::onnx::AttributeProto_AttributeType type) const;

  const ::onnx::NodeProto& node_;
  std::string where_;
};

}  // namespace ios::onnx_import::detail
