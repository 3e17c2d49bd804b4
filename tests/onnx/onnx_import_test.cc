// The ONNX importer on models built in code (tests/onnx/onnx_builder.h):
// what each operator becomes, numerics of every rewrite against the same
// arithmetic done here by hand, and one clear refusal for what it cannot
// honour or what is malformed.
#include "onnx/onnx_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/blocks.h"
#include "exec/device.h"
#include "exec/weights.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"

namespace ios::onnx_import {
namespace {

using testing::FloatAttr;
using ::testing::HasSubstr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::OnnxBuilder;
using testing::StringAttr;

TEST(OnnxImportTest, ConvBatchNormReluBecomeOneConvolutionComputingTheSame) {
  OnnxBuilder b(2, 3, 3);
  const std::vector<float> w = {0.5f, -1.0f, 2.0f, 0.25f};  // 2x2x1x1
  const std::vector<float> bias = {0.1f, -0.2f};
  const std::vector<float> scale = {1.5f, 0.5f}, shift = {0.3f, -0.1f};
  const std::vector<float> mean = {0.2f, -0.4f}, var = {0.8f, 2.0f};
  std::string x = b.Node("Conv", {"input", b.Weight({2, 2, 1, 1}, w), b.Weight({2}, bias)},
                         {IntsAttr("kernel_shape", {1, 1})});
  x = b.Node(
      "BatchNormalization",
      {x, b.Weight({2}, scale), b.Weight({2}, shift), b.Weight({2}, mean), b.Weight({2}, var)},
      {FloatAttr("epsilon", 1e-3f)});
  x = b.Node("Relu", {x});
  const ImportedModel model = ImportOnnx(b.Bytes(x), "cbr.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 2u);
  const Node& conv = model.graph.nodes[1];
  EXPECT_EQ(conv.op.kind, OpKind::kConv);
  EXPECT_EQ(conv.op.conv.act, Activation::kRelu);
  EXPECT_TRUE(model.has_weights);
  EXPECT_EQ(model.graph.name, "test_graph");
  b.Model().mutable_graph()->set_name("torch_jit");  // what PyTorch names every graph
  EXPECT_EQ(ImportOnnx(b.Bytes(x), "dir/cbr.onnx").graph.name, "cbr") << "named after the file";

  const std::vector<float> input = exec::SeededValues(18, 7);
  const std::vector<float> out = RunImported(model, input);
  ASSERT_EQ(out.size(), 18u);
  for (int o = 0; o < 2; ++o) {
    for (int p = 0; p < 9; ++p) {
      const double y = w[o * 2] * input[p] + w[o * 2 + 1] * input[9 + p] + bias[o];
      const double bn = (y - mean[o]) * scale[o] / std::sqrt(var[o] + 1e-3) + shift[o];
      EXPECT_NEAR(out[o * 9 + p], std::max(bn, 0.0), 1e-5) << "channel " << o << " pixel " << p;
    }
  }
}

TEST(OnnxImportTest, ConvAttributesAreHonouredAndSamePaddingResolved) {
  OnnxBuilder b(4, 9, 9);
  const std::string x = b.Node("Conv", {"input", b.Weight({6, 2, 3, 3}, 1)},
                               {IntsAttr("strides", {2, 2}), IntsAttr("dilations", {2, 2}),
                                IntAttr("group", 2), StringAttr("auto_pad", "SAME_UPPER")});
  const ImportedModel model = ImportOnnx(b.Bytes(x), "m.onnx");
  const ConvParams& c = model.graph.nodes.at(1).op.conv;
  EXPECT_EQ(c.groups, 2);
  EXPECT_EQ(c.stride, (Window{2, 2}));
  EXPECT_EQ(c.dilation, (Window{2, 2}));
  EXPECT_EQ(c.padding, (Window{2, 2}));  // out 5: (5-1)*2 + 4 + 1 - 9 = 4 in all
  EXPECT_FALSE(c.bias);
  EXPECT_EQ(model.graph.nodes.at(1).output, (Shape{6, 5, 5}));
}

// ONNX's default (and PyTorch's count_include_pad=False): the divisor is
// the number of taps inside the input; with count_include_pad=1 it is the
// whole window.
TEST(OnnxImportTest, AveragePoolsLeaveTheirPaddingOutOfTheDivisorUnlessTheyCountIt) {
  for (const int count : {0, 1}) {
    OnnxBuilder b(1, 3, 3);
    const ImportedModel model = ImportOnnx(
        b.Bytes(b.Node("AveragePool", {"input"},
                       {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2}),
                        IntsAttr("pads", {1, 1, 1, 1}), IntAttr("count_include_pad", count)})),
        "m.onnx");
    EXPECT_EQ(model.graph.nodes[1].op.pool.exclude_padding, count == 0);
    const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    // 2x2 windows at stride 2 over the padded 5x5: (-1,-1) sees 1, (-1,1)
    // sees 2 and 3, (1,1) sees 5, 6, 8 and 9.
    const std::vector<float> out = RunImported(model, x);
    ASSERT_EQ(out.size(), 4u);
    if (count == 0) {
      EXPECT_EQ(out, (std::vector<float>{1, 2.5f, 5.5f, 7}));
    } else {
      EXPECT_EQ(out, (std::vector<float>{0.25f, 1.25f, 2.75f, 7}));
    }
  }
}

TEST(OnnxImportTest, PadBeforeAveragePoolConcatFlattenAndGemmComputeTheSame) {
  OnnxBuilder b(1, 4, 4);
  const std::string a = b.Node("Relu", {"input"});
  const std::string padded = b.Node("Pad", {"input", b.Ints({0, 0, 1, 1, 0, 0, 1, 1})});
  const std::string avg = b.Node("AveragePool", {padded},
                                 {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {1, 1})});
  const std::string cat = b.Node("Concat", {a, avg}, {IntAttr("axis", 1)});
  const std::string flat = b.Node("Flatten", {cat}, {IntAttr("axis", 1)});
  const std::vector<float> w = exec::SeededValues(3 * 32, 3), bias = {0.5f, -0.5f, 0.25f};
  const std::string fc = b.Node("Gemm", {flat, b.Weight({3, 32}, w), b.Weight({3}, bias)},
                                {IntAttr("transB", 1), FloatAttr("alpha", 2.0f)});
  const ImportedModel model = ImportOnnx(b.Bytes(fc), "m.onnx");
  // relu, pool, the fully connected layer as a 4x4 convolution.
  ASSERT_EQ(model.graph.nodes.size(), 4u);
  EXPECT_EQ(model.graph.nodes[2].op.pool.padding, (Window{1, 1}));
  EXPECT_EQ(model.graph.nodes[3].op.conv.kernel, (Window{4, 4}));
  EXPECT_EQ(model.graph.nodes[3].inputs.size(), 2u) << "the concatenation is two terms";

