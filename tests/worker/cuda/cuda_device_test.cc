// The cuda device's use of CUDA and cuDNN, checked without a GPU against a
// recording fake (tests/worker/cuda/recording_api.h): every op kind builds
// descriptors whose shapes and extents agree with its buffers; lanes of a
// stage run on their own stream and handle, forked from and joined to the
// origin stream; nothing is allocated while a run is timed or captured;
// everything created is destroyed, on error paths too; an injected failure
// at any call becomes the right typed error and leaves the device usable;
// algorithm results that failed are skipped. The fake computes nothing:
// numerics are the cpu backend's and the GPU tests' (cuda_gpu_test).
#include "worker/cuda/cuda_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/zoo.h"
#include "coordinator/dp.h"
#include "exec/program.h"
#include "exec/weights.h"
#include "run/network_run.h"
#include "tests/worker/cuda/recording_api.h"
#include "tests/devices/op_network.h"
#include "devices/exec_backend.h"

namespace ios::worker {
namespace {

using cuda::Code;
using cuda::testing::Journal;
using cuda::testing::RecordingApi;
using ::testing::HasSubstr;

std::unique_ptr<exec::Device> Device(const std::shared_ptr<Journal>& journal,
                                     const CudaOptions& options = {}) {
  return MakeCudaDevice(std::make_unique<RecordingApi>(journal), options);
}

std::string Listed(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += "\n  " + line;
  return text;
}

void ExpectNoViolations(const Journal& journal) {
  EXPECT_TRUE(journal.violations.empty()) << Listed(journal.violations);
}

void ExpectNothingAlive(const Journal& journal) {
  std::vector<std::string> left;
  for (const auto& [object, kind] : journal.live) left.push_back(kind);
  EXPECT_TRUE(left.empty()) << "still alive:" << Listed(left);
}

int Count(const std::vector<std::string>& calls, const std::string& call) {
  return static_cast<int>(std::count(calls.begin(), calls.end(), call));
}

//! Prepares `program`, writes its inputs, times two runs, replays two and
//! reads every output: everything a worker and ios-run ask of a device.
void Exercise(exec::Device& device, const exec::Program& program, int batch) {
  auto prepared = device.Prepare(program, batch);
  for (int input : program.inputs) {
    const Shape& s = program.buffers.at(input).shape;
    prepared->Write(input, std::vector<float>(static_cast<size_t>(batch) * s.c * s.h * s.w, 1.0f));
  }
  EXPECT_GT(prepared->TimedRuns(2), 0);
  ASSERT_TRUE(prepared->CanReplay());
  EXPECT_GT(prepared->TimedReplays(2), 0);
  for (const exec::View& view : program.outputs) {
    const Shape& s = program.buffers.at(view.buffer).shape;
    EXPECT_EQ(prepared->Read(view).size(), static_cast<size_t>(batch) * view.channels * s.h * s.w);
  }
}

// ---- Options ------------------------------------------------------------------

TEST(CudaOptionsTest, ParsesTheBackendNameAndRefusesWhatItDoesNotKnow) {
  CudaOptions o = ParseCudaOptions("cuda", 3);
  EXPECT_EQ(o.gpu, 3);
  EXPECT_EQ(o.math, CudaOptions::Math::kFp32);
  EXPECT_EQ(o.algo, CudaOptions::Algo::kExhaustive);
  EXPECT_EQ(o.workspace_mb, 256);
  o = ParseCudaOptions("cuda:1,math=tf32,algo=heuristic,workspace_mb=64", 3);
  EXPECT_EQ(o.gpu, 1);
  EXPECT_EQ(o.math, CudaOptions::Math::kTf32);
  EXPECT_EQ(o.algo, CudaOptions::Algo::kHeuristic);
  EXPECT_EQ(o.workspace_mb, 64);
  EXPECT_EQ(ParseCudaOptions("cuda,workspace_mb=0").workspace_mb, 0);
  EXPECT_TRUE(IsCudaName("cuda:0"));
  EXPECT_FALSE(IsCudaName("cudax"));
  const std::map<std::string, std::string> bad{{"cuda:", "the GPU"},
                                               {"cuda:x", "the GPU"},
                                               {"cuda,", "option is missing"},
                                               {"cuda,math=fp16", "math must be fp32 or tf32"},
                                               {"cuda,algo=fast", "algo must"},
                                               {"cuda,workspace_mb=-1", "workspace_mb must"},
                                               {"cuda,threads=2", "unknown option 'threads'"},
                                               {"cudax", "the grammar is"}};
  for (const auto& [name, message] : bad) {
    try {
      ParseCudaOptions(name);
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(message)) << name;
    }
  }
}

// ---- The device ------------------------------------------------------------------

TEST(CudaDeviceTest, NoDriverOrNoSuchGpuIsOneClearError) {
  auto journal = std::make_shared<Journal>();
  journal->device_count_error = Code::kNoDevice;
  try {
    Device(journal);
    ADD_FAILURE() << "a device without a driver";
  } catch (const exec::ExecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no usable GPU"));
    EXPECT_THAT(e.what(), HasSubstr("cudaGetDeviceCount"));
  }
  journal = std::make_shared<Journal>();
  CudaOptions second;
  second.gpu = 1;
  try {
    Device(journal, second);
    ADD_FAILURE() << "GPU 1 of one";
  } catch (const exec::ExecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("GPU 1 asked for; this machine has 1 GPU (0)"));
  }
}

