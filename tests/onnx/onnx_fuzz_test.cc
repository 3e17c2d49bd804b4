// The importer on damaged files: torchvision exports with bytes flipped,
// cut short or with varint fields rewritten (seeded), and small models
// whose integer attributes and sizes take extreme values (0, -1, 2^31,
// 2^32 + 1, INT64_MIN, ...). Each must import or be refused with an
// ios::Error - never a crash, a hang or another exception (the suite runs
// this under ASan and UBSan too) - and what imports must have the shape
// its attributes say.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"

namespace ios::onnx_import {
namespace {

std::string FixtureBytes(const std::string& model) {
  std::ifstream in(std::string(IOS_TEST_DATA_DIR) + "/onnx/" + model + ".onnx", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(OnnxFuzzTest, DamagedExportsImportOrAreRefusedWithAnError) {
  for (const char* model : {"squeezenet1_1", "googlenet"}) {
    const std::string good = FixtureBytes(model);
    ASSERT_GT(good.size(), 1000u) << model;
    std::mt19937_64 rng(20261125);
    int refused = 0, imported = 0;
    for (int trial = 0; trial < 400; ++trial) {
      const std::string bytes = testing::Damaged(good, rng, trial);
      try {
        ImportOnnx(bytes, std::string(model) + ".onnx");
        ++imported;
      } catch (const Error&) {
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << model << " trial " << trial << ": not an ios::Error: " << e.what();
      }
    }
    EXPECT_GT(refused, 0) << model;
    EXPECT_EQ(refused + imported, 400) << model;
  }
}

// ---- Extreme attribute values -----------------------------------------------

using testing::IntAttr;
using testing::IntsAttr;
using testing::OnnxBuilder;
using testing::StringAttr;

// Around every boundary a narrowing or a division can trip on; 1, 3 and 4
// make models that import, so the shape check below is exercised too.
const std::vector<int64_t>& Extremes() {
  static const std::vector<int64_t> values = {
      0,
      -1,
      1,
      3,
      4,
      65536,
      65537,
      std::numeric_limits<int32_t>::max(),
      int64_t{1} << 31,
      int64_t{1} << 32,
      (int64_t{1} << 32) + 1,
      (int64_t{1} << 32) + 2,
      int64_t{1} << 40,
      std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::min(),
  };
  return values;
}

// One crafted model: its bytes, and what an import of it must show.
struct Crafted {
  std::string what;
  std::string bytes;
  std::function<void(const ImportedModel&)> check;  // called when it imports
};

// Counts imports and refusals; fails on anything else.
struct Tally {
  int imported = 0, refused = 0;
  void Import(const Crafted& c) {
    SCOPED_TRACE(c.what);
    std::optional<ImportedModel> model;
    try {
      model = ImportOnnx(c.bytes, "crafted.onnx");
    } catch (const Error& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an ios::Error: " << e.what();
      return;
    }
    ++imported;
    if (c.check) c.check(*model);
  }
};

std::string Text(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return "[" + text + "]";
}

// ONNX's output size of a window along one axis of 8, in int64; nullopt
// where there is none (the window does not fit, a stride of 0) or the
// values are beyond any network (where the import must be refused).
std::optional<int64_t> WindowOutput(const std::string& auto_pad, int64_t k, int64_t s, int64_t p,
                                    int64_t d) {
  constexpr int64_t kAbsurd = int64_t{1} << 20;  // keeps the arithmetic below in range
  if (k < 1 || s < 1 || d < 1 || p < 0 || k > kAbsurd || s > kAbsurd || d > kAbsurd ||
      p > kAbsurd) {
    return std::nullopt;
  }
  if (auto_pad == "SAME_UPPER") return (8 + s - 1) / s;
  if (auto_pad == "VALID") p = 0;
  const int64_t span = d * (k - 1) + 1, room = 8 + 2 * p - span;
  if (room < 0) return std::nullopt;
  return room / s + 1;
}

// Conv (3x3 weight), MaxPool and AveragePool on a 1x4x8x8 input, and the
// operators ONNX infers with the same code (refused by the importer, after
// the check that keeps their zero strides from ONNX's division), with one
// window attribute at `v`: on both axes, or on one.
void WindowCases(Tally& tally, int64_t v) {
  const std::vector<std::string> ops = {"Conv",   "MaxPool",     "AveragePool",
                                        "LpPool", "ConvInteger", "QLinearConv"};
  for (const std::string& op : ops) {
    const bool conv = op == "Conv" || op == "ConvInteger" || op == "QLinearConv";
    for (const std::string attr : {"kernel_shape", "strides", "dilations", "pads", "group"}) {
      if (attr == "group" && !conv) continue;
      if (attr == "dilations" && op == "AveragePool") continue;  // an unknown attribute before 19
      for (const std::string auto_pad : {"NOTSET", "SAME_UPPER", "VALID"}) {
        if (auto_pad != "NOTSET" && (attr == "pads" || attr == "group" || op != "Conv")) continue;
        for (const bool both : {true, false}) {
          std::vector<int64_t> values = {v, v};
          if (attr == "pads")
            values = both ? std::vector<int64_t>{v, v, v, v} : std::vector<int64_t>{v, 1, v, 1};
          if (!both && attr != "pads") values = {1, v};
          if (attr == "group" && !both) continue;
          if (attr == "kernel_shape" && conv && !both) values = {3, v};
          OnnxBuilder b(4, 8, 8);
          std::vector<::onnx::AttributeProto> attrs;
          attrs.push_back(attr == "group" ? IntAttr(attr, v) : IntsAttr(attr, values));
          if (!conv && attr != "kernel_shape") attrs.push_back(IntsAttr("kernel_shape", {2, 2}));
          if (auto_pad != "NOTSET") attrs.push_back(StringAttr("auto_pad", auto_pad));
          std::vector<std::string> inputs = {"input"};
          if (conv) inputs.push_back(b.Weight({4, 4, 3, 3}, 1));
          if (op == "QLinearConv") {
            const std::string one = b.Weight({}, std::vector<float>{1.0f});
            inputs = {"input", one, one, inputs[1], one, one, one, one};
          }
          const std::string y = b.Node(op, inputs, attrs);
          // What the attributes say, for the check of an import.
          const auto at = [&](const char* name, int axis, int64_t fallback) {
            return attr == name ? values[axis] : fallback;
          };
          const int64_t kernel_fallback = conv ? 3 : 2;
          const int64_t kh = at("kernel_shape", 0, kernel_fallback),
                        kw = at("kernel_shape", 1, kernel_fallback);
          const int64_t sh = at("strides", 0, 1), sw = at("strides", 1, 1);
          const int64_t dh = at("dilations", 0, 1), dw = at("dilations", 1, 1);
          const int64_t ph = at("pads", 0, 0), pw = at("pads", 1, 0);
          const std::optional<int64_t> oh = WindowOutput(auto_pad, kh, sh, ph, dh);
          const std::optional<int64_t> ow = WindowOutput(auto_pad, kw, sw, pw, dw);
          Crafted c{op + " " + attr + "=" + Text(values) + " auto_pad=" + auto_pad,
                    b.UninferredBytes(y), nullptr};
          c.check = [=](const ImportedModel& model) {
            const Node& node = model.graph.nodes.back();
            ASSERT_TRUE(node.op.kind == OpKind::kConv || node.op.kind == OpKind::kPool);
            const Window stride = conv ? node.op.conv.stride : node.op.pool.stride;
            const Window kernel = conv ? node.op.conv.kernel : node.op.pool.kernel;
            EXPECT_EQ(stride.h, sh);
            EXPECT_EQ(stride.w, sw);
            EXPECT_EQ(kernel.h, kh);
            EXPECT_EQ(kernel.w, kw);
            if (conv) {
              EXPECT_EQ(node.op.conv.dilation.h, dh);
              EXPECT_EQ(node.op.conv.dilation.w, dw);
              EXPECT_EQ(node.op.conv.groups, attr == "group" ? v : 1);
            }
            if (auto_pad == "NOTSET") {
              const Window pad = conv ? node.op.conv.padding : node.op.pool.padding;
              EXPECT_EQ(pad.h, ph);
              EXPECT_EQ(pad.w, pw);
            }
            ASSERT_TRUE(oh && ow) << "imported a window that does not fit";
            EXPECT_EQ(node.output.h, *oh);
            EXPECT_EQ(node.output.w, *ow);
          };
          tally.Import(c);
        }
      }
    }
  }
}

// Sizes: of the input, of a convolution weight and of a fully connected
// one (both declared without values), of a Pad, of an initializer.
void SizeCases(Tally& tally, int64_t v) {
  for (int axis = 0; axis < 4; ++axis) {
    OnnxBuilder b(4, 8, 8);
    b.InputDim(axis, v);
    const std::string y = b.Node("Relu", {"input"});
    tally.Import({"input dimension " + std::to_string(axis) + "=" + std::to_string(v),
                  b.UninferredBytes(y), [=](const ImportedModel& model) {
                    const Shape in = model.graph.nodes.front().output;
                    const int64_t dims[4] = {model.batch, in.c, in.h, in.w};
                    for (int i = 1; i < 4; ++i) {
                      EXPECT_EQ(dims[i], i == axis ? v : (i == 1 ? 4 : 8));
                    }
                    if (axis == 0 && v > 0) {
                      EXPECT_EQ(model.batch, v);
                    }
                  }});
  }
  for (int axis = 0; axis < 4; ++axis) {
    std::vector<int64_t> dims = {4, 4, 3, 3};
    dims[axis] = v;
    OnnxBuilder b(4, 8, 8);
    const std::string w = b.WeightInput(dims);
    const std::string y = b.Node("Conv", {"input", w});
    tally.Import(
        {"conv weight " + Text(dims), b.UninferredBytes(y), [=](const ImportedModel& model) {
           const ConvParams& c = model.graph.nodes.back().op.conv;
           EXPECT_EQ(c.out_channels, dims[0]);
           EXPECT_EQ(int64_t{c.groups} * dims[1], 4);
           EXPECT_EQ(c.kernel.h, dims[2]);
           EXPECT_EQ(c.kernel.w, dims[3]);
         }});
  }
  for (const int64_t trans_b : {int64_t{0}, int64_t{1}, v}) {
    for (const bool k_is_v : {true, false}) {
      std::vector<int64_t> dims = {16, k_is_v ? v : 10};
      if (!k_is_v) dims[0] = v;
      if (trans_b == 1) std::swap(dims[0], dims[1]);
      OnnxBuilder b(4, 2, 2);
      const std::string flat = b.Node("Flatten", {"input"});
      const std::string y =
          b.Node("Gemm", {flat, b.WeightInput(dims)}, {IntAttr("transB", trans_b)});
      tally.Import({"Gemm weight " + Text(dims) + " transB=" + std::to_string(trans_b),
                    b.UninferredBytes(y), [=](const ImportedModel& model) {
                      EXPECT_TRUE(trans_b == 0 || trans_b == 1);
                      EXPECT_EQ(model.graph.nodes.back().op.conv.out_channels,
                                dims[trans_b ? 0 : 1]);
                    }});
    }
  }
  for (const bool as_input : {true, false}) {
    OnnxBuilder b(4, 8, 8, as_input ? 13 : 10);
    const std::vector<int64_t> pads = {0, 0, v, v, 0, 0, v, v};
    const std::string padded = as_input ? b.Node("Pad", {"input", b.Ints(pads)})
                                        : b.Node("Pad", {"input"}, {IntsAttr("pads", pads)});
    const std::string y = b.Node("Conv", {padded, b.Weight({4, 4, 3, 3}, 1)});
    tally.Import({"Pad " + Text(pads), b.UninferredBytes(y), [=](const ImportedModel& model) {
                    const Window pad = model.graph.nodes.back().op.conv.padding;
                    EXPECT_EQ(pad.h, v);
                    EXPECT_EQ(pad.w, v);
                  }});
  }
  {
    OnnxBuilder b(4, 8, 8);
    auto* t = b.Model().mutable_graph()->add_initializer();
    t->set_name("crafted");
    t->set_data_type(::onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : {v, v, int64_t{4}}) t->add_dims(d);
    t->set_raw_data("");
    tally.Import({"initializer " + Text({v, v, 4}) + " of no bytes",
                  b.UninferredBytes(b.Node("Relu", {"input"})),
                  [=](const ImportedModel&) { EXPECT_EQ(v, 0); }});
  }
}

// Reshape shapes and the attributes read as axes and flags.
void ShapeCases(Tally& tally, int64_t v) {
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{v, 16}, {1, v}, {v, -1}, {-1, v}, {v}, {v, v, v}}) {
    for (const int64_t allowzero : {int64_t{0}, int64_t{1}, v}) {
      OnnxBuilder b(4, 2, 2, 14);
      const std::string y =
          b.Node("Reshape", {"input", b.Ints(shape)}, {IntAttr("allowzero", allowzero)});
      tally.Import({"Reshape to " + Text(shape) + " allowzero=" + std::to_string(allowzero),
                    b.UninferredBytes(y), [=](const ImportedModel& model) {
                      ASSERT_EQ(shape.size(), 2u);
                      EXPECT_TRUE(shape[0] == 1 || shape[0] == -1 ||
                                  (shape[0] == 0 && allowzero == 0));
                      EXPECT_TRUE(shape[1] == 16 || shape[1] == -1);
                      const Shape out = model.graph.nodes.back().output;
                      EXPECT_EQ(out.c * out.h * out.w, 16);
                    }});
    }
  }
  struct Single {
    const char* op;
    const char* attr;
    bool list;
    std::vector<int64_t> accepted;
  };
  for (const Single& s :
       {Single{"Concat", "axis", false, {1, -3}}, Single{"Flatten", "axis", false, {1}},
        Single{"Softmax", "axis", false, {1, -3}}, Single{"ReduceMean", "axes", true, {}},
        Single{"ReduceMean", "keepdims", false, {0, 1}}, Single{"Gemm", "transA", false, {0}}}) {
    OnnxBuilder b(4, 1, 1);
    std::vector<::onnx::AttributeProto> attrs = {s.list ? IntsAttr(s.attr, {v, 3})
                                                        : IntAttr(s.attr, v)};
    std::vector<std::string> inputs = {"input"};
    if (std::string(s.op) == "Concat") inputs.push_back("input");
    if (std::string(s.op) == "Gemm") {
      inputs = {b.Node("Flatten", {"input"}), b.Weight({4, 2}, 1)};
    }
    if (std::string(s.op) == "ReduceMean" && !s.list) attrs.push_back(IntsAttr("axes", {2, 3}));
    const std::string y = b.Node(s.op, inputs, attrs);
    tally.Import({std::string(s.op) + " " + s.attr + "=" + std::to_string(v), b.UninferredBytes(y),
                  [=](const ImportedModel&) {
                    if (s.list) {
                      EXPECT_EQ(v, 2);
                    } else {
                      EXPECT_NE(std::find(s.accepted.begin(), s.accepted.end(), v),
                                s.accepted.end());
                    }
                  }});
  }
}

TEST(OnnxFuzzTest, ExtremeAttributeValuesAndSizesImportAsWrittenOrAreRefused) {
  Tally tally;
  for (const int64_t v : Extremes()) {
    WindowCases(tally, v);
    SizeCases(tally, v);
    ShapeCases(tally, v);
  }
  RecordProperty("imported", tally.imported);
  RecordProperty("refused", tally.refused);
  EXPECT_GT(tally.imported, 50);
  EXPECT_GT(tally.refused, 500);
}

}  // namespace
}  // namespace ios::onnx_import
