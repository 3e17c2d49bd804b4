// How the cuda device times what it runs, checked against the recording
// fake (issue 22): a stage measured as it executes inside a network graph
// (K copies captured once, replayed between two events), the streamed path
// paying no allocation, creation or synchronisation per run, ios-run timing
// the recorded graph by default, and the device's pool of streams, cuDNN
// handles, events and workspaces shared by every program it prepares.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/zoo.h"
#include "exec/program.h"
#include "exec/weights.h"
#include "run/network_run.h"
#include "tests/devices/cuda/device_test_support.h"

namespace ios::devices::cuda_testing {
namespace {

//! The calls recorded from `first` on.
std::vector<std::string> Since(const Journal& journal, size_t first) {
  return {journal.calls.begin() + static_cast<long>(first), journal.calls.end()};
}

//! Calls that create a library object or allocate.
const std::set<std::string> kCreations = {"cudaMalloc",
                                          "cudaStreamCreateWithFlags",
                                          "cudnnCreate",
                                          "cudnnSetStream",
                                          "cudaEventCreateWithFlags",
                                          "cudnnCreateTensorDescriptor",
                                          "cudaGraphInstantiateWithFlags",
                                          "cudaStreamBeginCapture"};

// ---- A stage measured as executed -----------------------------------------------

TEST(CudaExecutedProtocolTest, AStageIsCapturedOnceAsCopiesAndOnlyItsReplaysAreTimed) {
  Network net;
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    // Two lanes: the copies carry their forks and joins.
    auto prepared = device->Prepare(
        exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}, {"max_pool"}})), 1);
    journal->ops.clear();
    prepared->TimedRuns(1);
    const std::vector<std::string> one_run = OpCalls(*journal);
    ASSERT_EQ(one_run.size(), 2u);

    journal->ops.clear();
    const size_t first = journal->calls.size();
    const double eight = prepared->TimedRunsAsExecuted(8, true);
    const double six = prepared->TimedRunsAsExecuted(6, false);
    const std::vector<std::string> calls = Since(*journal, first);

    // Recorded once: one capture, one instantiation, for both calls.
    EXPECT_EQ(Count(calls, "cudaStreamBeginCapture"), 1);
    EXPECT_EQ(Count(calls, "cudaStreamEndCapture"), 1);
    EXPECT_EQ(Count(calls, "cudaGraphInstantiateWithFlags"), 1);
    // The capture holds kExecutedCopies copies of the stage, each forked
    // and joined: the only kernels enqueued are the capture's.
    const int copies = kExecutedCopies;
    ASSERT_GE(copies, 2);
    std::vector<std::string> captured;
    for (int k = 0; k < copies; ++k)
      captured.insert(captured.end(), one_run.begin(), one_run.end());
    EXPECT_EQ(OpCalls(*journal), captured);
    // 8 runs: 2 replays of 4 copies; 6 runs: 2 replays too, the mean copy
    // scaled to 6 runs (1.5 ms per timed call in the fake).
    EXPECT_EQ(journal->launches, 2 * ((8 + copies - 1) / copies));
    EXPECT_DOUBLE_EQ(eight, 1.5 * 8 / (copies * ((8 + copies - 1) / copies)));
    EXPECT_DOUBLE_EQ(six, 1.5 * 6 / (copies * ((6 + copies - 1) / copies)));

    // Each timed region: the start event, the replays, the end event;
    // nothing else between them, no synchronisation per run.
    const size_t end_capture =
        std::find(calls.begin(), calls.end(), "cudaGraphInstantiateWithFlags") - calls.begin();
    const std::vector<std::string> timed(calls.begin() + static_cast<long>(end_capture) + 1,
                                         calls.end());
    std::vector<std::string> expected;
    for (int runs : {8, 6}) {
      expected.push_back("cudaEventRecord");
      for (int l = 0; l < (runs + copies - 1) / copies; ++l) expected.push_back("cudaGraphLaunch");
      expected.insert(expected.end(),
                      {"cudaEventRecord", "cudaEventSynchronize", "cudaEventElapsedTime"});
    }
    EXPECT_EQ(timed, expected);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

TEST(CudaExecutedProtocolTest, AWholeProgramReplayAndAnExecutedStageAreRecordedApart) {
  Network net;
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    auto prepared =
        device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}})), 1);
    prepared->TimedReplays(2);
    prepared->TimedRunsAsExecuted(4, true);
    prepared->TimedReplays(2);
    prepared->TimedRunsAsExecuted(4, true);
    EXPECT_EQ(Count(journal->calls, "cudaStreamBeginCapture"), 2);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

// ---- The streamed path ------------------------------------------------------------