TEST(CudaDeviceTest, FingerprintNamesTheGpuItsSoftwareAndTheSettingsThatChangeTimings) {
  auto journal = std::make_shared<Journal>();
  const auto fp32 = Device(journal);
  const std::string& fp = fp32->Info().fingerprint;
  EXPECT_EQ(fp32->Info().backend, "cuda");
  EXPECT_FALSE(fp32->Info().simulated);
  for (const char* part : {"gpu=Recorded GPU 0", "|cc=8.0", "|sms=108", "|memory_mib=40960",
                           "|clock_khz=1410000", "|driver=13.0", "|runtime=13.0", "|cudnn=91900",
                           "|math=fp32", "|algo=exhaustive", "|workspace_mb=256"}) {
    EXPECT_THAT(fp, HasSubstr(part));
  }
  CudaOptions tf32;
  tf32.math = CudaOptions::Math::kTf32;
  EXPECT_NE(Device(journal, tf32)->Info().fingerprint, fp);
  CudaOptions heuristic;
  heuristic.algo = CudaOptions::Algo::kHeuristic;
  EXPECT_NE(Device(journal, heuristic)->Info().fingerprint, fp);
}

TEST(CudaDeviceTest, LanesRunOnTheirOwnStreamAndHandleForkedFromAndJoinedToTheOrigin) {
  auto journal = std::make_shared<Journal>();
  Network net;
  {
    auto device = Device(journal);
    const StageSpec spec =
        net.Spec(Strategy::kParallel, {{"conv3", "conv1_after_conv3"}, {"max_pool"}, {"sep_conv"}});
    const exec::Program program = exec::StageProgram(spec);
    ASSERT_EQ(program.stages.size(), 1u);
    ASSERT_EQ(program.stages[0].lanes.size(), 3u);
    Exercise(*device, program, 2);
    ExpectNoViolations(*journal);
    // Every enqueued op: its handle bound to one stream, and three streams,
    // one per lane, each with a handle of its own.
    std::map<void*, std::set<void*>> streams_of_handle;
    std::set<void*> streams;
    for (const cuda::testing::OpRecord& op : journal->ops) {
      streams.insert(op.stream);
      if (op.handle != nullptr) streams_of_handle[op.handle].insert(op.stream);
    }
    EXPECT_EQ(streams.size(), 3u);
    EXPECT_EQ(streams_of_handle.size(), 3u);
    for (const auto& [handle, on] : streams_of_handle) EXPECT_EQ(on.size(), 1u);
    // Two timed runs: each forks once and joins three lanes.
    EXPECT_GE(Count(journal->calls, "cudaStreamWaitEvent"), 2 * 6);
  }
  ExpectNothingAlive(*journal);
}

TEST(CudaDeviceTest, EveryOpKindPreparesRunsAndReplaysWithinItsBuffersAtBatch1And2) {
  Network net;
  for (int batch : {1, 2}) {
    for (const Node& node : net.graph().nodes) {
      if (node.op.kind == OpKind::kInput) continue;
      SCOPED_TRACE(node.name + " at batch " + std::to_string(batch));
      auto journal = std::make_shared<Journal>();
      {
        auto device = Device(journal);
        Exercise(*device, exec::StageProgram(net.Spec(Strategy::kParallel, {{node.name}})), batch);
      }
      ExpectNoViolations(*journal);
      ExpectNothingAlive(*journal);
    }
  }
}

