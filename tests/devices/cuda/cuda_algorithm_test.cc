// How the cuda device chooses each convolution's algorithm, checked against
// the recording fake: results that failed, need too much workspace or the
// wrong math are skipped; a choice is made once per problem (shapes,
// settings, operand alignment) unless made with less scratch than the cap;
// cuDNN's refusal to fuse bias and relu into the chosen algorithm means
// three calls, decided once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "exec/program.h"
#include "tests/devices/cuda/channel_views.h"
#include "tests/devices/cuda/device_test_support.h"

namespace ios::devices::cuda_testing {
namespace {

using cuda::Code;
using ::testing::HasSubstr;

// cuDNN may refuse to fuse bias and relu into the algorithm found for the
// plain convolution: tried once per problem at prepare, never in a timed
// region, and then run as three calls.
TEST(CudaDeviceTest, AConvolutionCuDnnWillNotFuseRunsAsThreeCallsDecidedOncePerProblem) {
  Network net;
  const exec::Program program = exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}}));
  auto journal = std::make_shared<Journal>();
  journal->unfusable_algorithms = {1};
  auto device = Device(journal);
  for (int prepare = 0; prepare < 2; ++prepare) {
    auto prepared = device->Prepare(program, 1);
    EXPECT_EQ(journal->fusion_refusals, 1) << "prepare " << prepare << ": decided once";
    journal->ops.clear();
    prepared->TimedRuns(1);
    EXPECT_EQ(OpCalls(*journal),
              (std::vector<std::string>{"cudnnConvolutionForward", "cudnnAddTensor",
                                        "cudnnActivationForward"}));
    EXPECT_GT(prepared->TimedReplays(1), 0);
  }
  ExpectNoViolations(*journal);

  // Other answers of the trial: cuda_refusal_test.cc.
}

// The algorithm search got less scratch than the cap: its choice is used
// but not remembered, so a later prepare with the whole cap searches again.
TEST(CudaDeviceTest, AChoiceMadeWithLessScratchThanTheCapIsNotRemembered) {
  Network net;
  const exec::Program program = exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}}));
  auto journal = std::make_shared<Journal>();
  journal->largest_allocation = size_t{64} << 20;  // the cap is 256 MiB
  auto device = Device(journal);
  device->Prepare(program, 1)->TimedRuns(1);
  device->Prepare(program, 1)->TimedRuns(1);
  EXPECT_EQ(journal->finds, 2);
  journal->largest_allocation = 0;
  device->Prepare(program, 1)->TimedRuns(1);
  device->Prepare(program, 1)->TimedRuns(1);
  EXPECT_EQ(journal->finds, 3);
  ExpectNoViolations(*journal);
}

TEST(CudaDeviceTest, AlgorithmsThatFailedOrNeedTooMuchWorkspaceAreSkippedAndFoundOncePerProblem) {
  Network net;
  const exec::Program program = exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}}));
  auto journal = std::make_shared<Journal>();
  auto device = Device(journal);
  {
    auto prepared = device->Prepare(program, 1);
    // The search's 256 MiB scratch stays in the device's pool for the next
    // search; beside it, storage, weights and the chosen algorithm's 1 MiB.
    EXPECT_GT(journal->live_bytes, (int64_t{256} << 20) + (int64_t{1} << 20));
    EXPECT_LT(journal->live_bytes, (int64_t{256} << 20) + (int64_t{4} << 20));
    prepared->TimedRuns(1);
  }
  ASSERT_FALSE(journal->ops.empty());
  EXPECT_EQ(journal->ops.back().algo, 1) << "algorithm 7 failed; 1 is the first that runs";
  EXPECT_EQ(journal->finds, 1);
  device->Prepare(program, 1)->TimedRuns(1);
  EXPECT_EQ(journal->finds, 1) << "the same problem again: the choice is remembered";
  device->Prepare(program, 2)->TimedRuns(1);
  EXPECT_EQ(journal->finds, 2) << "another batch size is another problem";
  ExpectNoViolations(*journal);

  // No workspace allowed: algorithm 1 (1 MiB) is skipped too.
  CudaOptions none;
  none.workspace_mb = 0;
  auto tight = Device(journal, none);
  tight->Prepare(program, 1)->TimedRuns(1);
  EXPECT_EQ(journal->ops.back().algo, 0);

  // cuDNN's ranking instead of a search: nothing is run to choose.
  CudaOptions heuristic;
  heuristic.algo = CudaOptions::Algo::kHeuristic;
  const int finds = journal->finds;
  Device(journal, heuristic)->Prepare(program, 1)->TimedRuns(1);
  EXPECT_EQ(journal->finds, finds);
  EXPECT_GE(Count(journal->calls, "cudnnGetConvolutionForwardAlgorithm_v7"), 1);
  EXPECT_EQ(journal->ops.back().algo, 1);
  ExpectNoViolations(*journal);

  // Strict FP32: a result whose math may use TF32 is passed over.
  journal->algorithms = {{5, Code::kOk, 0.1f, 0, cuda::MathType::kDefault},
                         {2, Code::kOk, 0.2f, 0, cuda::MathType::kFma}};
  Device(journal)->Prepare(program, 3)->TimedRuns(1);
  EXPECT_EQ(journal->ops.back().algo, 2);

  // Nothing runs: unsupported, saying how many were tried.
  journal->algorithms = {{3, Code::kUnsupported, 0, 0, cuda::MathType::kFma}};
  auto picky = Device(journal);
  try {
    picky->Prepare(program, 1);
    ADD_FAILURE() << "prepared without an algorithm";
  } catch (const exec::ExecError& e) {
    EXPECT_EQ(e.kind(), MeasureError::kUnsupported);
    EXPECT_THAT(e.what(), HasSubstr("none of the 1 convolution algorithms"));
  }
}

// An algorithm found for an operand at one alignment may not run (or run
// wrong) at a lesser one: two problems that differ only in the alignment of
// their input are two searches.
TEST(CudaDeviceTest, ProblemsThatDifferOnlyInAnOperandsAlignmentAreSearchedApart) {
  for (const int size : {17, 35}) {
    SCOPED_TRACE(std::to_string(size) + "x" + std::to_string(size));
    const Graph graph = ChannelViewsGraph(size);
    const exec::Program program = exec::StageProgram(ChannelViewsStage(graph));
    auto journal = std::make_shared<Journal>();
    auto device = Device(journal);
    Exercise(*device, program, 2);
    EXPECT_EQ(journal->finds, 2);
    Exercise(*device, program, 2);
    EXPECT_EQ(journal->finds, 2) << "each choice is remembered";
    ExpectNoViolations(*journal);
  }
}

}  // namespace
}  // namespace ios::devices::cuda_testing
