// The simulated GPU: device identity, determinism, and the qualitative
// effects the search relies on (contention, overlap, merge, memory).
// Stages are built by hand so these tests need no graph or zoo.
#include "devices/sim/sim_backend.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "devices/registry.h"

namespace ios::devices {
namespace {

const std::vector<std::string> kModels = {"v100", "k80", "2080ti", "a100", "h100"};

ConvParams SameConv(int out_channels, int kernel) {
  ConvParams conv;
  conv.out_channels = out_channels;
  conv.kernel = {kernel, kernel};
  conv.stride = {1, 1};
  conv.padding = {kernel / 2, kernel / 2};
  conv.act = Activation::kRelu;
  return conv;
}

OpParams ConvOp(int out_channels, int kernel) {
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv = SameConv(out_channels, kernel);
  return op;
}

OpParams ReluOp() {
  OpParams op;
  op.kind = OpKind::kActivation;
  op.act = Activation::kRelu;
  return op;
}

SliceRef External(const Shape& shape) { return SliceRef{true, 0, 0, shape.c}; }

//! A stride-1 "same" convolution reading all of external 0 (shape `in`).
StageOp ConvOnInput(const Shape& in, int out_channels, int kernel) {
  return StageOp{ConvOp(out_channels, kernel), {{External(in)}}, {out_channels, in.h, in.w}};
}

//! Every op in its own group (its own stream), all reading one input.
StageSpec Concurrent(const Shape& in, const std::vector<StageOp>& ops) {
  StageSpec spec;
  spec.strategy = Strategy::kParallel;
  spec.externals = {in};
  for (const StageOp& op : ops) spec.groups.push_back({op});
  return spec;
}

StageSpec Single(const Shape& in, const StageOp& op) { return Concurrent(in, {op}); }

StageSpec Merged(const Shape& in, const std::vector<StageOp>& convs) {
  StageSpec spec = Concurrent(in, convs);
  spec.strategy = Strategy::kMerge;
  return spec;
}

double LatencyMs(Backend& backend, const StageSpec& stage, int batch = 1) {
  const MeasureResult result = backend.Measure(stage, batch, MeasureSettings{});
  EXPECT_TRUE(result.ok()) << result.error_message;
  EXPECT_GT(result.median_ms, 0);
  return result.median_ms;
}

const Shape kLargeInput{256, 56, 56};
const Shape kSmallInput{64, 7, 7};

TEST(SimBackendTest, EveryModelIsCreatableAndSaysItIsSimulated) {
  for (const std::string& model : kModels) {
    SCOPED_TRACE(model);
    const std::unique_ptr<Backend> backend = CreateSimBackend(model);
    const DeviceInfo& device = backend->Device();
    EXPECT_TRUE(device.simulated);
    EXPECT_EQ(device.backend, "sim");
    EXPECT_EQ(device.name, "sim:" + model);
    EXPECT_NE(device.fingerprint.find("sim"), std::string::npos);
    EXPECT_NE(device.fingerprint.find(model), std::string::npos);
    EXPECT_EQ(BuiltinRegistry().OpenBackend("sim:" + model)->Device().fingerprint,
              device.fingerprint);
  }
}

TEST(SimBackendTest, SpecTableListsEveryModelWithPositiveFigures) {
  ASSERT_EQ(SimGpuSpecs().size(), kModels.size());
  for (const SimGpuSpec& gpu : SimGpuSpecs()) {
    SCOPED_TRACE(gpu.name);
    EXPECT_GT(gpu.sm_count, 0);
    EXPECT_GT(gpu.peak_tflops, 0);
    EXPECT_GT(gpu.bandwidth_gbs, 0);
    EXPECT_GE(gpu.launch_us, 3);
    EXPECT_LE(gpu.launch_us, 8);
    EXPECT_GT(gpu.memory_gib, 0);
  }
}

TEST(SimBackendTest, EachModelHasItsOwnFingerprint) {
  for (size_t i = 0; i < kModels.size(); ++i) {
    for (size_t j = i + 1; j < kModels.size(); ++j) {
      EXPECT_NE(CreateSimBackend(kModels[i])->Device().fingerprint,
                CreateSimBackend(kModels[j])->Device().fingerprint);
    }
  }
}

TEST(SimBackendTest, NoisyDevicesHaveADifferentFingerprintThanExactOnes) {
  EXPECT_NE(CreateSimBackend("v100", {.noise = 0.05})->Device().fingerprint,
            CreateSimBackend("v100")->Device().fingerprint);
}

TEST(SimBackendTest, UnknownModelThrowsListingTheKnownOnes) {
  try {
    CreateSimBackend("gtx480");
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("v100"), std::string::npos) << e.what();
  }
  EXPECT_THROW(BuiltinRegistry().OpenBackend("sim:gtx480"), Error);
}

TEST(SimBackendTest, UnknownBackendNameThrowsListingTheValidNames) {
  try {
    BuiltinRegistry().OpenBackend("tpu");
    FAIL() << "expected ios::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("h100"), std::string::npos) << e.what();
  }
}

// (cpu is built with oneDNN: tests/devices/backend_conformance_test.cc.)
// The cuda backend lives in ios-worker and ios-run only (the coordinator,
// which shares BuiltinRegistry, must start without CUDA): the message says
// where to run it.
TEST(SimBackendTest, TheCudaBackendIsReferredToTheWorker) {
  for (const std::string name : {"cuda", "cuda:1", "cuda,math=tf32"}) {
    try {
      BuiltinRegistry().OpenBackend(name);
      FAIL() << "expected ios::Error for " << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ios-worker --backend " + name), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("--bind"), std::string::npos) << e.what();
    }
  }
}

TEST(SimBackendTest, SameStageAndBatchGiveTheSameResult) {
  const StageSpec stage =
      Concurrent(kLargeInput, {ConvOnInput(kLargeInput, 128, 3), ConvOnInput(kLargeInput, 64, 1)});
  const MeasureResult first = CreateSimBackend("v100")->Measure(stage, 4, MeasureSettings{});
  const MeasureResult second = CreateSimBackend("v100")->Measure(stage, 4, MeasureSettings{});
  ASSERT_TRUE(first.ok()) << first.error_message;
  EXPECT_EQ(first.median_ms, second.median_ms);
  EXPECT_EQ(first.spread_ms, 0);
  EXPECT_EQ(first.samples, MeasureSettings{}.repeat * MeasureSettings{}.number);
}

TEST(SimBackendTest, DoublingTheBatchCostsMoreForABigConv) {
  const std::unique_ptr<Backend> backend = CreateSimBackend("v100");
  const StageSpec stage = Single(kLargeInput, ConvOnInput(kLargeInput, 256, 3));
  EXPECT_GT(LatencyMs(*backend, stage, 2), LatencyMs(*backend, stage, 1));
}

// HIOS Fig. 1: two large convolutions each fill the GPU, so running them at
// once only adds contention; two small ones leave most SMs idle and overlap.
TEST(SimBackendTest, TwoLargeConvsRunConcurrentlyTakeAtLeastTheirSequentialSum) {
  const StageOp conv = ConvOnInput(kLargeInput, 256, 3);
  for (const std::string& model : kModels) {
    SCOPED_TRACE(model);
    const std::unique_ptr<Backend> backend = CreateSimBackend(model);
    const double sequential = 2 * LatencyMs(*backend, Single(kLargeInput, conv), 8);
    EXPECT_GE(LatencyMs(*backend, Concurrent(kLargeInput, {conv, conv}), 8), sequential);
  }
}

TEST(SimBackendTest, TwoSmallConvsRunConcurrentlyTakeClearlyLessThanTheirSum) {
  const StageOp conv = ConvOnInput(kSmallInput, 64, 3);
  for (const std::string& model : kModels) {
    SCOPED_TRACE(model);
    const std::unique_ptr<Backend> backend = CreateSimBackend(model);
    const double sequential = 2 * LatencyMs(*backend, Single(kSmallInput, conv));
    EXPECT_LT(LatencyMs(*backend, Concurrent(kSmallInput, {conv, conv})), 0.8 * sequential);
  }
}

TEST(SimBackendTest, MergingTwoPointwiseConvsOnOneInputBeatsRunningThemSequentially) {
  const Shape in{256, 28, 28};
  const StageOp a = ConvOnInput(in, 64, 1);
  const StageOp b = ConvOnInput(in, 96, 1);
  for (const std::string& model : kModels) {
    SCOPED_TRACE(model);
    const std::unique_ptr<Backend> backend = CreateSimBackend(model);
    const double sequential =
        LatencyMs(*backend, Single(in, a)) + LatencyMs(*backend, Single(in, b));
    EXPECT_LT(LatencyMs(*backend, Merged(in, {a, b})), sequential);
  }
}

TEST(SimBackendTest, MergeZeroPadsToTheLargestKernel) {
  const Shape in{128, 28, 28};
  const std::unique_ptr<Backend> backend = CreateSimBackend("v100");
  const double pointwise =
      LatencyMs(*backend, Merged(in, {ConvOnInput(in, 128, 1), ConvOnInput(in, 128, 1)}), 8);
  const double mixed =
      LatencyMs(*backend, Merged(in, {ConvOnInput(in, 128, 1), ConvOnInput(in, 128, 5)}), 8);
  EXPECT_GT(mixed, pointwise);
}

TEST(SimBackendTest, AnAbsurdBatchIsAnOutOfMemoryResultNotAThrow) {
  const std::unique_ptr<Backend> backend = CreateSimBackend("h100");
  MeasureResult result;
  EXPECT_NO_THROW(result = backend->Measure(Single(kLargeInput, ConvOnInput(kLargeInput, 256, 3)),
                                            1 << 20, MeasureSettings{}));
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.error, MeasureError::kOutOfMemory);
  EXPECT_FALSE(result.error_message.empty());
}

