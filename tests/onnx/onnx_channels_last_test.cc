// ConvNeXt's way of writing per-position layers (onnx_layout.cc,
// onnx_layernorm.cc, onnx_affine.cc): a Transpose to channels-last, a
// LayerNorm over the last axis (its formula below opset 17, the operator from
// it), MatMul by [C, K] constants, per-channel scales and shifts, and the
// Transpose back. They import as layernorm and 1x1 convolutions with the
// constants folded in, and compute what the ONNX graph computes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/op_kinds.h"
#include "exec/weights.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"

namespace ios::onnx_import {
namespace {

using testing::FloatAttr;
using ::testing::HasSubstr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::OnnxBuilder;

// PyTorch 1.13's F.layer_norm below opset 17, without the scale and bias.
std::string LayerNormFormula(OnnxBuilder& b, const std::string& x, std::vector<int64_t> axes,
                             float eps) {
  const std::string mean = b.Node("ReduceMean", {x}, {IntsAttr("axes", axes)});
  const std::string centred = b.Node("Sub", {x, mean});
  const std::string square = b.Node("Pow", {centred, b.FloatConstant(2.0f)});
  const std::string variance = b.Node("ReduceMean", {square}, {IntsAttr("axes", axes)});
  const std::string root = b.Node("Sqrt", {b.Node("Add", {variance, b.FloatConstant(eps)})});
  return b.Node("Div", {centred, root});
}

std::vector<float> Seeded(size_t count, uint64_t seed, float low, float high) {
  std::vector<float> v = exec::SeededValues(count, seed);  // in [-1, 1)
  for (float& x : v) x = low + (x + 1) / 2 * (high - low);
  return v;
}

// The pixel's channels normalised as PyTorch's layer_norm does it.
std::vector<double> Normalised(const std::vector<double>& v, double eps) {
  double mean = 0, variance = 0;
  for (double x : v) mean += x / static_cast<double>(v.size());
  for (double x : v) variance += (x - mean) * (x - mean) / static_cast<double>(v.size());
  std::vector<double> out;
  for (double x : v) out.push_back((x - mean) / std::sqrt(variance + eps));
  return out;
}

int CountOps(const ImportedModel& model, OpKind kind) {
  return static_cast<int>(std::count_if(model.graph.nodes.begin(), model.graph.nodes.end(),
                                        [&](const Node& n) { return n.op.kind == kind; }));
}

TEST(OnnxChannelsLastTest, AConvNeXtBlockImportsAsLayerNormTwoPointwiseConvolutionsAndAnAdd) {
  constexpr int kC = 4, kHidden = 8, kPixels = 9;
  OnnxBuilder b(kC, 3, 3);
  const std::vector<float> gamma = Seeded(kC, 1, 0.5f, 1.0f), beta = Seeded(kC, 2, -0.1f, 0.1f);
  const std::vector<float> w1 = Seeded(kC * kHidden, 3, -1, 1),
                           b1 = Seeded(kHidden, 4, -0.1f, 0.1f);
  const std::vector<float> w2 = Seeded(kHidden * kC, 5, -1, 1), b2 = Seeded(kC, 6, -0.1f, 0.1f);
  const std::vector<float> scale = Seeded(kC, 7, 0.5f, 1.0f);
  const std::string last = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  std::string y = LayerNormFormula(b, last, {-1}, 1e-6f);
  y = b.Node("Add", {b.Node("Mul", {y, b.Weight({kC}, gamma)}), b.Weight({kC}, beta)});
  y = b.Node("Add", {b.Weight({kHidden}, b1), b.Node("MatMul", {y, b.Weight({kC, kHidden}, w1)})});
  y = b.Node("Relu", {y});
  y = b.Node("Add", {b.Node("MatMul", {y, b.Weight({kHidden, kC}, w2)}), b.Weight({kC}, b2)});
  y = b.Node("Transpose", {y}, {IntsAttr("perm", {0, 3, 1, 2})});
  y = b.Node("Mul", {b.Weight({kC, 1, 1}, scale), y});
  const std::string out = b.Node("Add", {y, "input"});

  const ImportedModel model = ImportOnnx(b.Bytes(out), "convnext_block.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 5u) << "input, layernorm, two 1x1 convolutions, add";
  EXPECT_EQ(model.graph.nodes[1].op.kind, OpKind::kRegistered);
  EXPECT_EQ(RegisteredKeyText(model.graph.nodes[1].op.registered), "layernorm(eps=1e-06)");
  EXPECT_EQ(model.graph.nodes[2].op.conv.act, Activation::kRelu);
  EXPECT_EQ(model.graph.nodes[2].op.conv.out_channels, kHidden);
  EXPECT_EQ(model.graph.nodes[3].op.conv.out_channels, kC);
  EXPECT_EQ(model.graph.nodes[4].op.kind, OpKind::kEltwise);

  const std::vector<float> x = exec::SeededValues(kC * kPixels, 8);
  const std::vector<float> got = RunImported(model, x);
  for (int p = 0; p < kPixels; ++p) {
    std::vector<double> v;
    for (int c = 0; c < kC; ++c) v.push_back(x[c * kPixels + p]);
    const std::vector<double> n = Normalised(v, 1e-6);
    std::vector<double> hidden(kHidden);
    for (int k = 0; k < kHidden; ++k) {
      double sum = b1[k];
      for (int c = 0; c < kC; ++c) sum += (n[c] * gamma[c] + beta[c]) * w1[c * kHidden + k];
      hidden[k] = std::max(sum, 0.0);
    }
    for (int c = 0; c < kC; ++c) {
      double sum = b2[c];
      for (int k = 0; k < kHidden; ++k) sum += hidden[k] * w2[k * kC + c];
      EXPECT_NEAR(got[c * kPixels + p], scale[c] * sum + v[c], 1e-4) << c << " " << p;
    }
  }
}

TEST(OnnxChannelsLastTest, ATransposeToChannelsLastAndBackCostsNoOperator) {
  OnnxBuilder b(3, 2, 2);
  std::string y = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  y = b.Node("Relu", {y});
  y = b.Node("Transpose", {y}, {IntsAttr("perm", {0, 3, 1, 2})});
  const ImportedModel model = ImportOnnx(b.Bytes(y), "relabel.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 2u) << "the input and the relu";
  const std::vector<float> x = exec::SeededValues(12, 9);
  const std::vector<float> got = RunImported(model, x);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], std::max(x[i], 0.0f)) << i;
}

TEST(OnnxChannelsLastTest, LayerNormalizationBeforeAPaddedConvolutionKeepsItsAffineOperator) {
  constexpr int kC = 3, kPixels = 4;
  OnnxBuilder b(kC, 2, 2, 17);
  const std::vector<float> gamma = {0.5f, 2.0f, -1.0f}, beta = {0.25f, 0.0f, -0.5f};
  std::string y = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  y = b.Node("LayerNormalization", {y, b.Weight({kC}, gamma), b.Weight({kC}, beta)},
             {IntAttr("axis", -1), FloatAttr("epsilon", 1e-5f)});
  y = b.Node("Transpose", {y}, {IntsAttr("perm", {0, 3, 1, 2})});
  // An identity 3x3 depthwise kernel with padding 1: the padded zeros stay zeros.
  std::vector<float> centre(kC * 9, 0.0f);
  for (int c = 0; c < kC; ++c) centre[c * 9 + 4] = 1.0f;
  y = b.Node(
      "Conv", {y, b.Weight({kC, 1, 3, 3}, centre)},
      {IntsAttr("kernel_shape", {3, 3}), IntsAttr("pads", {1, 1, 1, 1}), IntAttr("group", kC)});
  const ImportedModel model = ImportOnnx(b.Bytes(y), "layernorm17.onnx");
  EXPECT_EQ(CountOps(model, OpKind::kRegistered), 1);
  EXPECT_EQ(CountOps(model, OpKind::kConv), 2) << "the affine map and the convolution";
  const std::vector<float> x = exec::SeededValues(kC * kPixels, 10);
  const std::vector<float> got = RunImported(model, x);
  for (int p = 0; p < kPixels; ++p) {
    std::vector<double> v;
    for (int c = 0; c < kC; ++c) v.push_back(x[c * kPixels + p]);
    const std::vector<double> n = Normalised(v, 1e-5);
    for (int c = 0; c < kC; ++c) {
      EXPECT_NEAR(got[c * kPixels + p], n[c] * gamma[c] + beta[c], 1e-5) << c << " " << p;
    }
  }
}

TEST(OnnxChannelsLastTest, AScaleAndShiftBeforeAnUnpaddedConvolutionFoldIntoIt) {
  OnnxBuilder b(2, 4, 4);
  const std::vector<float> w = Seeded(3 * 2 * 2 * 2, 11, -1, 1);
  std::string y = b.Node("Relu", {"input"});
  y = b.Node("Mul", {y, b.Weight({1, 2, 1, 1}, {2.0f, -0.5f})});
  y = b.Node("Add", {y, b.Weight({2, 1, 1}, {0.25f, 1.0f})});
  y = b.Node("Conv", {y, b.Weight({3, 2, 2, 2}, w)},
             {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})});
  const ImportedModel model = ImportOnnx(b.Bytes(y), "downsample.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 3u) << "the input, the relu and the convolution";
  const std::vector<float> x = exec::SeededValues(32, 12);
  const std::vector<float> got = RunImported(model, x);
  const float a[2] = {2.0f, -0.5f}, shift[2] = {0.25f, 1.0f};
  for (int o = 0; o < 3; ++o) {
    for (int oy = 0; oy < 2; ++oy) {
      for (int ox = 0; ox < 2; ++ox) {
        double sum = 0;
        for (int i = 0; i < 2; ++i) {
          for (int ky = 0; ky < 2; ++ky) {
            for (int kx = 0; kx < 2; ++kx) {
              const float v = std::max(x[i * 16 + (oy * 2 + ky) * 4 + ox * 2 + kx], 0.0f);
              sum += (a[i] * v + shift[i]) * w[((o * 2 + i) * 2 + ky) * 2 + kx];
            }
          }
        }
        EXPECT_NEAR(got[o * 4 + oy * 2 + ox], sum, 1e-5) << o << " " << oy << " " << ox;
      }
    }
  }
}

TEST(OnnxChannelsLastTest, AScaleOfAValueReadTwiceIsAnOperatorAndTheOtherReaderSeesTheValue) {
  OnnxBuilder b(2, 1, 2);
  const std::string conv = b.Node("Conv", {"input", b.Weight({2, 2, 1, 1}, {1, 0, 0, 1})},
                                  {IntsAttr("kernel_shape", {1, 1})});
  const std::string scaled = b.Node("Mul", {conv, b.Weight({2, 1, 1}, {3.0f, -2.0f})});
  const std::string out = b.Node("Concat", {scaled, b.Node("Relu", {conv})}, {IntAttr("axis", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(out), "scale_twice.onnx");
  const std::vector<float> x = {1.0f, -2.0f, 3.0f, 4.0f};
  EXPECT_EQ(RunImported(model, x),
            (std::vector<float>{3.0f, -6.0f, -6.0f, -8.0f, 1.0f, 0.0f, 3.0f, 4.0f}));
}

TEST(OnnxChannelsLastTest, ABatchNormAfterAnIdentityOfAValueReadTwiceDoesNotChangeTheOtherReader) {
  OnnxBuilder b(1, 1, 2);
  const std::string conv =
      b.Node("Conv", {"input", b.Weight({1, 1, 1, 1}, std::vector<float>{1.0f})},
             {IntsAttr("kernel_shape", {1, 1})});
  const std::string passed = b.Node("Identity", {conv});
  const std::string norm = b.Node(
      "BatchNormalization",
      {passed, b.Weight({1}, std::vector<float>{2.0f}), b.Weight({1}, std::vector<float>{1.0f}),
       b.Weight({1}, std::vector<float>{0.0f}), b.Weight({1}, std::vector<float>{1.0f})},
      {FloatAttr("epsilon", 0.0f)});
  const std::string out = b.Node("Concat", {norm, b.Node("Relu", {conv})}, {IntAttr("axis", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(out), "identity_twice.onnx");
  EXPECT_EQ(RunImported(model, {-1.0f, 2.0f}), (std::vector<float>{-1.0f, 5.0f, 0.0f, 2.0f}));
}

TEST(OnnxChannelsLastTest, ASoftmaxOverTheLastAxisOfAChannelsLastMapIsOverTheChannels) {
  OnnxBuilder b(3, 1, 2);
  std::string y = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  y = b.Node("Softmax", {y}, {IntAttr("axis", -1)});
  y = b.Node("Transpose", {y}, {IntsAttr("perm", {0, 3, 1, 2})});
  const ImportedModel model = ImportOnnx(b.Bytes(y), "softmax_last.onnx");
  EXPECT_EQ(CountOps(model, OpKind::kRegistered), 1);
  const std::vector<float> x = {0.0f, 1.0f, 1.0f, -1.0f, 2.0f, 0.0f};
  const std::vector<float> got = RunImported(model, x);
  for (int p = 0; p < 2; ++p) {
    double sum = 0;
    for (int c = 0; c < 3; ++c) sum += std::exp(double(x[c * 2 + p]));
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(got[c * 2 + p], std::exp(double(x[c * 2 + p])) / sum, 1e-6) << c << " " << p;
    }
  }
}

TEST(OnnxChannelsLastTest, AnNhwcInputReadOnlyByTransposesToNchwIsTheGraphsNchwInput) {
  OnnxBuilder b(3, 2, 2);
  b.InputDim(1, 2);  // 1 x 2 x 2 x 3
  b.InputDim(3, 3);
  const std::string x = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 3, 1, 2})});
  const ImportedModel model = ImportOnnx(b.Bytes(b.Node("Relu", {x})), "nhwc.onnx");
  EXPECT_TRUE(model.input_channels_last);
  EXPECT_EQ(model.graph.nodes.at(0).output, (Shape{3, 2, 2}));
  ASSERT_EQ(model.graph.nodes.size(), 2u) << "the input and the relu: no transpose";