TEST(CudaStreamedPathTest, RunsAllocateCreateAndSynchroniseNothingButTheClock) {
  const Graph graph = BuildZooModel("squeezenet");
  std::vector<Stage> stages = run::GreedyNetworkSchedule(graph).stages;
  const exec::NetworkProgram network =
      exec::BuildNetworkProgram(graph, stages, exec::WeightStore::Random(graph, 7));
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    auto prepared = device->Prepare(network.program, 1);
    prepared->TimedRuns(1);
    const size_t first = journal->calls.size();
    prepared->TimedRuns(3);
    const std::vector<std::string> calls = Since(*journal, first);
    for (const std::string& call : calls) {
      EXPECT_EQ(kCreations.count(call), 0u) << call << " in a streamed run";
    }
    EXPECT_EQ(Count(calls, "cudaStreamSynchronize"), 0);
    // The clock is read once for the three runs.
    EXPECT_EQ(Count(calls, "cudaEventSynchronize"), 1);
    // Joins are event waits on the GPU, not host synchronisation.
    EXPECT_GT(Count(calls, "cudaStreamWaitEvent"), 0);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

// ---- ios-run's default -------------------------------------------------------------

TEST(CudaIosRunTest, ACudaDeviceRunsTheScheduleAsAGraphUnlessStreamsAreAsked) {
  const run::RunModes graph = run::ChooseRunModes(true, false, false);
  EXPECT_TRUE(graph.graph);
  EXPECT_FALSE(graph.streams);
  EXPECT_TRUE(run::ChooseRunModes(true, false, true).graph) << "--cuda-graph: the default";
  const run::RunModes streams = run::ChooseRunModes(true, true, false);
  EXPECT_TRUE(streams.streams);
  EXPECT_FALSE(streams.graph);
  const run::RunModes both = run::ChooseRunModes(true, true, true);
  EXPECT_TRUE(both.streams && both.graph);
  const run::RunModes cpu = run::ChooseRunModes(false, false, false);
  EXPECT_TRUE(cpu.streams);
  EXPECT_FALSE(cpu.graph);
  EXPECT_THROW(run::ChooseRunModes(false, false, true), Error);

  const Graph net = BuildZooModel("squeezenet");
  const Shape in = net.node(0).output;
  const std::vector<float> input(static_cast<size_t>(in.c) * in.h * in.w, 0.5f);
  MeasureSettings timing;
  timing.warmup = 1;
  timing.number = 1;
  timing.repeat = 3;
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    const run::Execution execution =
        run::Execute(*device, net, run::GreedyNetworkSchedule(net),
                     exec::WeightStore::Random(net, 3), 1, input, graph, timing);
    ASSERT_TRUE(execution.replay.has_value());
    EXPECT_EQ(execution.timing.repeats, 0) << "no streamed runs timed";
    EXPECT_EQ(journal->launches, 4) << "a warmup and three timed replays";
    EXPECT_EQ(execution.replay_output.size(), execution.output.size());
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

// ---- The device's pool ----------------------------------------------------------

TEST(CudaPoolTest, TwoMeasurementsOnOneDeviceCreateStreamsHandlesAndEventsOnce) {
  Network net;
  const exec::Program program = exec::StageProgram(
      net.Spec(Strategy::kParallel, {{"conv3", "conv1_after_conv3"}, {"max_pool"}}));
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    device->Prepare(program, 2)->TimedRunsAsExecuted(4, true);
    EXPECT_EQ(Count(journal->calls, "cudaStreamCreateWithFlags"), 3) << "the origin and 2 lanes";
    EXPECT_EQ(Count(journal->calls, "cudnnCreate"), 3);
    const int events = Count(journal->calls, "cudaEventCreateWithFlags");
    const int finds = journal->finds;
    const size_t first = journal->calls.size();
    device->Prepare(program, 2)->TimedRunsAsExecuted(4, true);
    const std::vector<std::string> second = Since(*journal, first);
    EXPECT_EQ(Count(second, "cudaStreamCreateWithFlags"), 0);
    EXPECT_EQ(Count(second, "cudnnCreate"), 0);
    EXPECT_EQ(Count(second, "cudnnSetStream"), 0);
    EXPECT_EQ(Count(second, "cudaEventCreateWithFlags"), 0);
    EXPECT_EQ(Count(journal->calls, "cudaEventCreateWithFlags"), events);
    // The second allocates its storage and weights only: no workspace, no
    // algorithm search scratch (its algorithms are remembered).
    EXPECT_EQ(Count(second, "cudaMalloc"), static_cast<int>(program.slot_elements.size()) +
                                               Count(second, "cudaMemcpy(host to device)"));
    EXPECT_EQ(journal->finds, finds);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

TEST(CudaPoolTest, AWiderProgramAddsOnlyTheStreamsThePoolLacks) {
  Network net;
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}, {"relu"}})), 1)
        ->TimedRuns(1);
    EXPECT_EQ(Count(journal->calls, "cudaStreamCreateWithFlags"), 3);
    // Two programs alive at once share the pool.
    auto narrow =
        device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}})), 1);
    auto wide = device->Prepare(
        exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}, {"relu"}, {"max_pool"}})), 1);
    EXPECT_EQ(Count(journal->calls, "cudaStreamCreateWithFlags"), 4);
    narrow->TimedRunsAsExecuted(4, true);
    wide->TimedRunsAsExecuted(4, true);
    narrow->TimedRuns(2);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

TEST(CudaPoolTest, AProgramShortOfMemoryFirstGetsBackWhatOnlyThePoolHolds) {
  Network net;
  const exec::Program program = exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}}));
  auto journal = std::make_shared<Journal>();
  auto device = Device(journal);
  device->Prepare(program, 1)->TimedRuns(1);
  const int64_t pooled = journal->live_bytes;
  ASSERT_GE(pooled, int64_t{256} << 20) << "the search's scratch is kept for the next search";
  journal->free_bytes = 4096;
  EXPECT_THROW(device->Prepare(program, 64), exec::ExecError);
  EXPECT_EQ(journal->live_bytes, 0) << "scratch and workspaces given back before refusing";
  journal->free_bytes = size_t{8} << 30;
  device->Prepare(program, 1)->TimedRuns(1);
  ExpectNoViolations(*journal);
}

}  // namespace
}  // namespace ios::devices::cuda_testing
