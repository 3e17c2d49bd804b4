// The reference device on tiny hand-computed cases: every op kind, the
// window edge cases, views at channel offsets, slots, and its refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "exec/device.h"
#include "exec/program.h"
#include "tests/exec/exec_testing.h"
#include "tests/testing/ops.h"

namespace ios::exec {
namespace {

using ::ios::exec::testing::OneStepProgram;
using ::ios::exec::testing::RunOnReference;
using ::ios::exec::testing::RunOp;
using ::ios::exec::testing::Weights;
using ::ios::testing::ConvOp;
using ::ios::testing::EltwiseOp;
using ::ios::testing::IdentityOp;
using ::ios::testing::PoolOp;

std::vector<float> Iota(int n, float start = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

OpParams Conv(int out, int kernel, int stride, int pad, int groups = 1, bool bias = false,
              Activation act = Activation::kNone) {
  OpParams op = ConvOp(out, kernel, stride, pad, act, groups);
  op.conv.bias = bias;
  return op;
}

TEST(ReferenceDeviceTest, ConvolutionWithPaddingSumsOnlyInsidePixels) {
  // 3x3 ones on a 3x3 of ones, padding 1: corners see 4 pixels, edges 6.
  const auto out = RunOp(Conv(1, 3, 1, 1), {{1, 3, 3}}, {std::vector<float>(9, 1.0f)}, 1,
                         {Weights(1, 1, 3, 3, std::vector<float>(9, 1.0f))});
  EXPECT_EQ(out, (std::vector<float>{4, 6, 4, 6, 9, 6, 4, 6, 4}));
}

TEST(ReferenceDeviceTest, ConvolutionStrideSkipsPixels) {
  const auto out =
      RunOp(Conv(1, 1, 2, 0), {{1, 4, 4}}, {Iota(16)}, 1, {Weights(1, 1, 1, 1, {1.0f})});
  EXPECT_EQ(out, (std::vector<float>{0, 2, 8, 10}));
}

TEST(ReferenceDeviceTest, ConvolutionDilationSpreadsTheKernel) {
  OpParams op = Conv(1, 3, 1, 0);
  op.conv.dilation = {2, 2};
  // Taps at rows and columns 0, 2, 4 of a 5x5 ramp.
  const auto out =
      RunOp(op, {{1, 5, 5}}, {Iota(25)}, 1, {Weights(1, 1, 3, 3, std::vector<float>(9, 1.0f))});
  EXPECT_EQ(out, (std::vector<float>{0 + 2 + 4 + 10 + 12 + 14 + 20 + 22 + 24}));
}

TEST(ReferenceDeviceTest, ConvolutionAsymmetricKernelAndPadding) {
  OpParams op = Conv(1, 1, 1, 0);
  op.conv.kernel = {1, 3};
  op.conv.padding = {0, 1};
  // Each output is left + middle + right neighbours in its row.
  const auto out = RunOp(op, {{1, 2, 3}}, {Iota(6)}, 1, {Weights(1, 1, 1, 3, {1, 1, 1})});
  EXPECT_EQ(out, (std::vector<float>{1, 3, 3, 7, 12, 9}));
}

TEST(ReferenceDeviceTest, ExtraEndPaddingPadsOnlyTheBottomAndRight) {
  // 3x3/2 on a 4x4 ramp, ONNX pads [0,0,1,1]: windows start at rows and
  // columns 0 and 2, and the second reaches one zero row/column past the end.
  OpParams op = Conv(1, 3, 2, 0);
  op.conv.padding_end_extra = {1, 1};
  const auto out =
      RunOp(op, {{1, 4, 4}}, {Iota(16)}, 1, {Weights(1, 1, 3, 3, std::vector<float>(9, 1.0f))});
  EXPECT_EQ(out, (std::vector<float>{0 + 1 + 2 + 4 + 5 + 6 + 8 + 9 + 10, 2 + 3 + 6 + 7 + 10 + 11,
                                     8 + 9 + 10 + 12 + 13 + 14, 10 + 11 + 14 + 15}));
}

TEST(ReferenceDeviceTest, ExtraEndPaddingAddsToTheStartPadding) {
  // 5x5/2 on a 7x7 ramp (value 7r+c), ONNX pads [1,1,2,2]: windows start at
  // -1, 1 and 3, so output row 0 reads rows 0..3 and row 2 rows 3..6 (and
  // one zero row); likewise for columns. Out of (7+1+2-5)/2+1 = 3 per axis.
  OpParams op = Conv(1, 5, 2, 1);
  op.conv.padding_end_extra = {1, 1};
  const auto out =
      RunOp(op, {{1, 7, 7}}, {Iota(49)}, 1, {Weights(1, 1, 5, 5, std::vector<float>(25, 1.0f))});
  // The ramp summed over rows r0..r1 and columns c0..c1 of the input.
  const auto box = [](int r0, int r1, int c0, int c1) {
    float sum = 0;
    for (int r = r0; r <= r1; ++r) {
      for (int c = c0; c <= c1; ++c) sum += static_cast<float>(7 * r + c);
    }
    return sum;
  };
  EXPECT_EQ(box(0, 3, 0, 3), 192.0f);
  EXPECT_EQ(box(3, 6, 3, 6), 576.0f);
  EXPECT_EQ(out, (std::vector<float>{box(0, 3, 0, 3), box(0, 3, 1, 5), box(0, 3, 3, 6),
                                     box(1, 5, 0, 3), box(1, 5, 1, 5), box(1, 5, 3, 6),
                                     box(3, 6, 0, 3), box(3, 6, 1, 5), box(3, 6, 3, 6)}));
}

TEST(ReferenceDeviceTest, GroupedConvolutionReadsOnlyItsGroup) {
  // 4 inputs (constant planes 1, 2, 3, 4), 2 groups of 2: out0 = 1*1 + 10*2,
  // out1 = 100*3 + 1000*4.
  std::vector<float> in;
  for (float c : {1.0f, 2.0f, 3.0f, 4.0f}) in.insert(in.end(), 1, c);
  const auto out =
      RunOp(Conv(2, 1, 1, 0, 2), {{4, 1, 1}}, {in}, 1, {Weights(2, 2, 1, 1, {1, 10, 100, 1000})});
  EXPECT_EQ(out, (std::vector<float>{21, 4300}));
}

TEST(ReferenceDeviceTest, DepthwiseConvolutionScalesEachChannel) {
  const auto out =
      RunOp(Conv(3, 1, 1, 0, 3), {{3, 1, 2}}, {Iota(6)}, 1, {Weights(3, 1, 1, 1, {1, 2, 3})});
  EXPECT_EQ(out, (std::vector<float>{0, 1, 4, 6, 12, 15}));
}

TEST(ReferenceDeviceTest, ConvolutionActivationComesAfterBias) {
  const std::vector<float> in{1, 3};
  const auto w = [] { return Weights(1, 1, 1, 1, {1.0f}, {-2.0f}); };
  EXPECT_EQ(RunOp(Conv(1, 1, 1, 0, 1, true, Activation::kRelu), {{1, 1, 2}}, {in}, 1, {w()}),
            (std::vector<float>{0, 1}));
  EXPECT_EQ(RunOp(Conv(1, 1, 1, 0, 1, true, Activation::kNone), {{1, 1, 2}}, {in}, 1, {w()}),
            (std::vector<float>{-1, 1}));
  const auto sig =
      RunOp(Conv(1, 1, 1, 0, 1, true, Activation::kSigmoid), {{1, 1, 2}}, {in}, 1, {w()});
  EXPECT_NEAR(sig[0], 1 / (1 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(sig[1], 1 / (1 + std::exp(-1.0)), 1e-6);
  const auto th = RunOp(Conv(1, 1, 1, 0, 1, true, Activation::kTanh), {{1, 1, 2}}, {in}, 1, {w()});
  EXPECT_NEAR(th[0], std::tanh(-1.0), 1e-6);
  EXPECT_NEAR(th[1], std::tanh(1.0), 1e-6);
}

TEST(ReferenceDeviceTest, MaxPoolIgnoresPadding) {
  EXPECT_EQ(RunOp(PoolOp(PoolType::kMax, 2, 2, 0), {{1, 4, 4}}, {Iota(16)}),
            (std::vector<float>{5, 7, 13, 15}));
  // All values negative: padding must not win as a zero.
  EXPECT_EQ(RunOp(PoolOp(PoolType::kMax, 3, 1, 1), {{1, 1, 2}}, {{-1.0f, -2.0f}}),
            (std::vector<float>{-1, -1}));
}

TEST(ReferenceDeviceTest, AveragePoolCountsPadding) {
  // 3x3 window, padding 1, on a 2x2 of ones: 4 of 9 pixels inside.
  const auto out =
      RunOp(PoolOp(PoolType::kAvg, 3, 1, 1), {{1, 2, 2}}, {std::vector<float>(4, 1.0f)});
  for (float v : out) EXPECT_FLOAT_EQ(v, 4.0f / 9.0f);
  EXPECT_EQ(RunOp(PoolOp(PoolType::kAvg, 2, 2, 0), {{1, 2, 4}}, {Iota(8)}),
            (std::vector<float>{2.5f, 4.5f}));
}

TEST(ReferenceDeviceTest, GlobalPoolsReduceEachChannelToOneValue) {
  EXPECT_EQ(RunOp(PoolOp(PoolType::kGlobalMax, 1, 1, 0), {{2, 2, 2}}, {Iota(8)}),
            (std::vector<float>{3, 7}));
  EXPECT_EQ(RunOp(PoolOp(PoolType::kGlobalAvg, 1, 1, 0), {{2, 2, 2}}, {Iota(8)}),
            (std::vector<float>{1.5f, 5.5f}));
}

TEST(ReferenceDeviceTest, ActivationOps) {
  OpParams op;
  op.kind = OpKind::kActivation;
  op.act = Activation::kRelu;
  EXPECT_EQ(RunOp(op, {{1, 1, 3}}, {{-1, 0, 2}}), (std::vector<float>{0, 0, 2}));
  op.act = Activation::kTanh;
  EXPECT_NEAR(RunOp(op, {{1, 1, 1}}, {{0.5f}})[0], std::tanh(0.5), 1e-6);
  op.act = Activation::kSigmoid;
  EXPECT_NEAR(RunOp(op, {{1, 1, 1}}, {{0.0f}})[0], 0.5, 1e-6);
}

TEST(ReferenceDeviceTest, EltwiseCombinesAnyNumberOfInputs) {
  const Shape s{1, 1, 2};
  EXPECT_EQ(RunOp(EltwiseOp(EltwiseType::kAdd), {s, s, s}, {{1, 2}, {10, 20}, {100, 200}}),
            (std::vector<float>{111, 222}));
  EXPECT_EQ(RunOp(EltwiseOp(EltwiseType::kMul), {s, s, s}, {{1, 2}, {3, 4}, {5, 6}}),
            (std::vector<float>{15, 48}));
}

TEST(ReferenceDeviceTest, IdentityCopiesOneInputAndSumsSeveral) {
  const Shape s{1, 1, 2};
  EXPECT_EQ(RunOnReference(OneStepProgram(IdentityOp(), {s}, s), {{1, 2}})[0],
            (std::vector<float>{1, 2}));
  EXPECT_EQ(RunOnReference(OneStepProgram(IdentityOp(), {s, s}, s), {{1, 2}, {10, 20}})[0],
            (std::vector<float>{11, 22}));
}

// in: 3 channels of 1x2; the step copies channel 1 into channels [2, 3) of
// a 4-channel buffer; at batch B each sample is its own channel range.
Program ViewProgram() {
  Program p;
  p.buffers = {{{3, 1, 2}, 0, "in"}, {{4, 1, 2}, 1, "out"}};
  p.slot_elements = {6, 8};
  p.inputs = {0};
  Step step;
  step.op = IdentityOp();
  step.inputs = {{0, 1, 1}};
  step.output = {1, 2, 1};
  p.stages.push_back({{Lane{{step}}}});
  p.outputs = {{1, 2, 1}, {1, 1, 2}};
  return p;
}

TEST(ReferenceDeviceTest, ViewsAtChannelOffsetsAtBatchOne) {
  const auto out = RunOnReference(ViewProgram(), {Iota(6)}, 1);
  EXPECT_EQ(out[0], (std::vector<float>{2, 3}));
  EXPECT_EQ(out[1], (std::vector<float>{0, 0, 2, 3}));  // channel 1 untouched (zero)
}

TEST(ReferenceDeviceTest, ViewsAtChannelOffsetsAtBatchTwo) {
  const auto out = RunOnReference(ViewProgram(), {Iota(12)}, 2);
  // Sample 1 starts 6 values later in `in`.
  EXPECT_EQ(out[0], (std::vector<float>{2, 3, 8, 9}));
  EXPECT_EQ(out[1], (std::vector<float>{0, 0, 2, 3, 0, 0, 8, 9}));
}

TEST(ReferenceDeviceTest, BuffersSharingASlotAliasOneStorage) {
  // a (slot 0) -> copy -> b (slot 1) -> relu -> c (slot 0 again: a is dead).
  Program p;
  p.buffers = {{{1, 1, 2}, 0, "a"}, {{1, 1, 2}, 1, "b"}, {{1, 1, 2}, 0, "c"}};
  p.slot_elements = {2, 2};
  p.inputs = {0};
  Step copy;
  copy.op = IdentityOp();
  copy.inputs = {{0, 0, 1}};
  copy.output = {1, 0, 1};
  Step relu;
  relu.op.kind = OpKind::kActivation;
  relu.op.act = Activation::kRelu;
  relu.inputs = {{1, 0, 1}};
  relu.output = {2, 0, 1};
  p.stages.push_back({{Lane{{copy}}}});
  p.stages.push_back({{Lane{{relu}}}});
  p.outputs = {{2, 0, 1}, {0, 0, 1}};
  const auto out = RunOnReference(p, {{-5, 6}}, 1);
  EXPECT_EQ(out[0], (std::vector<float>{0, 6}));
  EXPECT_EQ(out[1], (std::vector<float>{0, 6}));  // a's storage now holds c
  EXPECT_EQ(p.ActivationBytes(1), 16);
  EXPECT_EQ(p.ActivationBytes(3), 48);
}

TEST(ReferenceDeviceTest, AbsurdBatchIsOutOfMemoryBeforeAllocating) {
  const Shape big{1024, 1024, 1024};
  const Program p = OneStepProgram(IdentityOp(), {big}, big);
  auto device = MakeReferenceDevice();
  try {
    device->Prepare(p, 1 << 20);
    FAIL() << "expected an ExecError";
  } catch (const ExecError& e) {
    EXPECT_EQ(e.kind(), MeasureError::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("physical memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p.ActivationBytes(std::numeric_limits<int>::max()),
            std::numeric_limits<int64_t>::max());
}

TEST(ReferenceDeviceTest, PrepareValidatesTheProgram) {
  Program p = ViewProgram();
  p.stages[0].lanes[0].steps[0].output = {1, 3, 2};  // channels [3, 5) of 4
  auto device = MakeReferenceDevice();
  EXPECT_THROW(device->Prepare(p, 1), Error);
  EXPECT_TRUE(device->Info().fingerprint == MakeReferenceDevice()->Info().fingerprint);
}

TEST(ReferenceDeviceTest, WriteRefusesTheWrongNumberOfValues) {
  auto prepared = MakeReferenceDevice()->Prepare(ViewProgram(), 2);
  EXPECT_THROW(prepared->Write(0, Iota(6)), Error);
  EXPECT_THROW(prepared->Read({1, 3, 2}), Error);
}

// ---- Validate ---------------------------------------------------------------

std::string ValidateMessage(const Program& p) {
  try {
    Validate(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ValidateTest, AcceptsAWellFormedProgram) { EXPECT_EQ(ValidateMessage(ViewProgram()), ""); }

TEST(ValidateTest, RefusesAnOutputOverlappingAnInput) {
  Program p = ViewProgram();
  p.stages[0].lanes[0].steps[0].output = {0, 1, 1};
  EXPECT_NE(ValidateMessage(p).find("stage 0, lane 0, step 0"), std::string::npos);
  EXPECT_NE(ValidateMessage(p).find("overlaps inputs[0]"), std::string::npos) << ValidateMessage(p);
}

TEST(ValidateTest, RefusesLanesWritingTheSameStorage) {
  Program p = ViewProgram();
  p.stages[0].lanes.push_back(p.stages[0].lanes[0]);
  EXPECT_NE(ValidateMessage(p).find("lane 0 writes storage lane 1"), std::string::npos)
      << ValidateMessage(p);
}

TEST(ValidateTest, RefusesALaneWritingWhatAnotherReads) {
  Program p = ViewProgram();
  Step other = p.stages[0].lanes[0].steps[0];
  other.inputs = {{1, 2, 1}};
  other.output = {1, 0, 1};
  p.stages[0].lanes.push_back(Lane{{other}});
  EXPECT_NE(ValidateMessage(p).find("reads"), std::string::npos) << ValidateMessage(p);
}

TEST(ValidateTest, RefusesWrongShapesAndWeights) {
  const Shape in{2, 3, 3};
  Program p = OneStepProgram(Conv(4, 3, 1, 1), {in}, {4, 3, 3},
                             {Weights(4, 2, 3, 3, std::vector<float>(72, 0.0f))});
  EXPECT_EQ(ValidateMessage(p), "");
  Program wrong_output = OneStepProgram(Conv(4, 3, 1, 0), {in}, {4, 3, 3},
                                        {Weights(4, 2, 3, 3, std::vector<float>(72, 0.0f))});
  EXPECT_NE(ValidateMessage(wrong_output).find("output: shape 4x3x3, the op gives 4x1x1"),
            std::string::npos)
      << ValidateMessage(wrong_output);
  Program no_weights = p;
  no_weights.stages[0].lanes[0].steps[0].weights = 3;
  EXPECT_NE(ValidateMessage(no_weights).find("weights: index 3"), std::string::npos);
  Program bias = p;
  bias.stages[0].lanes[0].steps[0].op.conv.bias = true;
  EXPECT_NE(ValidateMessage(bias).find("weights: bias"), std::string::npos)
      << ValidateMessage(bias);
  Program short_kernel = p;  // every device reads as many values as the shape says
  short_kernel.weights[0].kernel.resize(71);
  EXPECT_NE(ValidateMessage(short_kernel).find("sizes do not match the shape"), std::string::npos)
      << ValidateMessage(short_kernel);
  Program slot = p;
  slot.slot_elements[1] = 3;
  EXPECT_NE(ValidateMessage(slot).find("buffer 1 ('out'): slot"), std::string::npos)
      << ValidateMessage(slot);
  Program eltwise = OneStepProgram(EltwiseOp(EltwiseType::kAdd), {in}, in);
  EXPECT_NE(ValidateMessage(eltwise).find("needs at least 2"), std::string::npos)
      << ValidateMessage(eltwise);
}

}  // namespace
}  // namespace ios::exec