  OnnxBuilder other(3, 2, 2);  // read as it is: an N,C,H,W input
  const ImportedModel plain = ImportOnnx(other.Bytes(other.Node("Relu", {"input"})), "nchw.onnx");
  EXPECT_FALSE(plain.input_channels_last);
}

// Swin pads its channels-last map to whole windows, by nothing where the
// windows divide it: such a Pad is no operator, whatever view it reads.
TEST(OnnxChannelsLastTest, APadOfNothingOnAChannelsLastMapPassesItOn) {
  OnnxBuilder b(3, 2, 2);
  std::string y = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  y = b.Node("Pad", {y, b.Ints({0, 0, 0, 0, 0, 0, 0, 0})});
  y = b.Node("Transpose", {y}, {IntsAttr("perm", {0, 3, 1, 2})});
  const ImportedModel model = ImportOnnx(b.Bytes(b.Node("Relu", {y})), "pad0.onnx");
  EXPECT_EQ(model.graph.nodes.size(), 2u) << "the input and the relu";
  EXPECT_THAT(model.notes, ::testing::Contains(HasSubstr("pads nothing and was removed")));
}

TEST(OnnxChannelsLastTest, RefusesATransposeThatMovesDataBetweenAxes) {
  OnnxBuilder b(3, 2, 4);
  const std::string y = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 1, 3, 2})});
  const std::string what = Refusal(b.Bytes(b.Node("Relu", {y})));
  EXPECT_THAT(what, HasSubstr("perm [0, 1, 3, 2]"));
  EXPECT_THAT(what, HasSubstr("only moving the channels last"));
}

TEST(OnnxChannelsLastTest, RefusesALayerNormOverTheWidth) {
  OnnxBuilder b(3, 2, 4);
  const std::string y = LayerNormFormula(b, "input", {-1}, 1e-5f);
  const std::string what = Refusal(b.Bytes(b.Node("Relu", {y})));
  EXPECT_THAT(what, HasSubstr("LayerNorm over axes [-1]"));
  EXPECT_THAT(what, HasSubstr("only a norm over the channels"));
}

TEST(OnnxChannelsLastTest, RefusesAMatMulWhoseWeightDoesNotMatchTheChannels) {
  OnnxBuilder b(3, 2, 2);
  std::string y = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  y = b.Node("MatMul", {y, b.Weight({2, 5}, 13)});
  const std::string what = Refusal(b.UninferredBytes(y));
  EXPECT_THAT(what, HasSubstr("does not multiply the 3 channels"));
}

}  // namespace
}  // namespace ios::onnx_import
