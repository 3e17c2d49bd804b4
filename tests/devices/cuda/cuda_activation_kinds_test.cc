// The leaky_relu and hard_sigmoid kinds (common/op_kinds.h: ONNX's
// LeakyRelu and HardSigmoid at any coefficients) on the cuda device against
// the recording fake: one launch of our strided activation kernel
// (cuda_kernels.cu) on the channel views as they are, handed the op's
// coefficients, which the fake computes as the kernel does, matching the
// reference device. The GPU's check is cuda_gpu_test.cc's every-kind run.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/activation.h"
#include "exec/program.h"
#include "run/network_run.h"
#include "tests/common/registered_ops_testing.h"
#include "tests/devices/cuda/channel_view_program.h"
#include "tests/devices/cuda/device_test_support.h"

namespace ios::devices::cuda_testing {
namespace {

using cuda::ActivationMode;
using cuda::ActivationParams;

// 7 channels of 3 x 5 at batch 3, the views at channel 2 of 10 and 3 of
// 12: a sample's channel range is contiguous, the samples a whole buffer
// apart; no cuDNN descriptor is made for it.
TEST(CudaActivationKindsTest, EachIsOneLaunchOfOurKernelWithTheOpsCoefficients) {
  for (const auto& [op, mode, params] :
       {std::tuple{LeakyReluOp(0.2f), ActivationMode::kLeakyRelu, ActivationParams{0.2f, 0}},
        std::tuple{HardSigmoidOp(1.5f, -0.25f), ActivationMode::kHardSigmoidAlphaBeta,
                   ActivationParams{1.5f, -0.25f}}}) {
    SCOPED_TRACE(RegisteredKeyText(op.registered));
    auto journal = std::make_shared<Journal>();
    journal->compute = true;
    {
      auto device = Device(journal);
      RunChannelViewProgram(*device, ChannelViewProgram(op, 7, 3, 5, "act"), 3);
    }
    EXPECT_EQ(OpCalls(*journal), std::vector<std::string>{"ActivateStrided"});
    EXPECT_EQ(Count(journal->calls, "cudnnCreateTensorDescriptor"), 0);
    EXPECT_EQ(journal->kernel_activations, std::vector<ActivationMode>{mode});
    EXPECT_EQ(journal->kernel_activation_params, std::vector<ActivationParams>{params});
    ExpectNoViolations(*journal);
    ExpectNothingAlive(*journal);
  }
}

// Inputs in [-1, 1]: every slope meets negative values; 1.5 x + 0.5 is
// clipped at both ends, -0.75 x + 0.25 at 0 only, ONNX's 0.2 x + 0.5 never.
TEST(CudaActivationKindsTest, OnChannelViewsEachComputesWhatTheReferenceDeviceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const OpParams& op :
       {LeakyReluOp(0.01f), LeakyReluOp(0.2f), LeakyReluOp(-0.5f), HardSigmoidOp(0.2f, 0.5f),
        HardSigmoidOp(1.5f, 0.5f), HardSigmoidOp(-0.75f, 0.25f)}) {
    for (const int channels : {7, 16}) {
      SCOPED_TRACE(RegisteredKeyText(op.registered) + " of " + std::to_string(channels));
      const exec::Program program = ChannelViewProgram(op, channels, 4, 6, "act");
      auto journal = std::make_shared<Journal>();
      std::vector<float> got = RunOnComputingFake(program, journal, 3);
      const std::vector<float> expected = RunChannelViewProgram(*reference, program, 3);
      const run::Comparison c = run::Compare(got, expected);
      EXPECT_FALSE(c.sizes_differ);
      EXPECT_LE(c.max_abs_diff, 1e-6);
      ExpectNoViolations(*journal);
      ExpectNothingAlive(*journal);
      if (op == HardSigmoidOp(1.5f, 0.5f)) {  // what the comment above says
        EXPECT_NE(std::find(expected.begin(), expected.end(), 0.0f), expected.end());
        EXPECT_NE(std::find(expected.begin(), expected.end(), 1.0f), expected.end());
      }
    }
  }
}

// The every-kind network's nodes (tests/devices/op_network.h) hand the
// kernel their own coefficients, and the activations of the Activation
// enum keep theirs: leakyrelu PyTorch's slope, hardsigmoid its own mode.
TEST(CudaActivationKindsTest, TheOpsCoefficientsReachTheKernelAndTheActivationsKeepTheirs) {
  Network net;
  for (const auto& [name, mode, params] :
       {std::tuple{"leaky_relu_on_slice", ActivationMode::kLeakyRelu, ActivationParams{0.2f, 0}},
        std::tuple{"hard_sigmoid_of_concat", ActivationMode::kHardSigmoidAlphaBeta,
                   ActivationParams{0.5f, 0.25f}},
        std::tuple{"conv_leakyrelu", ActivationMode::kLeakyRelu,
                   ActivationParams{kLeakyReluSlope, 0}},
        std::tuple{"hardsigmoid", ActivationMode::kHardSigmoid, ActivationParams{}}}) {
    SCOPED_TRACE(name);
    auto journal = std::make_shared<Journal>();
    {
      auto device = Device(journal);
      device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{name}})), 2)->TimedRuns(1);
    }
    EXPECT_EQ(journal->kernel_activations, std::vector<ActivationMode>{mode});
    EXPECT_EQ(journal->kernel_activation_params, std::vector<ActivationParams>{params});
    ExpectNoViolations(*journal);
  }
}

}  // namespace
}  // namespace ios::devices::cuda_testing
