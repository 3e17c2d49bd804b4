// How the cuda device answers what cuDNN refuses and what it must not ask
// cuDNN at all, checked against the recording fake: a deterministic refusal
// is a fact about the stage (unsupported, never measured again), a refused
// fusion means three calls, a tensor beyond cuDNN's int extents is refused
// before any call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/measurement.h"
#include "devices/exec_backend.h"
#include "exec/program.h"
#include "tests/devices/cuda/device_test_support.h"

namespace ios::devices::cuda_testing {
namespace {

using cuda::Code;
using ::testing::HasSubstr;

MeasureSettings Quick() {
  MeasureSettings settings;
  settings.warmup = 1;
  settings.number = 1;
  settings.repeat = 2;
  return settings;
}

// cuDNN's BAD_PARAM family says the same of the same arguments every time:
// the stage is unsupported (kept), not a backend failure (measured again by
// every search).
TEST(CudaRefusalTest, ARefusalOfTheArgumentsIsUnsupportedAndNotMeasuredAgain) {
  Network net;
  auto journal = std::make_shared<Journal>();
  journal->answers["cudnnConvolutionForward"] = Code::kRefused;
  auto backend = MakeExecBackend(Device(journal));
  const MeasureResult result =
      backend->Measure(net.Spec(Strategy::kParallel, {{"grouped_dilated"}}), 1, Quick());
  EXPECT_EQ(result.error, MeasureError::kUnsupported) << result.error_message;
  EXPECT_FALSE(IsTransient(result.error));
  EXPECT_THAT(result.error_message, HasSubstr("cudnnConvolutionForward"));
  EXPECT_FALSE(backend->Lost());
  // A failure that may pass stays a backend failure, measured again.
  journal->answers["cudnnConvolutionForward"] = Code::kFailure;
  const MeasureResult failed =
      backend->Measure(net.Spec(Strategy::kParallel, {{"grouped_dilated"}}), 2, Quick());
  EXPECT_EQ(failed.error, MeasureError::kBackendFailure) << failed.error_message;
  EXPECT_TRUE(IsTransient(failed.error));
}

// Whatever cuDNN answers the fused trial, short of losing the context, the
// convolution runs as three calls, and the trial is made once per problem.
TEST(CudaRefusalTest, AnyRefusalOfTheFusedTrialMeansThreeCallsDecidedOncePerProblem) {
  Network net;
  const exec::Program program = exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}}));
  const std::string fused = "cudnnConvolutionBiasActivationForward";
  for (const Code code : {Code::kUnsupported, Code::kRefused, Code::kFailure, Code::kOutOfMemory}) {
    SCOPED_TRACE("the trial answers " + std::to_string(static_cast<int>(code)));
    auto journal = std::make_shared<Journal>();
    journal->answers[fused] = code;
    auto device = Device(journal);
    for (int prepare = 0; prepare < 2; ++prepare) {
      auto prepared = device->Prepare(program, 1);
      journal->ops.clear();
      prepared->TimedRuns(1);
      EXPECT_EQ(OpCalls(*journal),
                (std::vector<std::string>{"cudnnConvolutionForward", "cudnnAddTensor",
                                          "cudnnActivationForward"}));
      EXPECT_GT(prepared->TimedReplays(1), 0);
    }
    EXPECT_EQ(Count(journal->calls, fused), 1) << "tried once, remembered";
    ExpectNoViolations(*journal);
  }
  // A lost context is the prepare's error, and the device's end.
  auto journal = std::make_shared<Journal>();
  journal->answers[fused] = Code::kDeviceLost;
  auto device = Device(journal);
  EXPECT_THROW(device->Prepare(program, 1), exec::DeviceLostError);
  device.reset();  // its pool goes with it
  ExpectNothingAlive(*journal);
}

// 4194304 x 8 x 9 x 9 floats: cudnnSetTensor4dDescriptorEx answered
// NOT_SUPPORTED on an H100. The device says why before asking anything.
TEST(CudaRefusalTest, ATensorBeyondCuDnnsIntExtentsIsRefusedBeforeAnyCallNamingTheLimit) {
  Network net;
  auto journal = std::make_shared<Journal>();
  journal->free_bytes = size_t{80} << 30;  // an H100's: the 25 GB of storage fit
  auto device = Device(journal);
  const size_t before = journal->calls.size();
  const exec::Program program =
      exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}, {"max_pool"}}));
  try {
    device->Prepare(program, 1 << 22);
    ADD_FAILURE() << "prepared a tensor of 2^22 x 8 x 9 x 9 floats";
  } catch (const exec::ExecError& e) {
    EXPECT_EQ(e.kind(), MeasureError::kUnsupported) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("4194304x8x9x9"));
    EXPECT_THAT(e.what(), HasSubstr("2147483647"));
  }
  for (size_t i = before; i < journal->calls.size(); ++i) {
    EXPECT_NE(journal->calls[i].rfind("cudnn", 0), 0u) << journal->calls[i];
    EXPECT_NE(journal->calls[i], "cudaMalloc");
  }
  ExpectNothingAlive(*journal);
  // The same stage at batch 1 is fine.
  Exercise(*device, program, 1);
  ExpectNoViolations(*journal);
}

}  // namespace
}  // namespace ios::devices::cuda_testing