//! The library calls one run of the one-op stage `name` enqueues.
std::vector<std::string> OpsOf(const std::string& name) {
  Network net;
  auto journal = std::make_shared<Journal>();
  auto device = Device(journal);
  auto prepared = device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{name}})), 1);
  journal->ops.clear();
  prepared->TimedRuns(1);
  std::vector<std::string> calls;
  for (const cuda::testing::OpRecord& op : journal->ops) calls.push_back(op.call);
  return calls;
}

TEST(CudaDeviceTest, ConvolutionsFuseBiasAndReluOnlyAndAddTheRestAsCalls) {
  using V = std::vector<std::string>;
  EXPECT_EQ(OpsOf("conv3"), V{"cudnnConvolutionBiasActivationForward"});
  EXPECT_EQ(OpsOf("grouped_dilated"),
            (V{"cudnnConvolutionForward", "cudnnAddTensor", "cudnnActivationForward"}));
  EXPECT_EQ(OpsOf("conv_tanh_nobias"), (V{"cudnnConvolutionForward", "cudnnActivationForward"}));
  // relu, then a depthwise convolution with bias and no activation, then a
  // pointwise one with relu.
  EXPECT_EQ(OpsOf("sep_conv"), (V{"cudnnActivationForward", "cudnnConvolutionForward",
                                  "cudnnAddTensor", "cudnnConvolutionBiasActivationForward"}));
  EXPECT_EQ(OpsOf("max_pool"), V{"cudnnPoolingForward"});
  EXPECT_EQ(OpsOf("add"), (V{"cudnnOpTensor", "cudnnOpTensor"}));
  EXPECT_EQ(OpsOf("summed_slices"), (V{"CopyStrided", "CopyStrided(accumulate)"}));
}

TEST(CudaDeviceTest, AveragePoolsCountOrLeaveOutTheirPaddingAsTheOpSays) {
  Network net;
  for (const auto& [name, mode] :
       {std::pair{"avg_pool", cuda::PoolingMode::kAverageCountingPadding},
        std::pair{"avg_pool_excluding_padding", cuda::PoolingMode::kAverageExcludingPadding},
        std::pair{"max_pool", cuda::PoolingMode::kMax}}) {
    auto journal = std::make_shared<Journal>();
    {
      auto device = Device(journal);
      device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{name}})), 1);
    }
    EXPECT_EQ(journal->pooling_modes, std::vector<cuda::PoolingMode>{mode}) << name;
  }
}

// Registered kinds: cuDNN's own call, on the strided views as they are.
TEST(CudaDeviceTest, SoftmaxIsOneCuDnnCallOnTheViewsThemselves) {
  using V = std::vector<std::string>;
  EXPECT_EQ(OpsOf("softmax"), V{"cudnnSoftmaxForward"});
  EXPECT_EQ(OpsOf("logsoftmax_on_slice"), V{"cudnnSoftmaxForward(log)"});
}

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
    std::vector<std::string> calls;
    for (const cuda::testing::OpRecord& op : journal->ops) calls.push_back(op.call);
    EXPECT_EQ(calls, (std::vector<std::string>{"cudnnConvolutionForward", "cudnnAddTensor",
                                               "cudnnActivationForward"}));
    EXPECT_GT(prepared->TimedReplays(1), 0);
  }
  ExpectNoViolations(*journal);

  // Another error from the trial is the prepare's error, typed.
  auto failing = std::make_shared<Journal>();
  auto other = Device(failing);
  failing->fail_code = Code::kFailure;
  for (int k = 1; k < 400 && failing->injected != "cudnnConvolutionBiasActivationForward"; ++k) {
    failing->fail_at = failing->counted_calls + k;
    failing->injected.clear();
    try {
      other->Prepare(program, 1);
    } catch (const exec::ExecError& e) {
      if (failing->injected == "cudnnConvolutionBiasActivationForward") {
        EXPECT_EQ(e.kind(), MeasureError::kBackendFailure);
        EXPECT_THAT(e.what(), HasSubstr("trying the convolution fused with bias and relu"));
      }
    }
  }
  EXPECT_EQ(failing->injected, "cudnnConvolutionBiasActivationForward");
  failing->fail_at = 0;
  ExpectNothingAlive(*failing);
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

