// The importer on crafted attribute values and sizes (issue 21): integers
// beyond int range, zero and negative windows, element counts that overflow.
// Each crashed a tool (a division by zero in our padding or in ONNX's own
// shape inference) or silently imported another network (2^32 + 1 read as
// 1); each must now be refused in one line naming the node, the attribute
// and the limit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"

namespace ios::onnx_import {
namespace {

using ::testing::HasSubstr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::OnnxBuilder;
using testing::StringAttr;

constexpr int64_t k2To32 = int64_t{1} << 32;
constexpr int64_t k2To40 = int64_t{1} << 40;

struct CraftedCase {
  const char* what;
  std::function<std::string()> bytes;  // the serialized model
  std::vector<std::string> says;       // the refusal names all of these
};

// A 3x3 convolution of the 1x4x8x8 input with these attributes.
std::string Conv(const std::vector<::onnx::AttributeProto>& attrs) {
  OnnxBuilder b(4, 8, 8);
  const std::string w = b.Weight({4, 4, 3, 3}, 1);
  return b.UninferredBytes(b.Node("Conv", {"input", w}, attrs));
}

std::string Pool(const std::string& op, const std::vector<::onnx::AttributeProto>& attrs) {
  OnnxBuilder b(4, 8, 8);
  return b.UninferredBytes(b.Node(op, {"input"}, attrs));
}

// ConvInteger and QLinearConv: ONNX infers their shapes with Conv's code,
// whatever their operand types.
std::string QuantizedConv(const std::string& op, const std::vector<int64_t>& strides) {
  OnnxBuilder b(4, 8, 8);
  std::vector<std::string> inputs = {"input", b.Weight({4, 4, 3, 3}, 1)};
  if (op == "QLinearConv") {
    const std::string one = b.Weight({}, std::vector<float>{1.0f});
    inputs = {"input", one, one, b.Weight({4, 4, 3, 3}, 1), one, one, one, one};
  }
  return b.UninferredBytes(b.Node(op, inputs, {IntsAttr("strides", strides)}));
}

// Flatten, then a fully connected layer whose weight (without values) is
// `dims`, or a Reshape to `shape`.
std::string FullyConnected(const std::vector<int64_t>& dims,
                           const std::vector<::onnx::AttributeProto>& attrs) {
  OnnxBuilder b(4, 2, 2);
  const std::string flat = b.Node("Flatten", {"input"});
  return b.UninferredBytes(b.Node("Gemm", {flat, b.WeightInput(dims)}, attrs), 2);
}

std::string Reshape(const std::vector<int64_t>& shape, int64_t allowzero) {
  OnnxBuilder b(4, 2, 2, 14);
  return b.Bytes(b.Node("Reshape", {"input", b.Ints(shape)}, {IntAttr("allowzero", allowzero)}));
}

std::string InputOf(int axis, int64_t size) {
  OnnxBuilder b(4, 8, 8);
  b.InputDim(axis, size);
  return b.UninferredBytes(b.Node("Relu", {"input"}));
}

std::vector<CraftedCase> CraftedCases() {
  const int64_t far = k2To32 + 1;
  return {
      {"strides of 2^32 (0 as an int) with SAME padding divided by zero",
       [] {
         return Conv({IntsAttr("strides", {k2To32, k2To32}), StringAttr("auto_pad", "SAME_UPPER")});
       },
       {"node 'Conv_t1' (Conv)", "'strides'", "4294967296", "65536"}},
      {"strides of 2^32 + 1 imported as 1",
       [=] {
         return Conv({IntsAttr("strides", {far, far})});
       },
       {"'strides'", "4294967297"}},
      {"a stride of 2^32 + 2 imported as 2",
       [] {
         return Conv({IntsAttr("strides", {1, k2To32 + 2})});
       },
       {"'strides'", "4294967298"}},
      {"pads of 2^32 + 1 imported as 1",
       [=] {
         return Conv({IntsAttr("pads", {far, far, far, far})});
       },
       {"'pads'", "4294967297"}},
      {"pads of 2^40 imported as 0",
       [] {
         return Conv({IntsAttr("pads", {k2To40, k2To40, k2To40, k2To40})});
       },
       {"'pads'", "1099511627776"}},
      {"dilations of 2^32 + 1 imported as 1",
       [=] {
         return Conv({IntsAttr("dilations", {far, far})});
       },
       {"'dilations'", "4294967297"}},
      {"a MaxPool kernel_shape of 2^32 + 3 imported as 3",
       [] {
         return Pool("MaxPool", {IntsAttr("kernel_shape", {k2To32 + 3, k2To32 + 3})});
       },
       {"node 'MaxPool_t0' (MaxPool)", "'kernel_shape'", "4294967299"}},
      {"a zero Conv stride divided by zero in ONNX's inference",
       [] {
         return Conv({IntsAttr("strides", {0, 1})});
       },
       {"node 'Conv_t1' (Conv)", "'strides'", "0"}},
      {"a zero MaxPool stride",
       [] {
         return Pool("MaxPool", {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {0, 0})});
       },
       {"(MaxPool)", "'strides'"}},
      {"a zero AveragePool stride",
       [] {
         return Pool("AveragePool",
                     {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {1, 0})});
       },
       {"(AveragePool)", "'strides'"}},
      {"a zero LpPool stride",
       [] {
         return Pool("LpPool", {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {0, 0})});
       },
       {"(LpPool)", "'strides'"}},
      {"a zero ConvInteger stride",
       [] {
         return QuantizedConv("ConvInteger", {0, 0});
       },
       {"(ConvInteger)", "'strides'"}},
      {"a zero QLinearConv stride",
       [] {
         return QuantizedConv("QLinearConv", {0, 0});
       },
       {"(QLinearConv)", "'strides'"}},
      {"a Reshape with allowzero=1 taken for a flatten",
       [] {
         return Reshape({0, 16}, 1);
       },
       {"(Reshape)", "allowzero=1 makes the 0 in its shape [0, 16] a size of zero"}},
      {"a convolution weight of 2^32 + 4 output channels imported as 4",
       [] {
         OnnxBuilder b(4, 8, 8);
         const std::string w = b.WeightInput({k2To32 + 4, 4, 3, 3});
         return b.UninferredBytes(b.Node("Conv", {"input", w}));
       },
       {"graph input 't0'", "[4294967300, 4, 3, 3]", "2147483648 elements"}},
      {"a convolution weight of 65537 output channels",
       [] {
         OnnxBuilder b(4, 8, 8);
         const std::string w = b.WeightInput({65537, 4, 1, 1});
         return b.UninferredBytes(b.Node("Conv", {"input", w}));
       },
       {"(Conv)", "dimension 0 of the weight [65537, 4, 1, 1] is 65537", "65536", "kMaxExtent"}},
      {"a Gemm of 2^32 + 10 outputs imported as 10",
       [] {
         return FullyConnected({16, k2To32 + 10}, {});
       },
       {"graph input 't1'", "[16, 4294967306]", "elements"}},
      {"a Gemm of 65537 outputs",
       [] {
         return FullyConnected({16, 65537}, {});
       },
       {"(Gemm)", "the output count of the weight [16, 65537] is 65537"}},
      {"a Gemm transB of 2",
       [] {
         return FullyConnected({10, 16}, {IntAttr("transB", 2)});
       },
       {"(Gemm)", "'transB'", "2"}},
      {"an input of 2^32 + 4 channels",
       [] { return InputOf(1, k2To32 + 4); },
       {"graph input 'input'", "4294967300"}},
      {"an input batch of 2^32 (0 as an int)",
       [] { return InputOf(0, k2To32); },
       {"graph input 'input'", "4294967296"}},
      {"a Pad of 2^32 + 1 before a convolution imported as 1",
       [=] {
         OnnxBuilder b(4, 8, 8);
         const std::string pads = b.Ints({0, 0, far, far, 0, 0, far, far});
         const std::string padded = b.Node("Pad", {"input", pads});
         return b.UninferredBytes(b.Node("Conv", {padded, b.Weight({4, 4, 3, 3}, 1)}));
       },
       {"(Pad)", "'pads'", "4294967297"}},
      {"a Concat of one 65536-channel map 32769 times (2^31 + 2^16 channels)",
       [] {
         OnnxBuilder b(65536, 1, 1);
         const std::vector<std::string> inputs(32769, "input");
         return b.UninferredBytes(b.Node("Concat", inputs, {IntAttr("axis", 1)}));
       },
       {"(Concat)", "the channel count of its inputs together is 131072", "65536"}},
      {"an initializer whose element count overflows int64 to 0",
       [] {
         OnnxBuilder b(4, 8, 8);
         auto* t = b.Model().mutable_graph()->add_initializer();
         t->set_name("huge");
         t->set_data_type(::onnx::TensorProto_DataType_FLOAT);
         for (int64_t d : {int64_t{1} << 62, int64_t{4}}) t->add_dims(d);
         t->set_raw_data("");
         return b.UninferredBytes(b.Node("Relu", {"input"}));
       },
       {"initializer 'huge'", "elements"}},
  };
}

