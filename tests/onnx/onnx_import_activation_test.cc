// The ONNX importer on models built in code (tests/onnx/onnx_builder.h):
// activations (relu6, hardswish, SiLU, hardsigmoid, leaky relu) and the
// operators of classifier heads (reductions to global pools, softmax),
// numerics against the same arithmetic done here by hand.
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

// Clip to [0, 6] is relu6, HardSwish is hardswish, and Mul(x, Sigmoid(x))
// is SiLU: folded into the convolution before them where nothing else reads
// it, computed as PyTorch defines them.
TEST(OnnxImportTest, Relu6HardSwishAndSiluBecomeActivationsComputingTheSame) {
  OnnxBuilder b(2, 3, 3, /*opset=*/14);                    // HardSwish is opset 14
  const std::vector<float> w = {3.0f, -1.0f, 2.0f, 4.0f};  // 2x2x1x1
  const std::string conv = b.Node("Conv", {"input", b.Weight({2, 2, 1, 1}, w)});
  const std::string six = b.Node("Clip", {conv, b.Weight({}, std::vector<float>{0.0f}),
                                          b.Weight({}, std::vector<float>{6.0f})});
  const std::string hs = b.Node("HardSwish", {six});  // not after a conv: an operator
  const std::string conv2 = b.Node("Conv", {hs, b.Weight({2, 2, 1, 1}, w)});
  const std::string silu = b.Node("Mul", {conv2, b.Node("Sigmoid", {conv2})});
  const ImportedModel model = ImportOnnx(b.Bytes(silu), "m.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 4u);  // the sigmoid operator was dropped
  EXPECT_EQ(model.graph.nodes[1].op.conv.act, Activation::kRelu6);
  EXPECT_EQ(model.graph.nodes[2].op.kind, OpKind::kActivation);
  EXPECT_EQ(model.graph.nodes[2].op.act, Activation::kHardSwish);
  EXPECT_EQ(model.graph.nodes[3].op.conv.act, Activation::kSilu);

  const std::vector<float> input = exec::SeededValues(18, 11);
  std::vector<float> x(input.begin(), input.end());
  for (float& v : x) v *= 4;  // reach past relu6's clip and hardswish's knees
  const std::vector<float> out = RunImported(model, x);
  const auto conv1x1 = [&](const std::vector<float>& in, int o, int p) {
    return w[o * 2] * in[p] + w[o * 2 + 1] * in[9 + p];
  };
  std::vector<float> h(18);
  for (int o = 0; o < 2; ++o) {
    for (int p = 0; p < 9; ++p) {
      const float r6 = std::min(std::max(conv1x1(x, o, p), 0.0f), 6.0f);
      h[o * 9 + p] = r6 * std::min(std::max(r6 + 3, 0.0f), 6.0f) / 6;
    }
  }
  for (int o = 0; o < 2; ++o) {
    for (int p = 0; p < 9; ++p) {
      const float y = conv1x1(h, o, p);
      EXPECT_NEAR(out[o * 9 + p], y / (1 + std::exp(-y)), 1e-4) << o << "," << p;
    }
  }
}

// PyTorch's Hardsigmoid (HardSigmoid alpha 1/6, beta 1/2: MobileNetV3's
// squeeze-and-excitation gate) and LeakyRelu at PyTorch's slope: folded into
// the convolution before them, or operators of their own.
TEST(OnnxImportTest, HardSigmoidAndLeakyReluAtPytorchsSettingsComputeTheSame) {
  OnnxBuilder b(2, 3, 3);
  const std::vector<float> w = {3.0f, -1.0f, 2.0f, 4.0f};  // 2x2x1x1
  const std::string conv = b.Node("Conv", {"input", b.Weight({2, 2, 1, 1}, w)});
  const std::string gate =
      b.Node("HardSigmoid", {conv}, {FloatAttr("alpha", 1.0f / 6), FloatAttr("beta", 0.5f)});
  const std::string leaky =
      b.Node("LeakyRelu", {b.Node("Add", {gate, "input"})}, {FloatAttr("alpha", 0.01f)});
  const ImportedModel model = ImportOnnx(b.Bytes(leaky), "m.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 4u);
  EXPECT_EQ(model.graph.nodes[1].op.conv.act, Activation::kHardSigmoid);
  EXPECT_EQ(model.graph.nodes[3].op.kind, OpKind::kActivation);
  EXPECT_EQ(model.graph.nodes[3].op.act, Activation::kLeakyRelu);

  std::vector<float> x = exec::SeededValues(18, 7);
  for (float& v : x) v *= 8;  // reach past hardsigmoid's knees at -3 and 3
  const std::vector<float> out = RunImported(model, x);
  ASSERT_EQ(out.size(), 18u);
  for (int o = 0; o < 2; ++o) {
    for (int p = 0; p < 9; ++p) {
      const float c = w[o * 2] * x[p] + w[o * 2 + 1] * x[9 + p];
      const float s = std::min(std::max(c / 6 + 0.5f, 0.0f), 1.0f) + x[o * 9 + p];
      EXPECT_NEAR(out[o * 9 + p], s > 0 ? s : 0.01f * s, 1e-5) << o << "," << p;
    }
  }
}

// Other slopes and ONNX's own HardSigmoid default (alpha 0.2, not PyTorch's
// 1/6) are operators of the leaky_relu and hard_sigmoid kinds, which carry
// their parameters; they compute ONNX's formulas.
TEST(OnnxImportTest, HardSigmoidAndLeakyReluAtOtherSettingsAreKindsWithTheirParameters) {
  OnnxBuilder b(2, 2, 2);
  const std::string hard = b.Node("HardSigmoid", {"input"});
  const std::string leaky = b.Node("LeakyRelu", {"input"}, {FloatAttr("alpha", 0.2f)});
  const std::string out = b.Node("Concat", {hard, leaky}, {IntAttr("axis", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(out), "m.onnx");
  std::vector<std::string> keys;
  for (const Node& node : model.graph.nodes) {
    if (node.op.kind == OpKind::kRegistered) keys.push_back(RegisteredKeyText(node.op.registered));
  }
  EXPECT_THAT(keys, ::testing::UnorderedElementsAre("hard_sigmoid(alpha=0.2,beta=0.5)",
                                                    "leaky_relu(alpha=0.2)"));
  std::vector<float> x = exec::SeededValues(8, 3);
  for (float& v : x) v *= 6;  // past hard_sigmoid's knees at -2.5 and 2.5
  const std::vector<float> got = RunImported(model, x);
  ASSERT_EQ(got.size(), 16u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(got[i], std::clamp(0.2f * x[i] + 0.5f, 0.0f, 1.0f), 1e-6) << i;
    EXPECT_NEAR(got[8 + i], x[i] >= 0 ? x[i] : 0.2f * x[i], 1e-6) << i;
  }
}

// PyTorch's nn.PReLU() learns one slope for every channel: a leaky relu at
// that slope. A slope per channel is built from a depthwise convolution and
// an add; a slope that is not per channel is refused.
TEST(OnnxImportTest, APreluWithOneSlopeIsALeakyReluAndOnePerChannelIsRefused) {
  OnnxBuilder b(2, 1, 2);
  const std::string y = b.Node("PRelu", {"input", b.Weight({1}, std::vector<float>{0.25f})});
  const ImportedModel model = ImportOnnx(b.Bytes(y), "prelu.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 2u);
  EXPECT_EQ(RegisteredKeyText(model.graph.nodes[1].op.registered), "leaky_relu(alpha=0.25)");
  EXPECT_EQ(RunImported(model, {-4, 2, 8, -1}), (std::vector<float>{-1, 2, 8, -0.25f}));

  OnnxBuilder r(2, 1, 2);
  const std::string z =
      r.Node("PRelu", {"input", r.Weight({1, 1, 2}, std::vector<float>{0.25f, 0.5f})});
  EXPECT_THAT(Refusal(r.Bytes(z)),
              HasSubstr("(PRelu): slope [1, 1, 2] of a feature map: only one slope, or one per "
                        "channel of a feature map, is supported"));
}

// prelu(x) = x + relu((s - 1) x) where every slope s <= 1: a depthwise 1x1
// convolution with relu and an add; a slope above 1 takes a second
// depthwise convolution (x + (1 - s) relu(-x)). Both compute s * x below 0.
TEST(OnnxImportTest, APreluWithASlopePerChannelIsADepthwiseConvolutionAndAnAdd) {
  for (const std::vector<float>& slopes :
       {std::vector<float>{0.25f, -0.5f, 0.0f}, std::vector<float>{0.25f, 2.5f, 1.0f}}) {
    const bool above_one = slopes[1] > 1;
    SCOPED_TRACE(above_one ? "a slope above 1" : "slopes at most 1");
    OnnxBuilder b(3, 2, 2);
    const std::string y = b.Node("PRelu", {"input", b.Weight({3, 1, 1}, slopes)});
    const ImportedModel model = ImportOnnx(b.Bytes(y), "prelu_channels.onnx");
    ASSERT_EQ(model.graph.nodes.size(), above_one ? 4u : 3u) << "input, convolution(s), add";
    const Node& first = model.graph.nodes[1];
    EXPECT_EQ(first.op.kind, OpKind::kConv);
    EXPECT_EQ(first.op.conv.groups, 3) << "depthwise";
    EXPECT_EQ(first.op.conv.act, Activation::kRelu);
    EXPECT_EQ(model.graph.nodes.back().op.kind, OpKind::kEltwise);
    std::vector<float> x = exec::SeededValues(12, 5);
    for (float& v : x) v *= 4;
    const std::vector<float> got = RunImported(model, x);
    ASSERT_EQ(got.size(), 12u);
    for (size_t i = 0; i < 12; ++i) {
      const float s = slopes[i / 4];
      EXPECT_NEAR(got[i], x[i] >= 0 ? x[i] : s * x[i], 1e-6 * 16) << i;
    }
  }
}

// MobileNetV3's classifier as PyTorch exports it below opset 14: Gemm, then
// Hardswish as Mul(x, HardSigmoid(x)), then another Gemm, Relu after it.
// Activations read a fully connected layer's flat output; the Mul becomes
// the first layer's hardswish.
TEST(OnnxImportTest, HardswishAsMulOfHardSigmoidAndActivationsAfterFullyConnectedLayers) {
  OnnxBuilder b(2, 1, 1);
  const std::string flat = b.Node("Flatten", {"input"}, {IntAttr("axis", 1)});
  const std::vector<float> w1 = {4.0f, -1.0f, -2.0f, 3.0f, 1.0f, 1.0f};  // 3x2
  const std::vector<float> w2 = {1.0f, -1.0f, 0.5f, 2.0f, 0.0f, -1.0f};  // 2x3
  const std::string fc1 = b.Node("Gemm", {flat, b.Weight({3, 2}, w1)}, {IntAttr("transB", 1)});
  const std::string gate =
      b.Node("HardSigmoid", {fc1}, {FloatAttr("alpha", 1.0f / 6), FloatAttr("beta", 0.5f)});
  const std::string hs = b.Node("Mul", {fc1, gate});
  const std::string fc2 = b.Node("Gemm", {hs, b.Weight({2, 3}, w2)}, {IntAttr("transB", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(b.Node("Relu", {fc2})), "m.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 3u) << "two convolutions; the gate was dropped";
  EXPECT_EQ(model.graph.nodes[1].op.conv.act, Activation::kHardSwish);
  EXPECT_EQ(model.graph.nodes[2].op.conv.act, Activation::kRelu);

  const std::vector<float> x = {2.5f, -1.5f};
  const std::vector<float> out = RunImported(model, x);
  std::vector<float> h(3);
  for (int o = 0; o < 3; ++o) {
    const float v = w1[o * 2] * x[0] + w1[o * 2 + 1] * x[1];
    h[o] = v * std::min(std::max(v + 3, 0.0f), 6.0f) / 6;
  }
  ASSERT_EQ(out.size(), 2u);
  for (int o = 0; o < 2; ++o) {
    const float v = w2[o * 3] * h[0] + w2[o * 3 + 1] * h[1] + w2[o * 3 + 2] * h[2];
    EXPECT_NEAR(out[o], std::max(v, 0.0f), 1e-5) << o;
  }
}

// MNASNet's x.mean([2, 3]): ReduceMean over H and W is a global average
// pool, its keepdims=0 output read by a Gemm; ReduceMax is a global max.
TEST(OnnxImportTest, ReduceMeanAndMaxOverHeightAndWidthAreGlobalPools) {
  OnnxBuilder b(2, 2, 2);
  const std::string mean =
      b.Node("ReduceMean", {"input"}, {IntsAttr("axes", {-1, 2}), IntAttr("keepdims", 0)});
  const std::vector<float> w = {1.0f, 2.0f, -1.0f, 0.5f};  // 2x2
  const std::string fc = b.Node("Gemm", {mean, b.Weight({2, 2}, w)}, {IntAttr("transB", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(fc), "m.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 3u);
  EXPECT_EQ(model.graph.nodes[1].op.pool.type, PoolType::kGlobalAvg);
  const std::vector<float> x = {1, 2, 3, 6, -4, 0, 0, 0};  // channel means 3 and -1
  const std::vector<float> out = RunImported(model, x);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NEAR(out[0], 1.0f * 3 + 2.0f * -1, 1e-6);
  EXPECT_NEAR(out[1], -1.0f * 3 + 0.5f * -1, 1e-6);

  OnnxBuilder m(2, 2, 2);
  const ImportedModel max =
      ImportOnnx(m.Bytes(m.Node("ReduceMax", {"input"}, {IntsAttr("axes", {2, 3})})), "m.onnx");
  EXPECT_EQ(max.graph.nodes.back().op.pool.type, PoolType::kGlobalMax);
  EXPECT_EQ(max.graph.nodes.back().output, (Shape{2, 1, 1}));
  EXPECT_EQ(RunImported(max, x), (std::vector<float>{6, 0}));

  OnnxBuilder r(2, 2, 2);
  EXPECT_THAT(Refusal(r.Bytes(r.Node("ReduceMean", {"input"}, {IntsAttr("axes", {1})}))),
              HasSubstr("(ReduceMean): axes [1]: only a reduction over height and width (axes 2 "
                        "and 3) is supported"));
}

// A classifier's Softmax after its Gemm (opset 13's default axis is the
// last, the classes), and LogSoftmax over the channels of a feature map.
TEST(OnnxImportTest, SoftmaxAndLogSoftmaxOverChannelsComputeTheSame) {
  {
    OnnxBuilder b(2, 1, 1);
    const std::string flat = b.Node("Flatten", {"input"}, {IntAttr("axis", 1)});
    const std::vector<float> w = {4.0f, -1.0f, -2.0f, 3.0f, 1.0f, 1.0f};  // 3x2
    const std::string fc = b.Node("Gemm", {flat, b.Weight({3, 2}, w)}, {IntAttr("transB", 1)});
    const ImportedModel model = ImportOnnx(b.Bytes(b.Node("Softmax", {fc})), "m.onnx");
    ASSERT_EQ(model.graph.nodes.size(), 3u);
    EXPECT_EQ(Describe(model.graph.nodes[2].op), "softmax");
    const std::vector<float> x = {0.5f, -1.5f};
    const std::vector<float> out = RunImported(model, x);
    ASSERT_EQ(out.size(), 3u);
    double sum = 0;
    std::vector<double> e(3);
    for (int o = 0; o < 3; ++o) sum += e[o] = std::exp(w[o * 2] * x[0] + w[o * 2 + 1] * x[1]);
    for (int o = 0; o < 3; ++o) EXPECT_NEAR(out[o], e[o] / sum, 1e-6) << o;
  }
  {
    OnnxBuilder b(3, 1, 1, 11);  // opset 11: flattening C x 1 x 1 leaves the classes
    const ImportedModel model =
        ImportOnnx(b.Bytes(b.Node("LogSoftmax", {"input"}, {IntAttr("axis", -3)})), "m.onnx");
    EXPECT_EQ(Describe(model.graph.nodes[1].op), "logsoftmax");
  }
  OnnxBuilder b(3, 1, 2);
  const ImportedModel model =
      ImportOnnx(b.Bytes(b.Node("LogSoftmax", {"input"}, {IntAttr("axis", 1)})), "m.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 2u);
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, -1.0f, 0.0f, 1.0f};  // NCHW, 2 pixels
  const std::vector<float> out = RunImported(model, x);
  for (int pixel = 0; pixel < 2; ++pixel) {
    double sum = 0;
    for (int c = 0; c < 3; ++c) sum += std::exp(x[c * 2 + pixel]);
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(out[c * 2 + pixel], x[c * 2 + pixel] - std::log(sum), 1e-5) << c << pixel;
    }
  }
}

}  // namespace
}  // namespace ios::onnx_import
