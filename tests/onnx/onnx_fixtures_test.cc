// The importer on torchvision exports without weights (tests/data/onnx/,
// written by scripts/export-torchvision.py --structure-only) import with
// their blocks. (Refusals: tests/onnx/onnx_import_test.cc.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/blocks.h"
#include "common/error.h"
#include "onnx/onnx_import.h"

namespace ios::onnx_import {
namespace {

using ::testing::HasSubstr;

std::string Fixture(const std::string& model) {
  return std::string(IOS_TEST_DATA_DIR) + "/onnx/" + model + ".onnx";
}

struct Expected {
  std::string model;
  int operators;  // after folding: convolutions with their relu, etc.
  int convolutions;
  Shape output;
};

TEST(OnnxFixturesTest, TorchvisionModelsImportWithTheirBlocks) {
  // Counts from the exports: ResNet-50 53 convolutions + the classifier, 16
  // adds with their relu, a max pool and the global pool; Inception V3 94
  // convolutions + the classifier, 4 max pools, 9 average pools (Pad fused),
  // the global pool and 10 module outputs (a Concat read by several
  // branches is an operator, as in IOS's models); SqueezeNet 26
  // convolutions, 3 max pools (ceil_mode without effect) and the global
  // pool (its Concats are read once: they stay inputs); MobileNetV2 52
  // convolutions with their relu6 (Clip) + the classifier, 10 adds and the
  // global pool; EfficientNet-B0 81 convolutions (SiLU and the
  // squeeze-and-excitation sigmoids folded in) + the classifier, 16
  // channel-scale muls, 17 global pools and 9 adds; GoogLeNet 57
  // convolutions + the classifier, 13 max pools (4 rounding up: ceil_mode),
  // the 6 module outputs several branches read and the global pool.
  for (const Expected& e :
       {Expected{"resnet50", 88, 54, {1000, 1, 1}}, Expected{"inception_v3", 119, 95, {1000, 1, 1}},
        Expected{"squeezenet1_1", 30, 26, {1000, 1, 1}},
        Expected{"mobilenet_v2", 64, 53, {1000, 1, 1}},
        Expected{"efficientnet_b0", 124, 82, {1000, 1, 1}},
        Expected{"googlenet", 78, 58, {1000, 1, 1}}}) {
    SCOPED_TRACE(e.model);
    const ImportedModel m = ImportOnnxFile(Fixture(e.model));
    EXPECT_EQ(m.graph.OperatorCount(), e.operators);
    int convolutions = 0;
    for (const Node& n : m.graph.nodes) convolutions += n.op.kind == OpKind::kConv;
    EXPECT_EQ(convolutions, e.convolutions);
    EXPECT_EQ(m.graph.nodes.back().output, e.output);
    EXPECT_FALSE(m.has_weights) << "exported without parameters";
    EXPECT_EQ(m.graph.name, e.model);
    // Joined up to kAutoBlockOperators where the cuts allow.
    EXPECT_GE(m.graph.blocks.size(),
              static_cast<size_t>(m.graph.OperatorCount() / kAutoBlockOperators));
    EXPECT_LT(m.graph.blocks.size(), static_cast<size_t>(m.graph.OperatorCount() / 2));
    EXPECT_TRUE(m.warnings.empty());
  }
  // Inception V3's modules are blocks: its widest block reads one input
  // from the enter node through 4 branches.
  const ImportedModel inception = ImportOnnxFile(Fixture("inception_v3"));
  size_t widest = 0;
  for (const Block& b : inception.graph.blocks) widest = std::max(widest, b.inner.size());
  EXPECT_GE(widest, 9u);
}

}  // namespace
}  // namespace ios::onnx_import
