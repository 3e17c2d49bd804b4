// Graphs with several outputs, or an output in TensorFlow's order
// (onnx_import.cc FinishOutput, onnx_combine.cc OutputReshape): BlazeFace's
// heads transpose each map to channels-last and reshape it to
// [1, anchors, k]. The graph then ends in one vector per sample, every
// output's values in turn and in the file's order, which is what ios-run
// compares against another framework's outputs concatenated.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/op_kinds.h"
#include "exec/weights.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"

namespace ios::onnx_import {
namespace {

using ::testing::HasSubstr;
using testing::IntsAttr;
using testing::OnnxBuilder;

constexpr int kC = 2, kH = 4, kW = 4, kPlane = kH * kW;

// A 1x1 convolution of the 2 x 4 x 4 input by `w` (out x in), no bias.
std::vector<float> PointwiseConv(const std::vector<float>& x, const std::vector<float>& w,
                                 int out) {
  std::vector<float> y(static_cast<size_t>(out) * kPlane, 0.0f);
  for (int o = 0; o < out; ++o) {
    for (int c = 0; c < kC; ++c) {
      for (int p = 0; p < kPlane; ++p) y[o * kPlane + p] += w[o * kC + c] * x[c * kPlane + p];
    }
  }
  return y;
}

TEST(OnnxOutputsTest, TwoOutputsEndInOneVectorOfBothInTheFilesOrder) {
  OnnxBuilder b(kC, kH, kW);
  const std::vector<float> w = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 1.0f};  // 3 x 2
  const std::string conv = b.Node("Conv", {"input", b.Weight({3, kC, 1, 1}, w)});
  const std::string last = b.Node("Transpose", {conv}, {IntsAttr("perm", {0, 2, 3, 1})});
  const std::string head = b.Node("Reshape", {last, b.Ints({1, 8, 6})});
  const std::string pooled =
      b.Node("MaxPool", {"input"}, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})});
  const std::vector<std::string> outputs = {head, pooled};
  const ImportedModel model = ImportOnnx(b.Bytes(outputs), "heads.onnx");

  ASSERT_EQ(model.outputs.size(), 2u);
  EXPECT_EQ(model.outputs[0].name, head);
  EXPECT_EQ(model.outputs[0].dims, (std::vector<int64_t>{1, 8, 6}));
  EXPECT_EQ(model.outputs[0].values, 3 * kPlane);
  EXPECT_TRUE(model.outputs[0].channels_last);
  EXPECT_EQ(model.outputs[1].dims, (std::vector<int64_t>{1, kC, 2, 2}));
  EXPECT_FALSE(model.outputs[1].channels_last);
  const Node& sink = model.graph.nodes.back();
  EXPECT_EQ(sink.op.kind, OpKind::kIdentity) << "the outputs' concatenation";
  EXPECT_EQ(sink.output, (Shape{3 * kPlane + kC * 4, 1, 1}));
  int flattens = 0;
  for (const Node& n : model.graph.nodes) {
    if (n.op.kind == OpKind::kRegistered && n.op.registered.kind == RegisteredKind::kFlatten) {
      ++flattens;
    }
  }
  EXPECT_EQ(flattens, 2) << "each output of more than one pixel is flattened";

  const std::vector<float> x = exec::SeededValues(kC * kPlane, 3);
  const std::vector<float> got = RunImported(model, x);
  const std::vector<float> y = PointwiseConv(x, w, 3);
  std::vector<float> expected;
  for (int p = 0; p < kPlane; ++p) {
    for (int o = 0; o < 3; ++o) expected.push_back(y[o * kPlane + p]);  // (H, W, C)
  }
  for (int c = 0; c < kC; ++c) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        float largest = x[c * kPlane + 2 * i * kW + 2 * j];
        for (int di = 0; di < 2; ++di) {
          for (int dj = 0; dj < 2; ++dj) {
            largest = std::max(largest, x[c * kPlane + (2 * i + di) * kW + 2 * j + dj]);
          }
        }
        expected.push_back(largest);
      }
    }
  }
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
}

TEST(OnnxOutputsTest, OneOutputLeftChannelsLastIsFlattenedInThatOrder) {
  OnnxBuilder b(kC, kH, kW);
  const std::string relu = b.Node("Relu", {"input"});
  const std::string last = b.Node("Transpose", {relu}, {IntsAttr("perm", {0, 2, 3, 1})});
  const ImportedModel model = ImportOnnx(b.Bytes(last), "nhwc_out.onnx");
  ASSERT_EQ(model.outputs.size(), 1u);
  EXPECT_EQ(model.outputs[0].dims, (std::vector<int64_t>{1, kH, kW, kC}));
  EXPECT_TRUE(model.outputs[0].channels_last);
  const Node& sink = model.graph.nodes.back();
  ASSERT_EQ(sink.op.kind, OpKind::kRegistered);
  EXPECT_EQ(RegisteredKeyText(sink.op.registered), "flatten(channels_last=1)");
  const std::vector<float> x = exec::SeededValues(kC * kPlane, 4);
  const std::vector<float> got = RunImported(model, x);
  ASSERT_EQ(got.size(), x.size());
  for (int p = 0; p < kPlane; ++p) {
    for (int c = 0; c < kC; ++c) EXPECT_EQ(got[p * kC + c], std::max(x[c * kPlane + p], 0.0f));
  }
}

TEST(OnnxOutputsTest, OneOutputInTheIrsOrderNeedsNoOperator) {
  OnnxBuilder b(kC, kH, kW);
  const std::string relu = b.Node("Relu", {"input"});
  const ImportedModel model = ImportOnnx(b.Bytes(relu), "plain.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 2u) << "the input and the relu";
  ASSERT_EQ(model.outputs.size(), 1u);
  EXPECT_FALSE(model.outputs[0].channels_last);
}

TEST(OnnxOutputsTest, AHeadsReshapeThatANodeReadsIsRefusedInOneLine) {
  OnnxBuilder b(kC, kH, kW);
  const std::string last = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 3, 1})});
  const std::string head = b.Node("Reshape", {last, b.Ints({1, 16, 2})});
  const std::string read = b.Node("Relu", {head});
  const std::vector<std::string> outputs = {head, read};
  EXPECT_THAT(Refusal(b.Bytes(outputs)), HasSubstr("a Reshape of a feature map transposed to "
                                                   "channels-last"));
}

}  // namespace
}  // namespace ios::onnx_import