TEST(OnnxAttributeTest, CraftedAttributesAndSizesAreRefusedInOneLineNamingTheLimit) {
  for (const CraftedCase& c : CraftedCases()) {
    SCOPED_TRACE(c.what);
    std::string what;
    try {
      ImportOnnx(c.bytes(), "crafted.onnx");
      ADD_FAILURE() << "imported without complaint";
      continue;
    } catch (const Error& e) {
      what = e.what();
    }
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_THAT(what, HasSubstr("crafted.onnx: ")) << what;
    for (const std::string& part : c.says) EXPECT_THAT(what, HasSubstr(part));
  }
}

TEST(OnnxAttributeTest, AReshapeWithAllowzeroImportsAsAFlattenWhenItNamesTheBatch) {
  for (const int64_t batch : {int64_t{1}, int64_t{-1}}) {
    const ImportedModel model = ImportOnnx(Reshape({batch, 16}, 1), "reshape.onnx");
    const Shape out = model.graph.nodes.back().output;
    EXPECT_EQ(out.c * out.h * out.w, 16) << batch;
  }
}

TEST(OnnxAttributeTest, WindowsAtTheLimitStillImport) {
  OnnxBuilder b(4, 8, 8);
  const std::string w = b.Weight({4, 4, 3, 3}, 1);
  const std::string y = b.Node("Conv", {"input", w}, {IntsAttr("strides", {65536, 65536})});
  const ImportedModel model = ImportOnnx(b.Bytes(y), "edge.onnx");
  EXPECT_EQ(model.graph.nodes.back().op.conv.stride.h, 65536);
  EXPECT_EQ(model.graph.nodes.back().output, (Shape{4, 1, 1}));
}

// The importer computes every node's output shape itself and compares it
// with ONNX's. libonnx 1.12 lets a ceil-mode pool's last window lie wholly
// in the padding (4 windows here, the file's declared output); the importer,
// like PyTorch, drops that window (3): two networks, so it is refused.
TEST(OnnxAttributeTest, AShapeDisagreeingWithOnnxsIsRefusedNamingTheNodeAndBoth) {
  OnnxBuilder b(4, 5, 5);
  const std::string y = b.Node("MaxPool", {"input"},
                               {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2}),
                                IntsAttr("pads", {1, 1, 1, 1}), IntAttr("ceil_mode", 1)});
  try {
    ImportOnnx(b.Bytes(y), "ceil.onnx");
    ADD_FAILURE() << "imported without complaint";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("ceil.onnx: node 'MaxPool_t0' (MaxPool)"));
    EXPECT_THAT(e.what(), HasSubstr("[1, 4, 3, 3] as imported but [1, 4, 4, 4]"));
  }
}

}  // namespace
}  // namespace ios::onnx_import