TEST(CudaDeviceTest, AMergeStageIsOneConvolutionOfTheStackedWeights) {
  Network net;
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    Exercise(*device, exec::StageProgram(net.Spec(Strategy::kMerge, {{"conv3"}, {"conv1"}})), 2);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
  int convolutions = 0;
  for (const cuda::testing::OpRecord& op : journal->ops) {
    convolutions += op.call.find("Convolution") != std::string::npos;
  }
  EXPECT_EQ(convolutions, 4) << "one tried when prepared (bias and relu fused), one per timed run "
                                "and one captured (replays launch the graph)";
}

TEST(CudaDeviceTest, AlgorithmsThatFailedOrNeedTooMuchWorkspaceAreSkippedAndFoundOncePerProblem) {
  Network net;
  const exec::Program program = exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}}));
  auto journal = std::make_shared<Journal>();
  auto device = Device(journal);
  {
    auto prepared = device->Prepare(program, 1);
    // The search's 256 MiB scratch is given back once prepared: what stays
    // is storage, weights and the chosen algorithm's 1 MiB.
    EXPECT_GT(journal->live_bytes, int64_t{1} << 20);
    EXPECT_LT(journal->live_bytes, int64_t{4} << 20);
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

TEST(CudaDeviceTest, AProgramLargerThanTheFreeMemoryIsRefusedBeforeAnyAllocation) {
  Network net;
  auto journal = std::make_shared<Journal>();
  journal->free_bytes = 4096;
  auto device = Device(journal);
  try {
    device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}})), 64);
    ADD_FAILURE() << "prepared beyond the free memory";
  } catch (const exec::ExecError& e) {
    EXPECT_EQ(e.kind(), MeasureError::kOutOfMemory);
    EXPECT_THAT(e.what(), HasSubstr("free"));
  }
  EXPECT_EQ(Count(journal->calls, "cudaMalloc"), 0);
}

TEST(CudaDeviceTest, ReplayCapturesOnceFromTheOriginAndLaunchesPerRun) {
  Network net;
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    auto prepared = device->Prepare(
        exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}, {"avg_pool"}, {"relu"}})), 1);
    prepared->TimedReplays(4);
    prepared->TimedReplays(3);
    EXPECT_EQ(journal->launches, 7);
    EXPECT_EQ(Count(journal->calls, "cudaStreamBeginCapture"), 1);
    EXPECT_EQ(Count(journal->calls, "cudaGraphInstantiateWithFlags"), 1);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

