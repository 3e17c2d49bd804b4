// Zero padding that is larger at the bottom and right than at the top and
// left, as TensorFlow's SAME padding at stride 2 makes it (MediaPipe's
// models): a convolution's pads, auto_pad=SAME_UPPER with an odd total, and
// a Pad node before the convolution all become the convolution's
// padding_end_extra and compute the padded convolution; what the IR cannot
// say (more at the top, a pool padded unequally) is refused in one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/weights.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"

namespace ios::onnx_import {
namespace {

using ::testing::HasSubstr;
using testing::IntsAttr;
using testing::OnnxBuilder;
using testing::StringAttr;

// One channel, 4x4 in, a 3x3 kernel at stride 2 over the input padded with
// one row below and one column to the right: out[y][x] sums the taps inside.
std::vector<float> PaddedBelowAndRight(const std::vector<float>& in, const std::vector<float>& k) {
  std::vector<float> out(4, 0.0f);
  for (int oy = 0; oy < 2; ++oy) {
    for (int ox = 0; ox < 2; ++ox) {
      for (int ky = 0; ky < 3; ++ky) {
        for (int kx = 0; kx < 3; ++kx) {
          const int y = oy * 2 + ky, x = ox * 2 + kx;
          if (y < 4 && x < 4) out[oy * 2 + ox] += in[y * 4 + x] * k[ky * 3 + kx];
        }
      }
    }
  }
  return out;
}

const std::vector<float> kKernel = {1, 2, 3, 4, 5, 6, 7, 8, 9};

std::vector<float> Ramp() {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i % 5) - 1.5f;
  return x;
}

TEST(OnnxPaddingTest, PadsLargerAtTheBottomAndRightBecomeTheConvolutionsExtraEndPadding) {
  OnnxBuilder b(1, 4, 4);
  const std::string y = b.Node("Conv", {"input", b.Weight({1, 1, 3, 3}, kKernel)},
                               {IntsAttr("strides", {2, 2}), IntsAttr("pads", {0, 0, 1, 1})});
  const ImportedModel model = ImportOnnx(b.Bytes(y), "tf_same.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 2u);
  const ConvParams& conv = model.graph.nodes[1].op.conv;
  EXPECT_EQ(conv.padding, (Window{0, 0}));
  EXPECT_EQ(conv.padding_end_extra, (Window{1, 1}));
  EXPECT_EQ(model.graph.nodes[1].output, (Shape{1, 2, 2}));
  EXPECT_EQ(RunImported(model, Ramp()), PaddedBelowAndRight(Ramp(), kKernel));
}

TEST(OnnxPaddingTest, SameUpperWithAnOddTotalAndAPadNodeComputeTheSame) {
  for (const bool pad_node : {false, true}) {
    OnnxBuilder b(1, 4, 4);
    std::string x = "input";
    std::vector<::onnx::AttributeProto> attrs = {IntsAttr("strides", {2, 2})};
    if (pad_node) {
      x = b.Node("Pad", {x, b.Ints({0, 0, 0, 0, 0, 0, 1, 1})});
    } else {
      attrs.push_back(StringAttr("auto_pad", "SAME_UPPER"));
    }
    const std::string y = b.Node("Conv", {x, b.Weight({1, 1, 3, 3}, kKernel)}, attrs);
    const ImportedModel model = ImportOnnx(b.Bytes(y), "same_upper.onnx");
    EXPECT_EQ(model.graph.nodes.back().op.conv.padding_end_extra, (Window{1, 1})) << pad_node;
    EXPECT_EQ(RunImported(model, Ramp()), PaddedBelowAndRight(Ramp(), kKernel)) << pad_node;
  }
}

// TensorFlow's MobileNet-style residual when the block widens: the input is
// padded with zero channels (Concat with a constant of zeros) and added.
TEST(OnnxPaddingTest, AnAddOfAZeroChannelPaddedMapAddsItsChannelsAndPassesTheRestOn) {
  OnnxBuilder b(2, 1, 2);
  const std::vector<float> w = {1, 0, 0, 1, 2, 0, 0, -1};  // 4 x 2 x 1 x 1
  const std::string y = b.Node("Conv", {"input", b.Weight({4, 2, 1, 1}, w)});
  const std::string zeros = b.Weight({1, 2, 1, 2}, std::vector<float>(4, 0.0f));
  const std::string padded = b.Node("Concat", {"input", zeros}, {testing::IntAttr("axis", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(b.Node("Add", {y, padded})), "tf_pad.onnx");
  const std::vector<float> x = {1, 2, 3, 4};  // channel 0: 1 2, channel 1: 3 4
  // y = conv(x): 1 2 | 3 4 | 2 4 | -3 -4; plus x on the first two channels.
  EXPECT_EQ(RunImported(model, x), (std::vector<float>{2, 4, 6, 8, 2, 4, -3, -4}));
  {
    OnnxBuilder r(2, 1, 2);
    const std::string ones = r.Weight({1, 2, 1, 2}, std::vector<float>(4, 1.0f));
    const std::string cat = r.Node("Concat", {"input", ones}, {testing::IntAttr("axis", 1)});
    EXPECT_THAT(Refusal(r.Bytes(r.Node("Relu", {cat}))),
                HasSubstr("only zeros of the maps' height and width (a channel padding)"));
  }
  {
    OnnxBuilder r(2, 1, 2);
    const std::string zero = r.Weight({1, 2, 1, 2}, std::vector<float>(4, 0.0f));
    const std::string cat = r.Node("Concat", {"input", zero}, {testing::IntAttr("axis", 1)});
    EXPECT_THAT(Refusal(r.Bytes(r.Node("Relu", {cat}))), HasSubstr("which only an Add may read"));
  }
}

TEST(OnnxPaddingTest, RefusesWhatTheIrCannotPadInOneLine) {
  {
    OnnxBuilder b(1, 4, 4);
    const std::string y =
        b.Node("Conv", {"input", b.Weight({1, 1, 3, 3}, kKernel)},
               {IntsAttr("strides", {2, 2}), StringAttr("auto_pad", "SAME_LOWER")});
    EXPECT_THAT(Refusal(b.Bytes(y)), HasSubstr("auto_pad=SAME_LOWER pads the height axis by 1"));
  }
  {
    OnnxBuilder b(1, 4, 4);
    const std::string y = b.Node("MaxPool", {"input"},
                                 {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}),
                                  IntsAttr("pads", {0, 0, 1, 1})});
    EXPECT_THAT(Refusal(b.Bytes(y)), HasSubstr("a pool pads both sides equally"));
  }
  {
    OnnxBuilder b(1, 4, 4);
    const std::string padded = b.Node("Pad", {"input", b.Ints({0, 0, 1, 0, 0, 0, 0, 0})});
    const std::string y = b.Node("Conv", {padded, b.Weight({1, 1, 3, 3}, kKernel)});
    EXPECT_THAT(Refusal(b.Bytes(y)),
                HasSubstr("pad the top or left more than the bottom or right"));
  }
}

}  // namespace
}  // namespace ios::onnx_import