TEST(SimBackendTest, AMalformedStageIsAnErrorResultNotAThrow) {
  StageOp conv = ConvOnInput(kSmallInput, 64, 1);
  conv.inputs[0][0].index = 3;  // there is only external 0
  const MeasureResult result =
      CreateSimBackend("v100")->Measure(Single(kSmallInput, conv), 1, MeasureSettings{});
  EXPECT_EQ(result.error, MeasureError::kUnsupported);
  EXPECT_FALSE(result.error_message.empty());
}

TEST(SimBackendTest, NoiseChangesResultsButIsReproduciblePerSeed) {
  const StageSpec stage = Single(kLargeInput, ConvOnInput(kLargeInput, 128, 3));
  const MeasureSettings settings;
  const auto measure = [&](SimOptions options) {
    return CreateSimBackend("a100", options)->Measure(stage, 2, settings);
  };
  const MeasureResult exact = measure({});
  const MeasureResult seed1 = measure({.noise = 0.05, .noise_seed = 1});
  const MeasureResult again = measure({.noise = 0.05, .noise_seed = 1});
  const MeasureResult seed2 = measure({.noise = 0.05, .noise_seed = 2});
  ASSERT_TRUE(seed1.ok()) << seed1.error_message;
  EXPECT_NE(seed1.median_ms, exact.median_ms);
  EXPECT_EQ(seed1.median_ms, again.median_ms);
  EXPECT_EQ(seed1.spread_ms, again.spread_ms);
  EXPECT_NE(seed1.median_ms, seed2.median_ms);
  EXPECT_GT(seed1.spread_ms, 0);
  EXPECT_EQ(seed1.samples, settings.repeat * settings.number);
  EXPECT_NEAR(seed1.median_ms, exact.median_ms, 0.2 * exact.median_ms);
}

