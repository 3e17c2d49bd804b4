// The search's rule for kExecuted measurements: a network's weights are warm
// when they and its largest step fit the device's last-level cache.
#include "coordinator/weight_warmth.h"

#include <gtest/gtest.h>

#include "common/zoo.h"
#include "common/zoo_builder.h"

namespace ios::coordinator {
namespace {

using zoo::GraphBuilder;

// in 8x16x16 -> conv a 1x1 to 16 (bias) -> relu-sepconv r 3x3 to 32 ->
// out: a and r concatenated (48x16x16).
Graph SmallNetwork() {
  GraphBuilder g("small", {8, 16, 16});
  g.BeginBlock();
  const NodeId a =
      g.AddConv("a", g.Of(GraphBuilder::kInput), 16, {1, 1}, {1, 1}, {0, 0}, Activation::kRelu);
  const NodeId r = g.AddReluSepConv("r", g.Of(a), 32, {3, 3}, {1, 1}, {1, 1});
  g.AddIdentity("out", g.Concat({{a}, {r}}));
  g.EndBlock();
  return g.Finish();
}

TEST(WeightWarmthTest, FootprintCountsEveryKernelAndBiasAndTheLargestStepAtTheBatch) {
  const Graph graph = SmallNetwork();
  const Node& r = graph.node(2);
  ASSERT_EQ(r.op.chain.size(), 3u);  // relu, depthwise, pointwise
  const bool dw_bias = r.op.chain[1].conv.bias, pw_bias = r.op.chain[2].conv.bias;
  const int64_t values = (16 * 8 + 16)                        // a
                         + (16 * 1 * 9 + (dw_bias ? 16 : 0))  // r's depthwise
                         + (32 * 16 + (pw_bias ? 32 : 0));    // r's pointwise
  const int64_t plane = 16 * 16;
  // The identity reads 16 + 32 channels and writes 48; r reads 16 and
  // writes 16, 16 and 32 along its chain; a reads 8 and writes 16.
  const int64_t largest = (48 + 48) * plane;
  for (const int batch : {1, 3}) {
    const NetworkFootprint footprint = FootprintOf(graph, batch);
    EXPECT_EQ(footprint.weight_bytes, 4 * values) << "batch " << batch;
    EXPECT_EQ(footprint.largest_step_bytes, 4 * batch * largest) << "batch " << batch;
  }
}

TEST(WeightWarmthTest, WeightsAreWarmOnlyWhenWeightsAndTheLargestStepFitTheCache) {
  const NetworkFootprint footprint{1000, 24};
  EXPECT_TRUE(WeightsStayWarm(footprint, 1024));
  EXPECT_FALSE(WeightsStayWarm(footprint, 1023));
  EXPECT_FALSE(WeightsStayWarm(footprint, 0)) << "an unknown cache is taken as cold";
}

TEST(WeightWarmthTest, OnlyExecutedSettingsAreDecidedAndTheKeySaysWhich) {
  const Graph graph = SmallNetwork();
  MeasureSettings isolated;
  EXPECT_FALSE(DecideWeightWarmth(graph, 1, int64_t{32} << 20, isolated));
  EXPECT_FALSE(isolated.warm_weights);

  MeasureSettings executed = DefaultMeasureSettings(DeviceTiming::kHostLaunched);
  ASSERT_TRUE(DecideWeightWarmth(graph, 1, int64_t{32} << 20, executed));
  EXPECT_TRUE(executed.warm_weights);
  EXPECT_TRUE(executed.Key().ends_with("-executed-wwarm")) << executed.Key();
  ASSERT_TRUE(DecideWeightWarmth(graph, 1, 0, executed));
  EXPECT_FALSE(executed.warm_weights);
  EXPECT_TRUE(executed.Key().ends_with("-executed-wcold")) << executed.Key();
}

TEST(WeightWarmthTest, InceptionV3sWeightsDoNotStayInA32MiBCache) {
  const Graph graph = BuildZooModel("inception_v3");
  const NetworkFootprint footprint = FootprintOf(graph, 1);
  EXPECT_GT(footprint.weight_bytes, int64_t{80} << 20);  // ~24 M parameters
  MeasureSettings settings = DefaultMeasureSettings(DeviceTiming::kHostLaunched);
  ASSERT_TRUE(DecideWeightWarmth(graph, 1, int64_t{32} << 20, settings));
  EXPECT_FALSE(settings.warm_weights);
}

}  // namespace
}  // namespace ios::coordinator
