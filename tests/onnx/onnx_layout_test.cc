// The ONNX importer on the operators that move channels (onnx/onnx_layout.cc)
// and on the shape arithmetic around them (onnx/onnx_fold.cc), as PyTorch
// exports ShuffleNet V2: a channel split by Shape -> Gather -> Add -> Div ->
// Slice, and a channel shuffle by Reshape -> Transpose -> Reshape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/op_kinds.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"

namespace ios::onnx_import {
namespace {

using ::testing::HasSubstr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::OnnxBuilder;

// Channel c, pixel p holds 10 c + p: a permutation of channels shows as is.
std::vector<float> ChannelNumbered(int channels, int pixels) {
  std::vector<float> values;
  for (int c = 0; c < channels; ++c) {
    for (int p = 0; p < pixels; ++p) values.push_back(static_cast<float>(10 * c + p));
  }
  return values;
}

// torchvision's channel_shuffle: view(N, g, C/g, H, W), transpose(1, 2),
// view(N, -1, H, W).
std::string Shuffle(OnnxBuilder& b, const std::string& x, int channels, int groups, int h, int w) {
  std::string y = b.Node("Reshape", {x, b.Ints({1, groups, channels / groups, h, w})});
  y = b.Node("Transpose", {y}, {IntsAttr("perm", {0, 2, 1, 3, 4})});
  return b.Node("Reshape", {y, b.Ints({1, -1, h, w})});
}

int CountKind(const ImportedModel& model, OpKind kind) {
  int count = 0;
  for (const Node& node : model.graph.nodes) count += node.op.kind == kind;
  return count;
}

TEST(OnnxLayoutTest, ReshapeTransposeReshapeIsOneChannelShuffle) {
  OnnxBuilder b(6, 1, 2);
  const ImportedModel model = ImportOnnx(b.Bytes(Shuffle(b, "input", 6, 3, 1, 2)), "s.onnx");
  ASSERT_EQ(model.graph.nodes.size(), 2u);
  const Node& shuffle = model.graph.nodes[1];
  ASSERT_EQ(shuffle.op.kind, OpKind::kRegistered);
  EXPECT_EQ(RegisteredKeyText(shuffle.op.registered), "channel_shuffle(groups=3)");
  // Rows (0 1)(2 3)(4 5) read by column: 0 2 4 1 3 5.
  const std::vector<float> out = RunImported(model, ChannelNumbered(6, 2));
  const std::vector<float> expected = {0, 1, 20, 21, 40, 41, 10, 11, 30, 31, 50, 51};
  EXPECT_EQ(out, expected);
}

TEST(OnnxLayoutTest, AReshapeIntoGroupsAndStraightBackIsNoOperator) {
  OnnxBuilder b(4, 2, 2);
  std::string x = b.Node("Relu", {"input"});
  x = b.Node("Reshape", {x, b.Ints({1, 2, 2, 2, 2})});
  x = b.Node("Reshape", {x, b.Ints({0, 4, 2, 2})});
  const ImportedModel model = ImportOnnx(b.Bytes(x), "back.onnx");
  EXPECT_EQ(model.graph.nodes.size(), 2u) << "the input and the relu";
}

// ShuffleNet V2's unit as PyTorch 1.13 exports it: x.chunk(2, dim=1) as
// Slices whose bounds come from Shape -> Gather -> Add -> Div -> Mul, one
// half through a branch, a concatenation and the shuffle.
TEST(OnnxLayoutTest, AShuffleNetUnitFoldsItsShapeArithmeticAndComputesTheSame) {
  OnnxBuilder b(4, 1, 3);
  const std::string shape = b.Node("Shape", {"input"});
  const std::string channels = b.Node("Gather", {shape, b.Ints({1})}, {IntAttr("axis", 0)});
  const std::string half = b.Node("Div", {b.Node("Add", {channels, b.Ints({1})}), b.Ints({2})});
  const std::string end1 = b.Node("Mul", {half, b.Ints({1})});
  const std::string end2 = b.Node("Mul", {half, b.Ints({2})});
  const std::string first = b.Node("Slice", {"input", b.Ints({0}), end1, b.Ints({1})});
  const std::string second = b.Node("Slice", {"input", end1, end2, b.Ints({1})});
  const std::string branch = b.Node("Relu", {second});
  const std::string cat = b.Node("Concat", {first, branch}, {IntAttr("axis", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(Shuffle(b, cat, 4, 2, 1, 3)), "unit.onnx");
  EXPECT_EQ(CountKind(model, OpKind::kActivation), 1);
  EXPECT_EQ(CountKind(model, OpKind::kRegistered), 1);
  EXPECT_EQ(model.graph.nodes.size(), 3u) << "input, relu, shuffle: no operator for the rest";
  EXPECT_THAT(model.notes, ::testing::Contains(HasSubstr("6 node(s) computing shapes")));
  std::vector<float> input = ChannelNumbered(4, 3);
  for (float& v : input) v -= 15;  // channels 0 and 1 partly negative
  const std::vector<float> out = RunImported(model, input);
  // concat = (x0, x1, relu(x2), relu(x3)); shuffled by 2: x0 relu(x2) x1 relu(x3).
  std::vector<float> expected;
  for (int c : {0, 2, 1, 3}) {
    for (int p = 0; p < 3; ++p) {
      const float v = input[static_cast<size_t>(c * 3 + p)];
      expected.push_back(c >= 2 ? std::max(v, 0.0f) : v);
    }
  }
  EXPECT_EQ(out, expected);
}

TEST(OnnxLayoutTest, ASplitIntoChannelRangesIsReadWithoutAnOperator) {
  OnnxBuilder b(5, 1, 1);
  b.Node("Split", {"input", b.Ints({2, 3})}, {IntAttr("axis", 1)});
  b.Last().add_output("rest");
  const std::string first = b.Last().output(0);
  const std::string sum = b.Node("Concat", {"rest", first}, {IntAttr("axis", 1)});
  const ImportedModel model = ImportOnnx(b.Bytes(b.Node("Relu", {sum})), "split.onnx");
  EXPECT_EQ(model.graph.nodes.size(), 2u);
  const std::vector<float> out = RunImported(model, {0, 1, 2, 3, 4});
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4, 0, 1}));
}

TEST(OnnxLayoutTest, MovesTheIrCannotHoldAreRefusedInOneLineNamingWhat) {
  {
    OnnxBuilder b(4, 2, 2);
    EXPECT_THAT(Refusal(b.Bytes(b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 2, 1, 3})}))),
                HasSubstr("(Transpose): a Transpose with perm [0, 2, 1, 3] of a feature map: only "
                          "moving the channels last"));
  }
  {
    OnnxBuilder b(4, 2, 2);
    std::string x = b.Node("Reshape", {"input", b.Ints({1, 2, 2, 2, 2})});
    x = b.Node("Reshape", {x, b.Ints({1, 4, 4})});
    EXPECT_THAT(Refusal(b.Bytes(x)),
                HasSubstr("a Reshape of a feature map viewed as channel groups (the middle of a "
                          "channel shuffle) to [1, 4, 4]: only a Reshape back to [N, 4, 2, 2]"));
  }
  {
    OnnxBuilder b(4, 2, 2);
    const std::string x = b.Node("Slice", {"input", b.Ints({0}), b.Ints({1}), b.Ints({2})});
    EXPECT_THAT(Refusal(b.Bytes(x)),
                HasSubstr("a slice of axis 2 [0, 1) step 1: only slices of the channels"));
  }
  {
    OnnxBuilder b(4, 2, 2);
    b.Node("Split", {"input", b.Ints({1, 2})}, {IntAttr("axis", 1)});
    b.Last().add_output("rest");
    EXPECT_THAT(Refusal(b.Bytes("rest")),
                HasSubstr("split [1, 2] into 2 outputs does not cut 4 channels"));
  }
}

