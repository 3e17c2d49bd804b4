// The cpu device (oneDNN): every op kind against values worked out by hand
// and against the naive reference device (padding, stride, dilation, groups
// and depthwise edge cases, batch 1 and 2, views at channel offsets), stage
// programs with concurrent lanes and merged convolutions, concurrent lanes
// equal to one lane, out of memory as an error, and the core-split policy
// and option grammar.
#include "devices/cpu/cpu_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>

#include "common/activation.h"
#include "common/limits.h"
#include "common/op_kinds.h"
#include "common/stage.h"
#include "devices/cpu/cpu_lanes.h"
#include "exec/program.h"
#include "exec/weights.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/ops.h"

namespace ios::devices {
namespace {

using ::ios::testing::PoolOp;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::Pointwise;

//! Builds a program of one stage: each buffer in a slot of its own.
struct ProgramBuilder {
  exec::Program program;

  int Buffer(Shape shape) {
    const int slot = static_cast<int>(program.slot_elements.size());
    program.buffers.push_back({shape, slot, "b" + std::to_string(program.buffers.size())});
    program.slot_elements.push_back(int64_t{shape.c} * shape.h * shape.w);
    return static_cast<int>(program.buffers.size()) - 1;
  }
  int Weights(exec::ConvWeights weights) {
    program.weights.push_back(std::move(weights));
    return static_cast<int>(program.weights.size()) - 1;
  }
  exec::Step& Add(exec::Step step, int lane = 0, int stage = 0) {
    if (program.stages.size() <= size_t(stage)) program.stages.resize(stage + 1);
    auto& lanes = program.stages[stage].lanes;
    if (lanes.size() <= size_t(lane)) lanes.resize(lane + 1);
    lanes[lane].steps.push_back(std::move(step));
    return lanes[lane].steps.back();
  }
};

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

class CpuDeviceTest : public ::testing::Test {
 protected:
  std::unique_ptr<exec::Device> device_ = MakeCpuDevice();
};

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

// ---- Against the reference device -------------------------------------------

//! Runs `program` on the cpu device (twice: runs must not depend on each
//! other) and on the reference device with the same seeded inputs, and
//! compares every output.
void ExpectSameAsReference(exec::Device& cpu, const exec::Program& program, int batch,
                           const std::string& what) {
  SCOPED_TRACE(what + " at batch " + std::to_string(batch));
  try {
    exec::Validate(program);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  auto mine = cpu.Prepare(program, batch);
  auto reference = exec::MakeReferenceDevice()->Prepare(program, batch);
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const Shape& s = program.buffers[program.inputs[i]].shape;
    const std::vector<float> values =
        exec::testing::Ramp(exec::testing::Elements(s, batch), 0.13f, 0.05f * float(i));
    mine->Write(program.inputs[i], values);
    reference->Write(program.inputs[i], values);
  }
  mine->TimedRuns(2);
  reference->TimedRuns(1);
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    exec::testing::ExpectClose(mine->Read(program.outputs[o]), reference->Read(program.outputs[o]),
                               1e-4, what + " output " + std::to_string(o));
  }
}

//! One op whose inputs are views at channel offset 1 of wider buffers and
//! whose output is a view at channel offset 2 of a wider buffer (or whole
//! buffers when `offsets` is false).
exec::Program OneOp(const OpParams& op, const std::vector<Shape>& in_shapes, bool offsets) {
  ProgramBuilder b;
  exec::Step step;
  step.op = op;
  step.label = Describe(op);
  const int in_pad = offsets ? 3 : 0, out_pad = offsets ? 2 : 0;
  for (const Shape& s : in_shapes) {
    const int buffer = b.Buffer({s.c + in_pad, s.h, s.w});
    b.program.inputs.push_back(buffer);
    step.inputs.push_back({buffer, offsets ? 1 : 0, s.c});
  }
  // A step's identity of several views sums them (the graph's would concatenate).
  const Shape out =
      op.kind == OpKind::kIdentity ? in_shapes[0] : InferOpOutput(op, in_shapes, step.label);
  step.output = {b.Buffer({out.c + out_pad, out.h, out.w}), out_pad, out.c};
  if (op.kind == OpKind::kConv) {
    step.weights = b.Weights(exec::RandomConvWeights(op.conv, in_shapes[0].c, 17));
  }
  b.program.outputs = {step.output};
  b.Add(std::move(step));
  return b.program;
}

OpParams ConvWith(Shape /*in*/, int out, Window kernel, Window pad, Window stride, Window dilation,
                  int groups, Activation act, bool bias = true) {
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv.out_channels = out;
  op.conv.kernel = kernel;
  op.conv.padding = pad;
  op.conv.stride = stride;
  op.conv.dilation = dilation;
  op.conv.groups = groups;
  op.conv.act = act;
  op.conv.bias = bias;
  return op;
}

struct OpCase {
  std::string name;
  OpParams op;
  std::vector<Shape> inputs;
};

OpParams CeilMax(int kernel, int stride, int pad) {
  OpParams op = PoolOp(PoolType::kMax, kernel, stride, pad);
  op.pool.ceil = true;
  return op;
}

OpParams ExcludingPadding(OpParams op) {
  op.pool.exclude_padding = true;
  return op;
}

std::vector<OpCase> EveryOpKind() {
  using A = Activation;
  std::vector<OpCase> cases = {
      {"conv3x3_pad1_relu",
       ConvWith({}, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, A::kRelu),
       {{3, 7, 7}}},
      {"conv3x3_stride2_nopad_nobias",
       ConvWith({}, 5, {3, 3}, {0, 0}, {2, 2}, {1, 1}, 1, A::kNone, false),
       {{3, 8, 7}}},
      {"conv_dilated2_sigmoid",
       ConvWith({}, 4, {3, 3}, {2, 2}, {1, 1}, {2, 2}, 1, A::kSigmoid),
       {{4, 9, 9}}},
      {"conv_dilation_2x3",
       ConvWith({}, 2, {3, 3}, {1, 2}, {1, 1}, {2, 3}, 1, A::kNone),
       {{2, 7, 8}}},
      {"grouped2_tanh", ConvWith({}, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, A::kTanh), {{4, 6, 6}}},
      {"depthwise_stride2",
       ConvWith({}, 6, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 6, A::kRelu),
       {{6, 7, 7}}},
      {"depthwise_multiplier2",
       ConvWith({}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, A::kNone),
       {{4, 6, 6}}},
      {"asymmetric_1x3", ConvWith({}, 3, {1, 3}, {0, 1}, {1, 1}, {1, 1}, 1, A::kRelu), {{3, 6, 5}}},
      {"asymmetric_7x1_stride_2x1",
       ConvWith({}, 3, {7, 1}, {3, 0}, {2, 1}, {1, 1}, 1, A::kNone),
       {{3, 9, 5}}},
      {"stride_beyond_kernel",
       ConvWith({}, 2, {1, 1}, {0, 0}, {3, 3}, {1, 1}, 1, A::kNone),
       {{2, 7, 7}}},
      {"padding_beyond_half_kernel",
       ConvWith({}, 2, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, A::kNone),
       {{3, 4, 4}}},
      {"conv5x5_pad2_stride3",
       ConvWith({}, 3, {5, 5}, {2, 2}, {3, 3}, {1, 1}, 1, A::kRelu),
       {{2, 8, 8}}},
      {"max_3x3_s2_p1", PoolOp(PoolType::kMax, 3, 2, 1), {{3, 7, 7}}},
      {"max_2x2_s2_odd_input", PoolOp(PoolType::kMax, 2, 2, 0), {{3, 7, 7}}},
      {"avg_3x3_s1_p1", PoolOp(PoolType::kAvg, 3, 1, 1), {{3, 5, 6}}},
      {"avg_3x3_s2_p1", PoolOp(PoolType::kAvg, 3, 2, 1), {{2, 8, 8}}},
      {"avg_2x2_s2_odd_input", PoolOp(PoolType::kAvg, 2, 2, 0), {{2, 5, 5}}},
      {"global_max", PoolOp(PoolType::kGlobalMax, 1, 1, 0), {{3, 5, 3}}},
      {"avg_3x3_s2_p1_excluding_padding",
       ExcludingPadding(PoolOp(PoolType::kAvg, 3, 2, 1)),
       {{2, 7, 8}}},
      {"avg_2x3_s1_p1x1_excluding_padding",
       ExcludingPadding(PoolOp(PoolType::kAvg, 3, 1, 1)),
       {{3, 4, 5}}},
      {"max_3x3_s2_ceil", CeilMax(3, 2, 0), {{3, 8, 8}}},     // 3x3 -> 4x4
      {"max_3x3_s2_p1_ceil", CeilMax(3, 2, 1), {{2, 6, 7}}},  // windows past the padding
      {"global_avg", PoolOp(PoolType::kGlobalAvg, 1, 1, 0), {{3, 5, 3}}},
      {"add_of_two", ::ios::testing::EltwiseOp(EltwiseType::kAdd), {{3, 4, 4}, {3, 4, 4}}},
      {"add_of_three",
       ::ios::testing::EltwiseOp(EltwiseType::kAdd),
       {{2, 3, 5}, {2, 3, 5}, {2, 3, 5}}},
      {"mul_of_two", ::ios::testing::EltwiseOp(EltwiseType::kMul), {{3, 4, 4}, {3, 4, 4}}},
      {"mul_broadcast_first", ::ios::testing::EltwiseOp(EltwiseType::kMul), {{3, 1, 1}, {3, 4, 5}}},
      {"add_broadcast_second",
       ::ios::testing::EltwiseOp(EltwiseType::kAdd),
       {{3, 4, 5}, {3, 1, 1}, {3, 4, 5}}},
      {"identity_copy", ::ios::testing::IdentityOp(), {{3, 4, 4}}},
      {"identity_sum_of_three", ::ios::testing::IdentityOp(), {{2, 4, 3}, {2, 4, 3}, {2, 4, 3}}},
  };
  // Every activation, on its own and as a convolution's post-op.
  for (const ActivationKind& kind : ActivationKinds()) {
    const A act = kind.id;
    if (act == A::kNone) continue;
    cases.push_back({std::string("conv_") + ToString(act),
                     ConvWith({}, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, act),
                     {{3, 5, 5}}});
    OpParams op;
    op.kind = OpKind::kActivation;
    op.act = act;
    cases.push_back({std::string("activation_") + ToString(act), op, {{3, 4, 5}}});
  }
  // Every kind of common/op_kinds.h at its defaults, and softmax's logarithm.
  for (const OpKindSpec& spec : RegisteredKinds()) {
    cases.push_back({std::string(spec.name), MakeRegisteredOp(spec.kind), {{5, 3, 4}}});
  }
  OpParams log_softmax = MakeRegisteredOp(RegisteredKind::kSoftmax);
  log_softmax.registered.attributes = {1};
  cases.push_back({"logsoftmax", log_softmax, {{7, 2, 2}}});
  cases.push_back(
      {"softmax_of_classes", MakeRegisteredOp(RegisteredKind::kSoftmax), {{1000, 1, 1}}});
  return cases;
}

TEST_F(CpuDeviceTest, EveryOpKindMatchesTheReferenceWithAndWithoutChannelOffsets) {
  for (const OpCase& c : EveryOpKind()) {
    for (const bool offsets : {false, true}) {
      const exec::Program program = OneOp(c.op, c.inputs, offsets);
      for (const int batch : {1, 2}) {
        ExpectSameAsReference(*device_, program, batch,
                              c.name + (offsets ? " at channel offsets" : ""));
      }
    }
  }
}

//! A graph for stage programs: two branches, slices, sums, a sequential
//! unit and three mergeable convolutions of one input.
struct StageNet {
  Graph graph;
  NodeId a, b, pool, chain, summed, seq, m1, m3, m5;
};

StageNet BuildStageNet() {
  using ::ios::testing::ConvOp;
  exec::testing::GraphBuilder g({6, 7, 7});
  StageNet n;
  n.a = g.Add("a", ConvOp(4, 3, 1, 1), {{g.S(0)}});
  n.b = g.Add("b", ConvOp(4, 3, 2, 1, Activation::kTanh, 2), {{g.S(0)}});
  n.pool = g.Add("pool", PoolOp(PoolType::kAvg, 3, 1, 1), {{g.S(0)}});
  n.chain = g.Add("chain", ConvOp(5, 1, 1, 0), {{g.S(n.a)}});
  n.summed = g.Add("summed", ConvOp(3, 3, 1, 1), {{g.S(0, 0, 2), g.S(0, 3, 5)}, {g.S(n.a, 1, 3)}});
  OpParams seq;
  seq.kind = OpKind::kSequential;
  OpParams relu;
  relu.kind = OpKind::kActivation;
  seq.chain = {relu, ConvOp(6, 3, 1, 1, Activation::kNone, 6), ConvOp(4, 1, 1, 0)};
  n.seq = g.Add("seq", seq, {{g.S(0)}});
  n.m1 = g.Add("m1", ConvOp(2, 1, 1, 0), {{g.S(n.pool)}, {g.S(n.a)}});
  n.m3 = g.Add("m3", ConvOp(3, 3, 1, 1), {{g.S(n.pool)}, {g.S(n.a)}});
  OpParams m5 = ConvOp(2, 5, 1, 2);
  m5.conv.bias = false;
  n.m5 = g.Add("m5", m5, {{g.S(n.pool)}, {g.S(n.a)}});
  n.graph = g.Done();
  return n;
}

TEST_F(CpuDeviceTest, StageProgramsWithConcurrentLanesMatchTheReference) {
  const StageNet n = BuildStageNet();
  const std::vector<Stage> stages = {
      {Strategy::kParallel, {{n.a, n.chain}}},
      {Strategy::kParallel, {{n.a}, {n.b}}},
      {Strategy::kParallel, {{n.a, n.chain}, {n.pool}, {n.seq}, {n.b}}},
      {Strategy::kParallel, {{n.summed}, {n.seq}}},
      {Strategy::kMerge, {{n.m1}, {n.m3}, {n.m5}}},
  };
  for (size_t i = 0; i < stages.size(); ++i) {
    const exec::Program program = exec::StageProgram(MakeStageSpec(n.graph, stages[i]), 3);
    for (const int batch : {1, 2}) {
      ExpectSameAsReference(*device_, program, batch, "stage " + std::to_string(i));
    }
  }
}

TEST_F(CpuDeviceTest, MergedConvolutionEqualsItsMembers) {
  const StageNet n = BuildStageNet();
  const StageSpec merged = MakeStageSpec(n.graph, {Strategy::kMerge, {{n.m1}, {n.m3}, {n.m5}}});
  StageSpec members = merged;  // the same ops, one lane each: the same seeded weights
  members.strategy = Strategy::kParallel;
  const exec::Program stacked = exec::StageProgram(merged, 5);
  const exec::Program separate = exec::StageProgram(members, 5);
  ASSERT_EQ(stacked.outputs.size(), 3u);
  ASSERT_EQ(separate.outputs.size(), 3u);
  for (const int batch : {1, 2}) {
    auto one = device_->Prepare(stacked, batch);
    auto each = device_->Prepare(separate, batch);
    for (size_t i = 0; i < stacked.inputs.size(); ++i) {
      const Shape& s = stacked.buffers[stacked.inputs[i]].shape;
      const std::vector<float> values = exec::testing::Ramp(exec::testing::Elements(s, batch));
      one->Write(stacked.inputs[i], values);
      each->Write(separate.inputs[i], values);
    }
    one->TimedRuns(1);
    each->TimedRuns(1);
    for (size_t m = 0; m < 3; ++m) {
      exec::testing::ExpectClose(one->Read(stacked.outputs[m]), each->Read(separate.outputs[m]),
                                 1e-4, "member " + std::to_string(m));
    }
  }
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

}  // namespace
}  // namespace ios::devices