TEST(CudaDeviceTest, AWholeNetworkOnItsMemoryPlanStaysWithinItsBuffers) {
  const Graph graph = BuildZooModel("squeezenet");
  std::vector<Stage> stages;
  for (const Block& block : graph.blocks) {
    for (Stage& stage : coordinator::GreedySchedule(graph, block.Operators())) {
      stages.push_back(std::move(stage));
    }
  }
  const exec::NetworkProgram network =
      exec::BuildNetworkProgram(graph, stages, exec::WeightStore::Random(graph, 7));
  ASSERT_GT(network.memory.concat_views, 0) << "concatenations as views are what this checks";
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    Exercise(*device, network.program, 2);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

// ios-run --cuda-graph: the network is timed by streams, then recorded and
// its replays timed the same way; the output is read after both.
TEST(CudaDeviceTest, IosRunTimesStreamsThenReplaysOfTheRecordedNetwork) {
  const Graph graph = BuildZooModel("squeezenet");
  const exec::WeightStore weights = exec::WeightStore::Random(graph, 3);
  const Shape in = graph.node(0).output;
  const std::vector<float> input(static_cast<size_t>(in.c) * in.h * in.w, 0.5f);
  MeasureSettings timing;
  timing.warmup = 1;
  timing.number = 1;
  timing.repeat = 4;
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    const run::Execution execution = run::Execute(*device, graph, run::GreedyNetworkSchedule(graph),
                                                  weights, 1, input, &timing, &timing);
    ASSERT_TRUE(execution.replay.has_value());
    EXPECT_EQ(execution.replay->repeats, 4);
    EXPECT_EQ(journal->launches, 5) << "a warmup and four timed replays";
    EXPECT_EQ(execution.replay_output.size(), execution.output.size());
    EXPECT_EQ(Count(journal->calls, "cudaStreamBeginCapture"), 1);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
  // A device that cannot replay says so.
  auto reference = exec::MakeReferenceDevice();
  EXPECT_THROW(run::Execute(*reference, graph, run::GreedyNetworkSchedule(graph), weights, 1, input,
                            nullptr, &timing),
               Error);
}

MeasureError KindOf(Code code) {
  switch (code) {
    case Code::kOutOfMemory:
      return MeasureError::kOutOfMemory;
    case Code::kUnsupported:
      return MeasureError::kUnsupported;
    default:
      return MeasureError::kBackendFailure;
  }
}

// Every call of a prepare, write, run, replay and read fails once, in turn,
// with each kind of error: the error comes back typed, nothing is left
// alive or half-captured, and the same device then works.
TEST(CudaDeviceTest, AFailureAtAnyCallIsTypedLeavesNothingBehindAndTheDeviceWorksAfter) {
  Network net;
  const exec::Program program = exec::StageProgram(
      net.Spec(Strategy::kParallel, {{"conv3", "conv1_after_conv3"}, {"add"}, {"sep_conv"}}));
  for (const Code code : {Code::kOutOfMemory, Code::kUnsupported, Code::kFailure}) {
    auto journal = std::make_shared<Journal>();
    auto device = Device(journal);
    Exercise(*device, program, 2);  // finds the algorithms; later runs reuse them
    const int before = journal->counted_calls;
    Exercise(*device, program, 2);
    const int calls = journal->counted_calls - before;
    ASSERT_GT(calls, 50);
    ExpectNothingAlive(*journal);
    for (int k = 1; k <= calls; ++k) {
      journal->fail_code = code;
      journal->fail_at = journal->counted_calls + k;
      const size_t first_call = journal->calls.size();
      journal->injected.clear();
      bool threw = false;
      try {
        Exercise(*device, program, 2);
      } catch (const exec::ExecError& e) {
        threw = true;
        EXPECT_EQ(e.kind(), KindOf(code)) << "call " << k << ": " << e.what();
        EXPECT_THAT(e.what(), HasSubstr("injected failure"));
      }
      ASSERT_FALSE(journal->injected.empty()) << "call " << k << " was never made";
      if (!threw) {
        // Only a failed allocation of the algorithm search's scratch is
        // recovered from (a smaller one is tried).
        ASSERT_EQ(code, Code::kOutOfMemory)
            << "call " << k << " (" << journal->injected << ") failed silently";
        EXPECT_GE(
            Count({journal->calls.begin() + static_cast<long>(first_call), journal->calls.end()},
                  "cudaMalloc"),
            1);
      }
      journal->fail_at = 0;
      ExpectNothingAlive(*journal);
      Exercise(*device, program, 2);  // usable again
    }
    ExpectNoViolations(*journal);
  }
}

// The same for a device's first prepare, where algorithms are searched.
TEST(CudaDeviceTest, AFailureDuringTheFirstPrepareIsTypedAndLeavesNothingBehind) {
  Network net;
  const exec::Program program =
      exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}, {"grouped_dilated"}}));
  int calls = 0;
  {
    auto journal = std::make_shared<Journal>();
    auto device = Device(journal);
    const int before = journal->counted_calls;
    Exercise(*device, program, 1);
    calls = journal->counted_calls - before;
  }
  for (int k = 1; k <= calls; ++k) {
    auto journal = std::make_shared<Journal>();
    {
      auto device = Device(journal);
      journal->fail_code = Code::kFailure;
      journal->fail_at = journal->counted_calls + k;
      EXPECT_THROW(Exercise(*device, program, 1), exec::ExecError) << "call " << k;
      EXPECT_EQ(journal->counted_calls >= journal->fail_at, true);
      journal->fail_at = 0;
      Exercise(*device, program, 1);
    }
    ExpectNothingAlive(*journal);
    ExpectNoViolations(*journal);
  }
}