TEST(OnnxLayoutTest, ShapeGatherAndConcatFoldIntoTheShapeOfAFlatten) {
  OnnxBuilder b(6, 4, 5);
  // [N, C*H*W] from Shape -> Gather -> Unsqueeze -> Concat, as a flatten.
  const std::string shape = b.Node("Shape", {"input"});
  const std::string n = b.Node("Gather", {shape, b.Ints({0})}, {IntAttr("axis", 0)});
  const std::string cat = b.Node("Concat", {n, b.Ints({-1})}, {IntAttr("axis", 0)});
  const std::string flat = b.Node("Reshape", {"input", cat});
  // ONNX cannot infer the rank of a Reshape to a computed shape.
  const ImportedModel model = ImportOnnx(b.UninferredBytes(flat, 2), "flat.onnx");
  EXPECT_EQ(model.graph.nodes.size(), 2u) << "the input and the flatten";
  EXPECT_THAT(model.notes, ::testing::Contains(HasSubstr("3 node(s) computing shapes")));
}

// Swin's padding arithmetic: pads reversed by a Slice of step -2 (taking
// every other from the end), a Reshape of a constant and Python's Mod.
TEST(OnnxLayoutTest, ReversedSlicesReshapesAndModsOfConstantsFold) {
  OnnxBuilder b(2, 2, 2);
  const std::string picked =
      b.Node("Slice", {b.Ints({8, 7, -4}), b.Ints({2}), b.Ints({-100}), b.Ints({0}), b.Ints({-2})});
  const std::string two = b.Node("Reshape", {picked, b.Ints({2})});  // [-4, 8]
  const std::string shape = b.Node("Mod", {two, b.Ints({5, 9})});    // [1, 8]: Python's -4 % 5
  const ImportedModel model =
      ImportOnnx(b.UninferredBytes(b.Node("Reshape", {"input", shape}), 2), "m.onnx");
  const std::vector<float> x = exec::SeededValues(8, 4);
  EXPECT_EQ(RunImported(model, x), x);
  EXPECT_THAT(model.notes, ::testing::Contains(HasSubstr("3 node(s) computing shapes")));
}