  const std::vector<float> input = exec::SeededValues(16, 9);
  const std::vector<float> out = RunImported(model, input);
  std::vector<float> features(32);
  for (int p = 0; p < 16; ++p) features[p] = std::max(input[p], 0.0f);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) {
      double sum = 0;
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int yy = y + dy, xx = x + dx;
          if (yy >= 0 && yy < 4 && xx >= 0 && xx < 4) sum += input[yy * 4 + xx];
        }
      }
      features[16 + y * 4 + x] = static_cast<float>(sum / 9);  // padding counted
    }
  }
  ASSERT_EQ(out.size(), 3u);
  for (int o = 0; o < 3; ++o) {
    double y = bias[o];
    for (int d = 0; d < 32; ++d) y += 2.0 * w[o * 32 + d] * features[d];
    EXPECT_NEAR(out[o], y, 1e-4) << "output " << o;
  }
}

TEST(OnnxImportTest, MatMulPlusConstantAddIsAFullyConnectedLayerWithBias) {
  OnnxBuilder b(2, 1, 1);
  const std::string flat = b.Node("Flatten", {"input"});
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};  // 2 x 3, not transposed
  const std::string mm = b.Node("MatMul", {flat, b.Weight({2, 3}, w)});
  const std::string out = b.Node("Add", {mm, b.Weight({3}, std::vector<float>{1, 0, -1})});
  const ImportedModel model = ImportOnnx(b.Bytes(out), "m.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 2u);
  const std::vector<float> y = RunImported(model, {1.0f, -1.0f});
  EXPECT_EQ(y, (std::vector<float>{1 - 4 + 1, 2 - 5, 3 - 6 - 1}));
}