// The fake's own checks have teeth: each breach it is meant to see, it sees.
TEST(RecordingApiTest, SeesEachBreachOfTheProtocol) {
  using cuda::Event;
  using cuda::Stream;
  auto breaches = [](auto&& misuse) {
    auto journal = std::make_shared<Journal>();
    RecordingApi api(journal);
    misuse(api);
    return journal->violations;
  };
  // Allocating between two timing events.
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 Stream s;
                 Event start, end;
                 void* p = nullptr;
                 api.CreateStream(s);
                 api.CreateEvent(start, true);
                 api.CreateEvent(end, true);
                 api.RecordEvent(start, s);
                 api.Malloc(16, p);
                 api.RecordEvent(end, s);
               }).empty());
  // A side stream working in a timed region without a fork, and not joined.
  EXPECT_EQ(breaches([](RecordingApi& api) {
              Stream origin, side;
              Event start, end;
              void* p = nullptr;
              api.Malloc(64, p);
              api.CreateStream(origin);
              api.CreateStream(side);
              api.CreateEvent(start, true);
              api.CreateEvent(end, true);
              api.RecordEvent(start, origin);
              api.CopyStrided(side, static_cast<float*>(p), 0, static_cast<float*>(p), 0, 4, 1,
                              false);
              api.RecordEvent(end, origin);
            }).size(),
            2u);
  // Waiting on an event never recorded; destroying twice; past the end.
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 Stream s;
                 Event e;
                 api.CreateStream(s);
                 api.CreateEvent(e, false);
                 api.WaitEvent(s, e);
               }).empty());
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 Stream s;
                 api.CreateStream(s);
                 api.DestroyStream(s);
                 api.DestroyStream(s);
               }).empty());
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 void* p = nullptr;
                 api.Malloc(64, p);
                 api.CopyToDevice(static_cast<char*>(p) + 32, nullptr, 64);
               }).empty());
  // A capture that ends with a forked stream not joined.
  EXPECT_FALSE(breaches([](RecordingApi& api) {
                 Stream origin, side;
                 Event fork;
                 cuda::Graph graph;
                 void* p = nullptr;
                 api.Malloc(64, p);
                 api.CreateStream(origin);
                 api.CreateStream(side);
                 api.CreateEvent(fork, false);
                 api.BeginCapture(origin);
                 api.RecordEvent(fork, origin);
                 api.WaitEvent(side, fork);
                 api.CopyStrided(side, static_cast<float*>(p), 0, static_cast<float*>(p), 0, 4, 1,
                                 false);
                 api.EndCapture(origin, graph);
               }).empty());
}

TEST(CudaDeviceTest, AStickyErrorLosesTheDeviceForGood) {
  Network net;
  const exec::Program program = exec::StageProgram(net.Spec(Strategy::kParallel, {{"conv3"}}));
  auto journal = std::make_shared<Journal>();
  auto device = Device(journal);
  auto prepared = device->Prepare(program, 1);
  journal->fail_code = Code::kDeviceLost;
  journal->fail_at = journal->counted_calls + 2;  // inside the timed run
  EXPECT_THROW(prepared->TimedRuns(1), exec::DeviceLostError);
  prepared.reset();
  journal->fail_at = 0;
  EXPECT_THROW(device->Prepare(program, 1), exec::DeviceLostError);
  ExpectNothingAlive(*journal);
}

TEST(CudaDeviceTest, ABackendWhoseDeviceIsLostSaysSoAndMeasuresNothingMore) {
  Network net;
  auto journal = std::make_shared<Journal>();
  auto backend = MakeExecBackend(Device(journal));
  const StageSpec spec = net.Spec(Strategy::kParallel, {{"conv3"}});
  ASSERT_TRUE(backend->Measure(spec, 1, MeasureSettings{}).ok());
  EXPECT_FALSE(backend->Lost());
  journal->fail_code = Code::kDeviceLost;
  journal->fail_at = journal->counted_calls + 3;
  const MeasureResult lost = backend->Measure(spec, 1, MeasureSettings{});
  EXPECT_EQ(lost.error, MeasureError::kBackendFailure);
  EXPECT_THAT(lost.error_message, HasSubstr("lost"));
  EXPECT_TRUE(backend->Lost());
  const int calls = journal->counted_calls;
  EXPECT_FALSE(backend->Measure(spec, 1, MeasureSettings{}).ok());
  EXPECT_EQ(journal->counted_calls, calls) << "nothing more is asked of a lost device";
}

TEST(CudaDeviceTest, ABackendOnTheDeviceMeasuresWithTheSharedProtocol) {
  Network net;
  auto journal = std::make_shared<Journal>();
  journal->elapsed_ms = 6.0f;  // per timed call of `number` runs
  auto backend = MakeExecBackend(Device(journal));
  MeasureSettings settings;
  settings.warmup = 1;
  settings.number = 3;
  settings.repeat = 2;
  const MeasureResult result =
      backend->Measure(net.Spec(Strategy::kParallel, {{"conv3"}, {"max_pool"}}), 1, settings);
  ASSERT_TRUE(result.ok()) << result.error_message;
  EXPECT_DOUBLE_EQ(result.median_ms, 2.0);
  EXPECT_EQ(result.samples, 6);
  // The algorithm chosen (the first that ran, 1) goes on the record.
  EXPECT_EQ(result.detail, "cudnn conv algo 1/fma");
  ExpectNoViolations(*journal);
}

}  // namespace
}  // namespace ios::worker