// Swin's attention mask and ViT's class token are built from these on
// constants: ScatterND into zeros, Equal, Where, Expand.
TEST(OnnxLayoutTest, ScatterNdEqualWhereAndExpandOfConstantsFold) {
  OnnxBuilder b(2, 2, 2);
  const std::string indices = b.Node("Reshape", {b.Ints({1}), b.Ints({1, 1})});           // [[1]]
  const std::string updates = b.Node("Expand", {b.Ints({8}), b.Ints({1})});               // [8]
  const std::string scattered = b.Node("ScatterND", {b.Ints({1, 0}), indices, updates});  // [1, 8]
  const std::string same = b.Node("Equal", {b.Ints({1, -1}), b.Ints({-1, -1})});          // [0, 1]
  const std::string shape = b.Node("Where", {same, b.Ints({0, 8}), scattered});           // [1, 8]
  const ImportedModel model =
      ImportOnnx(b.UninferredBytes(b.Node("Reshape", {"input", shape}), 2), "m.onnx");
  const std::vector<float> x = exec::SeededValues(8, 5);
  EXPECT_EQ(RunImported(model, x), x);
  EXPECT_THAT(model.notes, ::testing::Contains(HasSubstr("5 node(s) computing shapes")));
  OnnxBuilder bad(2, 2, 2);
  const std::string outside = bad.Node("Reshape", {bad.Ints({2}), bad.Ints({1, 1})});
  const std::string wrong = bad.Node("ScatterND", {bad.Ints({1, 0}), outside, bad.Ints({8})});
  EXPECT_THAT(Refusal(bad.UninferredBytes(bad.Node("Reshape", {"input", wrong}), 2)),
              HasSubstr("index 2 is outside an axis of 2"));
}

}  // namespace
}  // namespace ios::onnx_import