TEST(SimBackendTest, ADelayDoesNotChangeTheResult) {
  const StageSpec stage = Single(kSmallInput, ConvOnInput(kSmallInput, 64, 3));
  EXPECT_EQ(LatencyMs(*CreateSimBackend("v100", {.delay_ms = 1}), stage),
            LatencyMs(*CreateSimBackend("v100"), stage));
}

TEST(SimBackendTest, NewerDevicesRunABigConvFaster) {
  const StageSpec stage = Single(kLargeInput, ConvOnInput(kLargeInput, 256, 3));
  const double k80 = LatencyMs(*CreateSimBackend("k80"), stage, 8);
  const double v100 = LatencyMs(*CreateSimBackend("v100"), stage, 8);
  const double h100 = LatencyMs(*CreateSimBackend("h100"), stage, 8);
  EXPECT_GT(k80, v100);
  EXPECT_GT(v100, h100);
}

TEST(SimBackendTest, ASequentialOpCostsTheSameAsItsChainRunAsOneGroup) {
  const Shape in{64, 28, 28};
  OpParams relu_conv;
  relu_conv.kind = OpKind::kSequential;
  relu_conv.chain = {ReluOp(), ConvOp(32, 3)};
  const Shape out{32, 28, 28};
  const StageSpec fused = Single(in, StageOp{relu_conv, {{External(in)}}, out});

  StageSpec split;
  split.externals = {in};
  split.groups = {{StageOp{ReluOp(), {{External(in)}}, in},
                   StageOp{ConvOp(32, 3), {{SliceRef{false, 0, 0, in.c}}}, out}}};

  const std::unique_ptr<Backend> backend = CreateSimBackend("2080ti");
  EXPECT_DOUBLE_EQ(LatencyMs(*backend, fused), LatencyMs(*backend, split));
}

