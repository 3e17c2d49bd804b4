// The cpu device (oneDNN): every op kind against values worked out by hand
// (padding, stride, dilation, groups and depthwise edge cases, batch 1 and
// 2, views at channel offsets), concurrent lanes equal to one lane, out of
// memory as an error, and the core-split policy and option grammar. Against
// the reference device: cpu_device_reference_test.cc.
#include "devices/cpu/cpu_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>

#include "common/activation.h"
#include "common/limits.h"
#include "common/stage.h"
#include "devices/cpu/cpu_lanes.h"
#include "exec/program.h"
#include "exec/weights.h"
#include "tests/devices/cpu_device_testing.h"
#include "tests/testing/ops.h"

namespace ios::devices {
namespace {

using cpu_testing::CpuDeviceTest;
using cpu_testing::ProgramBuilder;
using ::ios::testing::PoolOp;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::Pointwise;

exec::View Whole(const exec::Program& program, int buffer) {
  return {buffer, 0, program.buffers[buffer].shape.c};
}

//! A convolution step; the convolution has a bias exactly when `weights` do.
exec::Step ConvStep(ProgramBuilder& b, ConvParams conv, exec::View in, exec::View out,
                    exec::ConvWeights weights) {
  exec::Step step;
  step.op.kind = OpKind::kConv;
  conv.bias = !weights.bias.empty();
  step.op.conv = conv;
  step.inputs = {in};
  step.output = out;
  step.weights = b.Weights(std::move(weights));
  step.label = "conv";
  return step;
}

exec::Step OpStep(OpParams op, std::vector<exec::View> inputs, exec::View out) {
  exec::Step step;
  step.op = std::move(op);
  step.inputs = std::move(inputs);
  step.output = out;
  step.label = ToString(step.op.kind);
  return step;
}

ConvParams Conv(int out, int kernel, int pad = 0, int stride = 1, int dilation = 1, int groups = 1,
                Activation act = Activation::kNone) {
  ConvParams c;
  c.out_channels = out;
  c.kernel = {kernel, kernel};
  c.padding = {pad, pad};
  c.stride = {stride, stride};
  c.dilation = {dilation, dilation};
  c.groups = groups;
  c.act = act;
  return c;
}

exec::ConvWeights Filled(int out, int in_per_group, int kernel, float value, float bias) {
  exec::ConvWeights w;
  w.out_channels = out;
  w.in_per_group = in_per_group;
  w.kernel_h = w.kernel_w = kernel;
  w.kernel.assign(size_t(out) * in_per_group * kernel * kernel, value);
  if (bias != 0) w.bias.assign(out, bias);
  return w;
}

std::vector<float> Ramp(size_t n, float start = 0, float step = 1) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * float(i);
  return v;
}

std::vector<float> RunOnce(exec::Device& device, const exec::Program& program, int batch,
                           const std::vector<std::vector<float>>& inputs, exec::View out) {
  auto prepared = device.Prepare(program, batch);
  for (size_t i = 0; i < inputs.size(); ++i) prepared->Write(program.inputs.at(i), inputs[i]);
  EXPECT_GE(prepared->TimedRuns(2), 0);
  return prepared->Read(out);
}

TEST_F(CpuDeviceTest, PaddedConvolutionWithBiasCountsTheWindowInsideTheImageAtBatch2) {
  ProgramBuilder b;
  const int in = b.Buffer({1, 3, 3}), out = b.Buffer({1, 3, 3});
  b.program.inputs = {in};
  b.Add(ConvStep(b, Conv(1, 3, 1), Whole(b.program, in), Whole(b.program, out),
                 Filled(1, 1, 3, 1.f, 0.5f)));
  std::vector<float> x(9, 1.f);
  x.resize(18, 2.f);
  const auto y = RunOnce(*device_, b.program, 2, {x}, Whole(b.program, out));
  EXPECT_THAT(y, ElementsAre(4.5, 6.5, 4.5, 6.5, 9.5, 6.5, 4.5, 6.5, 4.5,  //
                             8.5, 12.5, 8.5, 12.5, 18.5, 12.5, 8.5, 12.5, 8.5));
}

TEST_F(CpuDeviceTest, DilatedConvolutionReadsEveryOtherPixel) {
  ProgramBuilder b;
  const int in = b.Buffer({1, 5, 5}), out = b.Buffer({1, 1, 1});
  b.program.inputs = {in};
  b.Add(ConvStep(b, Conv(1, 3, 0, 1, 2), Whole(b.program, in), Whole(b.program, out),
                 Filled(1, 1, 3, 1.f, 0.f)));
  // Pixels (i, j) for i, j in {0, 2, 4} of the ramp 5i + j.
  EXPECT_THAT(RunOnce(*device_, b.program, 1, {Ramp(25)}, Whole(b.program, out)),
              ElementsAre(108.f));
}

TEST_F(CpuDeviceTest, StridedConvolutionWithReluPostOpClampsNegatives) {
  ProgramBuilder b;
  const int in = b.Buffer({1, 4, 4}), out = b.Buffer({2, 2, 2});
  b.program.inputs = {in};
  exec::ConvWeights w = Filled(2, 1, 2, 1.f, 0.f);
  std::fill(w.kernel.begin() + 4, w.kernel.end(), -1.f);  // second filter negative
  b.Add(ConvStep(b, Conv(2, 2, 0, 2, 1, 1, Activation::kRelu), Whole(b.program, in),
                 Whole(b.program, out), w));
  // 2x2 windows of the ramp 4i + j: sums 10, 18, 42, 50.
  EXPECT_THAT(RunOnce(*device_, b.program, 1, {Ramp(16)}, Whole(b.program, out)),
              ElementsAre(10, 18, 42, 50, 0, 0, 0, 0));
}

TEST_F(CpuDeviceTest, DepthwiseAndGroupedConvolutionsKeepChannelsApart) {
  for (const int groups : {2, 4}) {
    SCOPED_TRACE(groups);
    ProgramBuilder b;
    const int in = b.Buffer({4, 2, 2}), out = b.Buffer({4, 2, 2});
    b.program.inputs = {in};
    exec::ConvWeights w = Filled(4, 4 / groups, 1, 0.f, 0.f);
    // Output channel o reads only its own group: weight o + 1 on each input.
    for (int o = 0; o < 4; ++o) {
      for (int i = 0; i < 4 / groups; ++i) w.kernel[o * (4 / groups) + i] = float(o + 1);
    }
    b.Add(ConvStep(b, Conv(4, 1, 0, 1, 1, groups), Whole(b.program, in), Whole(b.program, out), w));
    std::vector<float> x(16);
    for (int c = 0; c < 4; ++c) std::fill(x.begin() + 4 * c, x.begin() + 4 * c + 4, float(c));
    std::vector<float> expected(16);
    const int per = 4 / groups;
    for (int o = 0; o < 4; ++o) {
      const int group = o / (4 / groups);
      float sum = 0;
      for (int i = 0; i < per; ++i) sum += float(group * per + i);
      std::fill(expected.begin() + 4 * o, expected.begin() + 4 * o + 4, float(o + 1) * sum);
    }
    EXPECT_THAT(RunOnce(*device_, b.program, 1, {x}, Whole(b.program, out)),
                ElementsAreArray(expected));
  }
}

TEST_F(CpuDeviceTest, ConvolutionReadsAndWritesChannelOffsetViewsAtBatch2) {
  ProgramBuilder b;
  const int in = b.Buffer({4, 2, 2}), out = b.Buffer({5, 2, 2});
  b.program.inputs = {in};
  // Sums input channels 1 and 2 into output channels 2 and 3 (+1 and +2 bias).
  exec::ConvWeights w = Filled(2, 2, 1, 1.f, 0.f);
  w.bias = {1.f, 2.f};
  b.Add(ConvStep(b, Conv(2, 1), {in, 1, 2}, {out, 2, 2}, w));
  const std::vector<float> x = Ramp(32);  // sample n, channel c, pixel p: 16n + 4c + p
  const auto y = RunOnce(*device_, b.program, 2, {x}, Whole(b.program, out));
  std::vector<float> expected(40, 0.f);
  for (int n = 0; n < 2; ++n) {
    for (int p = 0; p < 4; ++p) {
      const float sum = x[16 * n + 4 + p] + x[16 * n + 8 + p];
      expected[20 * n + 8 + p] = sum + 1;
      expected[20 * n + 12 + p] = sum + 2;
    }
  }
  EXPECT_THAT(y, ElementsAreArray(expected));
}

TEST_F(CpuDeviceTest, AveragePoolingCountsPaddingInTheDivisor) {
  ProgramBuilder b;
  const int in = b.Buffer({1, 3, 3}), out = b.Buffer({1, 3, 3});
  b.program.inputs = {in};
  b.Add(OpStep(PoolOp(PoolType::kAvg, 3, 1, 1), {Whole(b.program, in)}, Whole(b.program, out)));
  const float c = 4.f / 9, e = 6.f / 9;
  EXPECT_THAT(RunOnce(*device_, b.program, 1, {std::vector<float>(9, 1.f)}, Whole(b.program, out)),
              Pointwise(FloatNear(1e-6), {c, e, c, e, 1.f, e, c, e, c}));
}

TEST_F(CpuDeviceTest, MaxPoolingIgnoresPaddingAndStrides) {
  ProgramBuilder b;
  const int in = b.Buffer({1, 4, 4}), out = b.Buffer({1, 2, 2});
  b.program.inputs = {in};
  b.Add(OpStep(PoolOp(PoolType::kMax, 3, 2, 1), {Whole(b.program, in)}, Whole(b.program, out)));
  // Negative ramp: the padding (were it zero) would win everywhere.
  EXPECT_THAT(RunOnce(*device_, b.program, 1, {Ramp(16, -16)}, Whole(b.program, out)),
              ElementsAre(-16 + 5, -16 + 7, -16 + 13, -16 + 15));
}

TEST_F(CpuDeviceTest, GlobalPoolingReducesEachChannelOfEachSample) {
  for (const PoolType type : {PoolType::kGlobalMax, PoolType::kGlobalAvg}) {
    ProgramBuilder b;
    const int in = b.Buffer({2, 2, 3}), out = b.Buffer({2, 1, 1});
    b.program.inputs = {in};
    b.Add(OpStep(PoolOp(type, 1, 1, 0), {Whole(b.program, in)}, Whole(b.program, out)));
    const auto y = RunOnce(*device_, b.program, 2, {Ramp(24)}, Whole(b.program, out));
    if (type == PoolType::kGlobalMax) {
      EXPECT_THAT(y, ElementsAre(5, 11, 17, 23));
    } else {
      EXPECT_THAT(y, ElementsAre(2.5, 8.5, 14.5, 20.5));
    }
  }
}

TEST_F(CpuDeviceTest, ActivationsMatchTheirFormulasBetweenViewsOfDifferentBuffers) {
  // The formulas written out here, not taken from common/activation.h.
  const auto formula = [](Activation act, float v) -> float {
    const float relu6 = std::min(std::max(v, 0.f), 6.f);
    switch (act) {
      case Activation::kRelu:
        return std::max(v, 0.f);
      case Activation::kSigmoid:
        return 1 / (1 + std::exp(-v));
      case Activation::kTanh:
        return std::tanh(v);
      case Activation::kRelu6:
        return relu6;
      case Activation::kHardSwish:
        return v * std::min(std::max(v + 3, 0.f), 6.f) / 6;
      case Activation::kSilu:
        return v / (1 + std::exp(-v));
      case Activation::kHardSigmoid:
        return std::min(std::max(v / 6 + 0.5f, 0.f), 1.f);
      case Activation::kLeakyRelu:
        return v > 0 ? v : 0.01f * v;
      case Activation::kGelu:
        return 0.5f * v * (1 + std::erf(v / std::sqrt(2.f)));
      case Activation::kGeluTanh:
        return 0.5f * v * (1 + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
      case Activation::kNone:
        break;
    }
    return v;
  };
  for (const ActivationKind& kind : ActivationKinds()) {
    const Activation act = kind.id;
    if (act == Activation::kNone) continue;
    SCOPED_TRACE(ToString(act));
    ProgramBuilder b;
    const int in = b.Buffer({2, 1, 3}), out = b.Buffer({3, 1, 3});
    b.program.inputs = {in};
    OpParams op;
    op.kind = OpKind::kActivation;
    op.act = act;
    b.Add(OpStep(op, {{in, 1, 1}}, {out, 1, 1}));
    const std::vector<float> x = Ramp(12, -3);  // batch 2
    const auto y = RunOnce(*device_, b.program, 2, {x}, Whole(b.program, out));
    std::vector<float> expected(18, 0.f);
    for (int n = 0; n < 2; ++n) {
      for (int p = 0; p < 3; ++p) {
        const float v = x[6 * n + 3 + p];
        expected[9 * n + 3 + p] = formula(act, v);
      }
    }
    EXPECT_THAT(y, Pointwise(FloatNear(1e-5), expected));
  }
}

TEST_F(CpuDeviceTest, EltwiseCombinesAnyNumberOfViews) {
  for (const EltwiseType type : {EltwiseType::kAdd, EltwiseType::kMul}) {
    ProgramBuilder b;
    const int in = b.Buffer({3, 1, 2}), out = b.Buffer({1, 1, 2});
    b.program.inputs = {in};
    OpParams op;
    op.kind = OpKind::kEltwise;
    op.eltwise = type;
    b.Add(OpStep(op, {{in, 0, 1}, {in, 1, 1}, {in, 2, 1}}, Whole(b.program, out)));
    const auto y = RunOnce(*device_, b.program, 1, {Ramp(6, 1)}, Whole(b.program, out));
    if (type == EltwiseType::kAdd) {
      EXPECT_THAT(y, ElementsAre(1 + 3 + 5, 2 + 4 + 6));
    } else {
      EXPECT_THAT(y, ElementsAre(1 * 3 * 5, 2 * 4 * 6));
    }
  }
}

TEST_F(CpuDeviceTest, IdentityCopiesIntoAChannelOffsetAndSumsSeveralInputs) {
  ProgramBuilder b;
  const int in = b.Buffer({2, 1, 2}), out = b.Buffer({3, 1, 2});
  b.program.inputs = {in};
  OpParams op;
  op.kind = OpKind::kIdentity;
  b.Add(OpStep(op, {Whole(b.program, in)}, {out, 0, 2}));
  b.Add(OpStep(op, {{in, 0, 1}, {in, 1, 1}}, {out, 2, 1}));
  const auto y = RunOnce(*device_, b.program, 2, {Ramp(8)}, Whole(b.program, out));
  EXPECT_THAT(y, ElementsAre(0, 1, 2, 3, 0 + 2, 1 + 3, 4, 5, 6, 7, 4 + 6, 5 + 7));
}

//! `lanes` chains of conv 3x3 -> relu -> conv 1x1, on one stage with one
//! lane per chain (concurrent) or all in one lane (sequential).
exec::Program Chains(int lanes, bool concurrent) {
  ProgramBuilder b;
  const int in = b.Buffer({3, 6, 6});
  b.program.inputs = {in};
  for (int i = 0; i < lanes; ++i) {
    const int mid = b.Buffer({4, 6, 6}), act = b.Buffer({4, 6, 6}), out = b.Buffer({2, 6, 6});
    exec::ConvWeights w1 = Filled(4, 3, 3, 0.f, 0.1f * float(i + 1));
    for (size_t k = 0; k < w1.kernel.size(); ++k) w1.kernel[k] = float((k * 7 + i) % 5) - 2;
    exec::ConvWeights w2 = Filled(2, 4, 1, 0.5f - 0.25f * float(i), 0.f);
    const int lane = concurrent ? i : 0;
    b.Add(ConvStep(b, Conv(4, 3, 1), Whole(b.program, in), Whole(b.program, mid), w1), lane);
    OpParams relu;
    relu.kind = OpKind::kActivation;
    b.Add(OpStep(relu, {Whole(b.program, mid)}, Whole(b.program, act)), lane);
    b.Add(ConvStep(b, Conv(2, 1), Whole(b.program, act), Whole(b.program, out), w2), lane);
    b.program.outputs.push_back(Whole(b.program, out));
  }
  return b.program;
}

TEST_F(CpuDeviceTest, ConcurrentLanesComputeWhatOneLaneComputes) {
  for (const int lanes : {2, 4}) {
    for (const int batch : {1, 2}) {
      SCOPED_TRACE(std::to_string(lanes) + " lanes, batch " + std::to_string(batch));
      const exec::Program sequential = Chains(lanes, false), concurrent = Chains(lanes, true);
      const std::vector<float> x = Ramp(size_t(batch) * 3 * 36, -2, 0.03f);
      auto one = device_->Prepare(sequential, batch);
      auto many = device_->Prepare(concurrent, batch);
      one->Write(0, x);
      many->Write(0, x);
      one->TimedRuns(1);
      many->TimedRuns(3);
      for (size_t o = 0; o < sequential.outputs.size(); ++o) {
        EXPECT_THAT(many->Read(concurrent.outputs[o]),
                    Pointwise(FloatNear(1e-4), one->Read(sequential.outputs[o])));
      }
    }
  }
}

TEST_F(CpuDeviceTest, StorageBeyondPhysicalMemoryIsAnOutOfMemoryError) {
  ProgramBuilder b;
  const int in = b.Buffer({256, 224, 224}), out = b.Buffer({256, 224, 224});
  b.program.inputs = {in};
  b.Add(ConvStep(b, Conv(256, 3, 1), Whole(b.program, in), Whole(b.program, out),
                 Filled(256, 256, 3, 0.f, 0.f)));
  try {
    device_->Prepare(b.program, limits::kMaxBatchSize);
    FAIL() << "no error";
  } catch (const exec::ExecError& e) {
    EXPECT_EQ(e.kind(), MeasureError::kOutOfMemory);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("physical memory"));
  }
}

TEST_F(CpuDeviceTest, FingerprintNamesTheCpuAndIsStableAcrossInstances) {
  const DeviceInfo& info = device_->Info();
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_TRUE(info.name.starts_with("cpu:"));
  EXPECT_FALSE(info.simulated);
  EXPECT_TRUE(info.fingerprint.starts_with("cpu-v2|")) << info.fingerprint;
  for (const char* field : {"model=", "isa=", "cores=", "threads=", "onednn=2.6"}) {
    EXPECT_THAT(info.fingerprint, ::testing::HasSubstr(field));
  }
  EXPECT_EQ(MakeCpuDevice()->Info().fingerprint, info.fingerprint);
  EXPECT_NE(MakeCpuDevice({.threads = 7})->Info().fingerprint, info.fingerprint);
}

TEST(CpuSplitCoresTest, LanesShareTheBudgetAndArePinnedToDisjointCoresWhenTheyFit) {
  const std::vector<int> cpus{0, 1, 2, 3};
  EXPECT_THAT(SplitCores(4, cpus, 1), ElementsAre(LaneShare{4, {}}));
  EXPECT_THAT(SplitCores(4, cpus, 2), ElementsAre(LaneShare{2, {0, 1}}, LaneShare{2, {2, 3}}));
  EXPECT_THAT(SplitCores(3, cpus, 2), ElementsAre(LaneShare{2, {0, 1}}, LaneShare{1, {2}}));
  EXPECT_THAT(SplitCores(2, cpus, 4),
              ElementsAre(LaneShare{1, {}}, LaneShare{1, {}}, LaneShare{1, {}}, LaneShare{1, {}}));
  // A budget beyond the cores: shared, not pinned.
  EXPECT_THAT(SplitCores(8, cpus, 2), ElementsAre(LaneShare{4, {}}, LaneShare{4, {}}));
  EXPECT_FALSE(AllowedCpus().empty());
}

TEST(CpuLaneThreadTest, RethrowsAJobsExceptionOnWaitAndKeepsServing) {
  LaneThread thread(LaneShare{1, {}});
  int runs = 0;
  const std::function<void()> fails = [&] {
    ++runs;
    throw Error("lane failed");
  };
  const std::function<void()> works = [&] { ++runs; };
  thread.Post(fails);
  EXPECT_THROW(thread.Wait(), Error);
  thread.Post(works);
  EXPECT_NO_THROW(thread.Wait());
  EXPECT_NO_THROW(thread.Wait());  // nothing posted: returns at once
  EXPECT_EQ(runs, 2);
}

TEST(CpuOptionsTest, ParsesTheThreadBudgetAndRefusesAnythingElse) {
  EXPECT_EQ(ParseCpuOptions("cpu").threads, 0);
  EXPECT_EQ(ParseCpuOptions("cpu,threads=3").threads, 3);
  for (const char* bad : {"cpu,", "cpu,threads=0", "cpu,threads=x", "cpu,cores=2", "cpux"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(ParseCpuOptions(bad), Error);
  }
}

TEST(CpuOptionsTest, ParsesTheCoresOfADeviceAndRefusesABadList) {
  EXPECT_TRUE(ParseCpuOptions("cpu").cpus.empty());
  EXPECT_EQ(ParseCpuOptions("cpu,cpus=1").cpus, (std::vector<int>{1}));
  EXPECT_EQ(ParseCpuOptions("cpu,threads=4,cpus=0-2+5").cpus, (std::vector<int>{0, 1, 2, 5}));
  for (const char* bad : {"cpu,cpus=", "cpu,cpus=2-1", "cpu,cpus=1+1", "cpu,cpus=3+1",
                          "cpu,cpus=0+", "cpu,cpus=a", "cpu,cpus=-1", "cpu,cpus=0-4096"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(ParseCpuOptions(bad), Error);
  }
}

TEST(CpuOptionsTest, ADeviceOnItsOwnCoresNamesThemForItsDrivingThread) {
  const std::vector<int> allowed = AllowedCpus();
  CpuOptions options;
  options.cpus = {allowed.back()};
  EXPECT_EQ(MakeCpuDevice(options)->HostCpus(), options.cpus);
  EXPECT_TRUE(MakeCpuDevice()->HostCpus().empty());
  options.cpus = {allowed.back() + 1};
  EXPECT_THAT(
      [&] { MakeCpuDevice(options); },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
          "cpus: core " + std::to_string(allowed.back() + 1) + " is not one this process")));
}

}  // namespace
}  // namespace ios::devices