TEST(OnnxImportTest, ResidualAddSigmoidTanhGlobalPoolsDropoutAndIdentityMap) {
  OnnxBuilder b(2, 4, 4);
  const std::string c1 =
      b.Node("Conv", {"input", b.Weight({2, 2, 3, 3}, 4)}, {IntsAttr("pads", {1, 1, 1, 1})});
  const std::string sum = b.Node("Add", {c1, "input"});
  const std::string r = b.Node("Relu", {sum});  // not after a conv: an operator
  const std::string d = b.Node("Dropout", {r});
  const std::string s = b.Node("Sigmoid", {d});
  const std::string t = b.Node("Tanh", {b.Node("Identity", {r})});
  const std::string m = b.Node("Mul", {s, t});
  const std::string g = b.Node("GlobalMaxPool", {m});
  const ImportedModel model = ImportOnnx(b.Bytes(g), "m.onnx");
  std::vector<OpKind> kinds;
  for (const Node& n : model.graph.nodes) kinds.push_back(n.op.kind);
  EXPECT_EQ(kinds, (std::vector<OpKind>{OpKind::kInput, OpKind::kConv, OpKind::kEltwise,
                                        OpKind::kActivation, OpKind::kActivation,
                                        OpKind::kActivation, OpKind::kEltwise, OpKind::kPool}));
  // Cuts: the input -> add diamond, the relu, the sigmoid/tanh diamond
  // ending at mul, and the pool; joined into one block of 7 operators.
  const std::vector<Block> finest = FindBlocks(model.graph);
  ASSERT_EQ(finest.size(), 4u);
  EXPECT_EQ(finest[0].inner, std::vector<NodeId>{1});
  EXPECT_EQ(finest[0].exit, 2);
  EXPECT_EQ(finest[2].inner, (std::vector<NodeId>{4, 5}));
  EXPECT_EQ(finest[2].exit, 6);
  ASSERT_EQ(model.graph.blocks.size(), 1u);
  EXPECT_EQ(model.graph.blocks[0].exit, 7);
  const std::vector<float> input = exec::SeededValues(32, 5);
  const std::vector<float> out = RunImported(model, input);
  EXPECT_EQ(out.size(), 2u);
}

// Batch norm not after a convolution (DenseNet normalises concatenations)
// is a per-channel affine operator: a depthwise 1x1 convolution.
TEST(OnnxImportTest, BatchNormAfterAConcatenationIsAPerChannelAffineOperator) {
  OnnxBuilder b(2, 2, 2);
  const std::string r = b.Node("Relu", {"input"});
  const std::string cat = b.Node("Concat", {r, "input"}, {IntAttr("axis", 1)});
  const std::vector<float> scale = {2, 1, 0.5f, 1}, shift = {0, 1, 0, -1};
  const std::vector<float> mean = {1, 0, 0, 2}, var = {3, 1, 0.25f, 1};
  const std::string bn = b.Node(
      "BatchNormalization",
      {cat, b.Weight({4}, scale), b.Weight({4}, shift), b.Weight({4}, mean), b.Weight({4}, var)},
      {FloatAttr("epsilon", 0.0f)});
  const ImportedModel model = ImportOnnx(b.Bytes(b.Node("Relu", {bn})), "m.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 3u);
  const ConvParams& c = model.graph.nodes[2].op.conv;
  EXPECT_EQ(c.groups, 4);
  EXPECT_EQ(c.kernel, (Window{1, 1}));
  EXPECT_EQ(c.act, Activation::kRelu);
  EXPECT_EQ(model.graph.nodes[2].inputs.size(), 2u) << "reads the concatenation's two terms";
  const std::vector<float> input = exec::SeededValues(8, 2);
  const std::vector<float> out = RunImported(model, input);
  for (int ch = 0; ch < 4; ++ch) {
    for (int p = 0; p < 4; ++p) {
      const float v = ch < 2 ? std::max(input[ch * 4 + p], 0.0f) : input[(ch - 2) * 4 + p];
      const float y = (v - mean[ch]) * scale[ch] / std::sqrt(var[ch]) + shift[ch];
      EXPECT_NEAR(out[ch * 4 + p], std::max(y, 0.0f), 1e-5) << ch << "," << p;
    }
  }
}

// Squeeze-and-excitation: a C x 1 x 1 gate (the small tensor first, as
// PyTorch exports it) scales every pixel of its channel.
TEST(OnnxImportTest, AChannelGateMultipliesEveryPixelOfItsChannel) {
  OnnxBuilder b(2, 2, 3);
  const std::string gate = b.Node("Sigmoid", {b.Node("GlobalAveragePool", {"input"})});
  const std::string scaled = b.Node("Mul", {gate, "input"});
  const ImportedModel model = ImportOnnx(b.Bytes(scaled), "m.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 4u);
  EXPECT_EQ(model.graph.nodes[3].op.kind, OpKind::kEltwise);
  EXPECT_EQ(model.graph.nodes[3].output, (Shape{2, 2, 3}));
  const std::vector<float> input = exec::SeededValues(12, 4);
  const std::vector<float> out = RunImported(model, input);
  for (int c = 0; c < 2; ++c) {
    float mean = 0;
    for (int p = 0; p < 6; ++p) mean += input[c * 6 + p] / 6;
    const float g = 1 / (1 + std::exp(-mean));
    for (int p = 0; p < 6; ++p) EXPECT_NEAR(out[c * 6 + p], g * input[c * 6 + p], 1e-5);
  }
}

TEST(OnnxImportTest, AModelWithoutWeightValuesImportsItsStructureOnly) {
  OnnxBuilder b(3, 8, 8);
  std::string x = b.Node("Conv", {"input", b.WeightInput({8, 3, 3, 3}), b.WeightInput({8})},
                         {IntsAttr("pads", {1, 1, 1, 1})});
  x = b.Node("Relu", {x});
  x = b.Node("MaxPool", {x}, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})});
  const ImportedModel model = ImportOnnx(b.Bytes(x), "m.onnx");
  EXPECT_FALSE(model.has_weights);
  EXPECT_EQ(model.weights.size(), 0u);
  EXPECT_EQ(model.graph.nodes.back().output, (Shape{8, 4, 4}));
}