TEST(SimBackendTest, AnIdentityThatOnlyForwardsCostsLessThanOneThatAdds) {
  const Shape in{64, 28, 28};
  OpParams identity;
  identity.kind = OpKind::kIdentity;
  const SliceRef low{true, 0, 0, 32};
  const SliceRef high{true, 0, 32, 64};
  const Shape half{32, 28, 28};
  const std::unique_ptr<Backend> backend = CreateSimBackend("v100");
  const double forward = LatencyMs(*backend, Single(in, StageOp{identity, {{low}}, half}));
  const double add = LatencyMs(*backend, Single(in, StageOp{identity, {{low, high}}, half}));
  const double relu = LatencyMs(*backend, Single(in, StageOp{ReluOp(), {{External(in)}}, in}));
  EXPECT_LT(forward, add);
  EXPECT_LT(forward, relu);
}

TEST(SimBackendTest, MoreGroupsOfTinyOpsPayMoreSerializedLaunches) {
  const StageOp conv = ConvOnInput(kSmallInput, 16, 1);
  const std::unique_ptr<Backend> backend = CreateSimBackend("v100");
  const double two = LatencyMs(*backend, Concurrent(kSmallInput, {conv, conv}));
  const double eight = LatencyMs(
      *backend, Concurrent(kSmallInput, {conv, conv, conv, conv, conv, conv, conv, conv}));
  EXPECT_GT(eight, two);
}

// docs/simulator.md walks through these four numbers by hand; this keeps the
// page true. Mixed_5b's first two 1x1 convs (bias, relu) of a 192x35x35 input.
TEST(SimBackendTest, TheWorkedExampleOfTheSimulatorPageHolds) {
  const std::unique_ptr<Backend> v100 = CreateSimBackend("v100");
  const Shape in{192, 35, 35};
  const StageOp a = ConvOnInput(in, 64, 1);
  const StageOp c = ConvOnInput(in, 48, 1);
  const double us = 1000.0;
  EXPECT_NEAR(LatencyMs(*v100, Single(in, a)) * us, 30.03, 0.01);
  EXPECT_NEAR(LatencyMs(*v100, Single(in, c)) * us, 24.52, 0.01);
  EXPECT_NEAR(LatencyMs(*v100, Concurrent(in, {a, c})) * us, 30.03, 0.01);
  EXPECT_NEAR(LatencyMs(*v100, Merged(in, {a, c})) * us, 27.28, 0.01);
}

}  // namespace
}  // namespace ios::devices
