// GELU as PyTorch 1.13 exports it (onnx/onnx_gelu.cc): the exact and the
// tanh formula, written node by node, become one activation, fused into the
// convolution before them when nothing else reads its output; a chain whose
// constants are not GELU's stays what it is (and is refused).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "exec/weights.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"

namespace ios::onnx_import {
namespace {

using ::testing::HasSubstr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::OnnxBuilder;

std::string ExactGelu(OnnxBuilder& b, const std::string& x, float half = 0.5f) {
  const std::string erf = b.Node("Erf", {b.Node("Div", {x, b.FloatConstant(1.4142135f)})});
  const std::string plus_one = b.Node("Add", {erf, b.FloatConstant(1.0f)});
  return b.Node("Mul", {b.Node("Mul", {x, plus_one}), b.FloatConstant(half)});
}

std::string TanhGelu(OnnxBuilder& b, const std::string& x) {
  const std::string cube = b.Node("Mul", {x, b.Node("Mul", {x, x})});
  const std::string inner = b.Node("Add", {x, b.Node("Mul", {b.FloatConstant(0.044715f), cube})});
  const std::string t = b.Node("Tanh", {b.Node("Mul", {b.FloatConstant(0.7978846f), inner})});
  const std::string plus_one = b.Node("Add", {b.FloatConstant(1.0f), t});
  return b.Node("Mul", {b.FloatConstant(0.5f), b.Node("Mul", {x, plus_one})});
}

double Gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double GeluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

TEST(OnnxGeluTest, TheExactFormulaAfterAConvolutionIsItsGeluActivation) {
  OnnxBuilder b(2, 3, 3);
  const std::vector<float> w = {1.5f, -2.0f, 0.5f, 3.0f};  // 2x2x1x1
  const std::string conv =
      b.Node("Conv", {"input", b.Weight({2, 2, 1, 1}, w)}, {IntsAttr("kernel_shape", {1, 1})});
  const ImportedModel model = ImportOnnx(b.Bytes(ExactGelu(b, conv)), "gelu.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 2u) << "the input and the convolution";
  EXPECT_EQ(model.graph.nodes[1].op.conv.act, Activation::kGelu);
  const std::vector<float> x = exec::SeededValues(18, 3);
  const std::vector<float> out = RunImported(model, x);
  for (int o = 0; o < 2; ++o) {
    for (int p = 0; p < 9; ++p) {
      const double y = w[o * 2] * x[p] + w[o * 2 + 1] * x[9 + p];
      EXPECT_NEAR(out[o * 9 + p], Gelu(y), 1e-5) << o << " " << p;
    }
  }
}

TEST(OnnxGeluTest, TheTanhFormulaOnAValueReadElsewhereIsAnActivationOperator) {
  OnnxBuilder b(2, 2, 2);
  const std::string relu = b.Node("Relu", {"input"});
  const std::string gelu = TanhGelu(b, "input");
  const std::string cat = b.Node("Concat", {gelu, relu}, {IntAttr("axis", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(cat), "gelu_tanh.onnx");
  int activations = 0;
  for (const Node& node : model.graph.nodes) {
    if (node.op.kind == OpKind::kActivation && node.op.act == Activation::kGeluTanh) ++activations;
  }
  EXPECT_EQ(activations, 1);
  EXPECT_EQ(model.graph.nodes.size(), 4u)
      << "the input, the gelu_tanh, the relu, the output's concat";
  std::vector<float> x = exec::SeededValues(8, 5);
  for (float& v : x) v *= 4;  // values where tanh bends
  const std::vector<float> out = RunImported(model, x);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], GeluTanh(x[i]), 1e-5) << i;
}

TEST(OnnxGeluTest, AChainWithAnotherConstantIsNotGeluAndIsRefusedAtItsDiv) {
  OnnxBuilder b(2, 2, 2);
  EXPECT_THAT(Refusal(b.Bytes(ExactGelu(b, "input", 0.5001f))),
              HasSubstr("(Div): operator not supported by the ONNX importer"));
}

}  // namespace
}  // namespace ios::onnx_import