// ceil_mode: max pools round their output size up (GoogLeNet); average
// pools only where that adds no window.
TEST(OnnxImportTest, CeilModeRoundsMaxPoolsUpAndIsRefusedForAveragesWhereItMatters) {
  const auto pool = [](const std::string& op, int size, int kernel, int stride) {
    OnnxBuilder b(1, size, size);
    const std::string x = b.Node(op, {"input"},
                                 {IntsAttr("kernel_shape", {kernel, kernel}),
                                  IntsAttr("strides", {stride, stride}), IntAttr("ceil_mode", 1)});
    return b.Bytes(x);
  };
  const ImportedModel same = ImportOnnx(pool("MaxPool", 9, 3, 2), "m.onnx");
  EXPECT_EQ(same.graph.nodes.back().output, (Shape{1, 4, 4}));
  EXPECT_FALSE(same.graph.nodes.back().op.pool.ceil) << "rounding changes nothing here";
  const ImportedModel up = ImportOnnx(pool("MaxPool", 8, 3, 2), "m.onnx");
  EXPECT_EQ(up.graph.nodes.back().output, (Shape{1, 4, 4}));
  EXPECT_TRUE(up.graph.nodes.back().op.pool.ceil);
  // The last window covers the last row and column only.
  std::vector<float> input(64);
  for (int i = 0; i < 64; ++i) input[i] = static_cast<float>(i % 8 + 8 * (i / 8));
  const std::vector<float> out = RunImported(up, input);
  EXPECT_EQ(out[15], 63.0f);
  EXPECT_EQ(out[3], 23.0f);  // rows 0-2, column 7
  EXPECT_THAT(Refusal(pool("AveragePool", 8, 3, 2)),
              HasSubstr("ceil_mode=1 makes the output 4x4 instead of 3x3, which this importer "
                        "supports for max pooling only"));
}

