// Small ONNX models built in code for the importer's tests: no Python and
// no files needed. Names are chosen by the builder ("t0", "t1", ...).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ios::onnx_import::testing {

//! `bytes` damaged as a file can be, by trial's kind: a few bytes flipped,
//! cut short, or one byte set to a small integer (dims, attribute values).
std::string Damaged(std::string bytes, std::mt19937_64& rng, int trial);

::onnx::AttributeProto IntAttr(const std::string& name, int64_t value);
::onnx::AttributeProto FloatAttr(const std::string& name, float value);
::onnx::AttributeProto IntsAttr(const std::string& name, const std::vector<int64_t>& values);
::onnx::AttributeProto StringAttr(const std::string& name, const std::string& value);

class OnnxBuilder {
 public:
  //! A model whose input "input" is 1 x c x h x w float.
  OnnxBuilder(int c, int h, int w, int opset = 13);

  //! A float initializer with these values (their count must match dims).
  std::string Weight(const std::vector<int64_t>& dims, const std::vector<float>& values);
  //! A float initializer of seeded values in [-1, 1).
  std::string Weight(const std::vector<int64_t>& dims, uint64_t seed);
  std::string Ints(const std::vector<int64_t>& values);
  //! An int64 initializer of rank 0 (a Gather's index that drops the axis).
  std::string IntScalar(int64_t value);
  //! A Constant node holding one float, as exporters write a formula's numbers.
  std::string FloatConstant(float value);
  //! A weight declared as a graph input without values (export_params=False).
  std::string WeightInput(const std::vector<int64_t>& dims);

  //! Sets dimension `axis` of the input "input" (a crafted size).
  void InputDim(int axis, int64_t value);

  //! Appends a node; returns the name of its (first) output.
  std::string Node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<::onnx::AttributeProto>& attrs = {},
                   const std::string& domain = "");
  //! The last node appended, for tests that corrupt it.
  ::onnx::NodeProto& Last();
  ::onnx::ModelProto& Model() { return model_; }

  //! The serialized model whose graph output is `output`.
  std::string Bytes(const std::string& output);
  //! The serialized model whose graph outputs are `outputs`, in order.
  std::string Bytes(const std::vector<std::string>& outputs);
  //! The same without running ONNX's shape inference here (a crafted
  //! attribute may crash it): the output is declared of rank `rank`, sizes
  //! unknown.
  std::string UninferredBytes(const std::string& output, int rank = 4);

 private:
  std::string Fresh();
  std::string Serialize(const std::vector<std::string>& outputs, bool infer, int rank);

  ::onnx::ModelProto model_;
  int next_ = 0;
};

}  // namespace ios::onnx_import::testing