TEST(OnnxImportTest, WhatCannotBeHonouredIsRefusedNamingTheNodeAndTheFeature) {
  {
    OnnxBuilder b(4, 4, 4);
    EXPECT_THAT(Refusal(b.Bytes(b.Node("Softmax", {"input"}))),
                HasSubstr("node 'Softmax_t0' (Softmax): softmax over axis 3 of a rank-4 input "
                          "(opset 13): only a softmax over the channels (axis 1"));
  }
  {
    // Below opset 13 a softmax flattens C, H and W together.
    OnnxBuilder b(4, 4, 4, 11);
    EXPECT_THAT(Refusal(b.Bytes(b.Node("Softmax", {"input"}, {IntAttr("axis", 1)}))),
                HasSubstr("softmax over axis 1 of a rank-4 input (opset 11)"));
  }
  {
    OnnxBuilder b(4, 4, 4);
    EXPECT_THAT(Refusal(b.Bytes(b.Node("Softsign", {"input"}))),
                HasSubstr("(Softsign): operator not supported by the ONNX importer"));
  }
  {
    OnnxBuilder b(4, 4, 4);
    // Read by another node (as a graph output alone it is that many values).
    const std::string x = b.Node("Reshape", {"input", b.Ints({1, 2, 2, 16})});
    EXPECT_THAT(Refusal(b.Bytes(b.Node("Relu", {x}))),
                HasSubstr("(Reshape): a Reshape of a feature map [N, 4, 4, 4] to [1, 2, 2, 16]: "
                          "only flattening each sample"));
  }
  {
    OnnxBuilder b(4, 4, 4);
    const std::string x =
        b.Node("Conv", {"input", b.Weight({4, 4, 3, 3}, 1)}, {IntsAttr("pads", {1, 1, 0, 0})});
    EXPECT_THAT(Refusal(b.Bytes(x)),
                HasSubstr("padding 'pads' [1, 1, 0, 0] (top, left, bottom, right) pads the top or "
                          "left more than the bottom or right"));
  }
  {
    OnnxBuilder b(4, 4, 4);
    const std::string padded = b.Node("Pad", {"input", b.Ints({0, 0, 1, 1, 0, 0, 1, 1})});
    const std::string x =
        b.Node("AveragePool", {padded},
               {IntsAttr("kernel_shape", {3, 3}), IntsAttr("pads", {1, 1, 1, 1})});
    EXPECT_THAT(Refusal(b.Bytes(x)), HasSubstr("pads itself with count_include_pad=0"));
  }
  {
    OnnxBuilder b(4, 4, 4);
    const std::string x = b.Node("Clip", {"input", b.Weight({}, std::vector<float>{0.0f}),
                                          b.Weight({}, std::vector<float>{5.0f})});
    EXPECT_THAT(Refusal(b.Bytes(x)), HasSubstr("(Clip): Clip to [0.000000, 5.000000]"));
  }
  {
    OnnxBuilder b(4, 4, 4);
    // A column pool: [N, 4, 1, 4] does not broadcast over [N, 4, 4, 4] here.
    const std::string col = b.Node("MaxPool", {"input"}, {IntsAttr("kernel_shape", {4, 1})});
    const std::string x = b.Node("Mul", {"input", col});
    EXPECT_THAT(Refusal(b.Bytes(x)), HasSubstr("only equal shapes, or [N, C, 1, 1] with"));
  }
  {
    OnnxBuilder b(4, 4, 4);
    const std::string x =
        b.Node("MaxPool", {b.Node("Pad", {"input", b.Ints({0, 0, 1, 1, 0, 0, 1, 1})})},
               {IntsAttr("kernel_shape", {3, 3})});
    EXPECT_THAT(Refusal(b.Bytes(x)), HasSubstr("zero padding before a max pool"));
  }
  {
    OnnxBuilder b(4, 4, 4);
    const std::string x = b.Node("Relu", {"input"}, {}, "com.example");
    EXPECT_THAT(Refusal(b.Bytes(x)), HasSubstr("com.example"));
  }
  {
    OnnxBuilder b(4, 4, 4);
    const std::string x = b.Node("Concat", {"input", "input"}, {IntAttr("axis", 2)});
    EXPECT_THAT(Refusal(b.Bytes(x)), HasSubstr("only concatenation along channels"));
  }
}

TEST(OnnxImportTest, MalformedFilesGiveOneClearLine) {
  OnnxBuilder b(4, 4, 4);
  const std::string good = b.Bytes(b.Node("Relu", {"input"}));
  EXPECT_THAT(Refusal(good.substr(0, good.size() / 2)), HasSubstr("not an ONNX model"));
  EXPECT_THAT(Refusal("this is not a protobuf at all"), HasSubstr("model.onnx"));
  {
    // A node reading a tensor nobody produces.
    OnnxBuilder m(4, 4, 4);
    const std::string x = m.Node("Relu", {"nowhere"});
    EXPECT_THAT(Refusal(m.Bytes(x)), HasSubstr("nowhere"));
  }
  {
    // A cycle: two nodes reading each other.
    OnnxBuilder m(4, 4, 4);
    const std::string a = m.Node("Relu", {"t1"});
    const std::string c = m.Node("Add", {a, "input"});
    EXPECT_EQ(c, "t1");
    EXPECT_THAT(Refusal(m.Bytes(c)), HasSubstr("model.onnx"));
  }
  {
    // A convolution whose weight is missing.
    OnnxBuilder m(4, 4, 4);
    const std::string x = m.Node("Conv", {"input", "no_such_weight"});
    EXPECT_THAT(Refusal(m.Bytes(x)), HasSubstr("no_such_weight"));
  }
  {
    // Weights of the wrong element type.
    OnnxBuilder m(4, 4, 4);
    const std::string w = m.Weight({4, 4, 1, 1}, 1);
    m.Model().mutable_graph()->mutable_initializer(0)->set_data_type(
        ::onnx::TensorProto_DataType_DOUBLE);
    EXPECT_THAT(Refusal(m.Bytes(m.Node("Conv", {"input", w}))), HasSubstr("model.onnx"));
  }
  EXPECT_THROW(ImportOnnxFile("/nonexistent/model.onnx"), Error);
  EXPECT_TRUE(IsOnnxPath("a/b/Model.ONNX"));
  EXPECT_FALSE(IsOnnxPath("model.json"));
}

}  // namespace
}  // namespace ios::onnx_import
