// The cuda device's use of CUDA and cuDNN, checked without a GPU against a
// recording fake (tests/devices/cuda/recording_api.h): options and the
// fingerprint; every op kind builds descriptors whose shapes and extents
// agree with its buffers; lanes of a stage run on their own stream and
// handle, forked from and joined to the origin stream; replays capture
// once; whole networks stay within their buffers. The fake computes
// nothing (numerics are the cpu backend's and the GPU tests', cuda_gpu_test)
// except what it can compute when a test asks: the channel shuffle's copy
// here, the layer norm in cuda_layernorm_test.cc. Algorithm choice:
// cuda_algorithm_test.cc; injected failures: cuda_failure_test.cc; cuDNN's refusals:
// cuda_refusal_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/zoo.h"
#include "coordinator/dp.h"
#include "devices/exec_backend.h"
#include "exec/program.h"
#include "exec/weights.h"
#include "run/network_run.h"
#include "tests/devices/cuda/channel_view_program.h"
#include "tests/devices/cuda/device_test_support.h"

namespace ios::devices::cuda_testing {
namespace {

using cuda::Code;
using ::testing::HasSubstr;

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
  return OpCalls(*journal);
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
  // A third term is added into the output (cudnnAddTensor, beta = 1).
  EXPECT_EQ(OpsOf("add"), (V{"cudnnOpTensor", "cudnnAddTensor"}));
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

// The activations cuDNN lacks: one launch of our kernel per run, after the
// convolution and its bias when fused into one, with the op's function.
TEST(CudaDeviceTest, ActivationsCuDnnLacksAreOneLaunchOfOurKernelWithTheirFunction) {
  using V = std::vector<std::string>;
  EXPECT_EQ(OpsOf("conv_gelu"),
            (V{"cudnnConvolutionForward", "cudnnAddTensor", "ActivateStrided"}));
  EXPECT_EQ(OpsOf("gelu_tanh_on_slice"), V{"ActivateStrided"});
  Network net;
  for (const auto& [name, mode] : {std::pair{"conv_gelu", cuda::ActivationMode::kGelu},
                                   std::pair{"gelu_tanh_on_slice", cuda::ActivationMode::kGeluTanh},
                                   std::pair{"conv_hardswish", cuda::ActivationMode::kHardSwish},
                                   std::pair{"hardsigmoid", cuda::ActivationMode::kHardSigmoid},
                                   std::pair{"conv_leakyrelu", cuda::ActivationMode::kLeakyRelu}}) {
    auto journal = std::make_shared<Journal>();
    {
      auto device = Device(journal);
      device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{name}})), 1)->TimedRuns(1);
    }
    EXPECT_EQ(journal->kernel_activations, std::vector<cuda::ActivationMode>{mode}) << name;
    ExpectNoViolations(*journal);
  }
}

// Registered kinds: cuDNN's own call, on the strided views as they are.
TEST(CudaDeviceTest, SoftmaxIsOneCuDnnCallOnTheViewsThemselves) {
  using V = std::vector<std::string>;
  EXPECT_EQ(OpsOf("softmax"), V{"cudnnSoftmaxForward"});
  EXPECT_EQ(OpsOf("logsoftmax_on_slice"), V{"cudnnSoftmaxForward(log)"});
}

// The channel shuffle: one cudnnTransformTensor whose strides permute the
// channels (cuda_compile.cc); the fake computes it. Input values are their
// buffer channel: 6 channels in 3 groups of 2 are read column by column.
TEST(CudaDeviceTest, AChannelShuffleIsOneTransformReadingTheGroupsColumnByColumn) {
  constexpr int kBatch = 3, kPixels = 2 * 3;
  const exec::Program program = ChannelShuffleProgram(6, 3, 2, 3);
  const int in_c = program.buffers[0].shape.c, out_c = program.buffers[1].shape.c;
  auto journal = std::make_shared<Journal>();
  journal->compute = true;
  std::vector<float> got;
  {
    auto device = Device(journal);
    auto prepared = device->Prepare(program, kBatch);
    std::vector<float> input;
    for (int n = 0; n < kBatch; ++n) {
      for (int c = 0; c < in_c; ++c) input.insert(input.end(), kPixels, static_cast<float>(c));
    }
    prepared->Write(0, input);
    prepared->Write(1, std::vector<float>(static_cast<size_t>(kBatch) * out_c * kPixels, -7.0f));
    journal->ops.clear();
    prepared->TimedRuns(1);
    got = prepared->Read(program.outputs[0]);
  }
  EXPECT_EQ(OpCalls(*journal), std::vector<std::string>{"cudnnTransformTensor"});
  // {N, groups, C/groups, H*W}: the input's view at channel 2 of 9, the
  // output's at channel 3 of 11 (the pointers carry the offsets).
  using Layout = cuda::TensorLayout;
  const Layout x{kBatch, 3, 2, kPixels, 9 * kPixels, 2 * kPixels, kPixels, 1};
  const Layout y{kBatch, 3, 2, kPixels, 11 * kPixels, kPixels, 3 * kPixels, 1};
  ASSERT_EQ(journal->transforms.size(), 1u);
  EXPECT_TRUE(journal->transforms[0] == std::pair(x, y)) << "not the permuting strides";
  const std::vector<float> channels{-7, -7, -7, 2, 4, 6, 3, 5, 7, -7, -7};
  ASSERT_EQ(got.size(), static_cast<size_t>(kBatch) * out_c * kPixels);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], channels[i / kPixels % out_c]) << "at value " << i;
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

TEST(CudaDeviceTest, ChannelShufflesOnChannelViewsComputeWhatTheReferenceDeviceComputes) {
  for (const auto& [channels, groups] : {std::pair{6, 3}, std::pair{6, 2}, std::pair{58, 2}}) {
    SCOPED_TRACE(std::to_string(channels) + " channels in " + std::to_string(groups) + " groups");
    const exec::Program program = ChannelShuffleProgram(channels, groups, 3, 5);
    auto journal = std::make_shared<Journal>();
    std::vector<float> got = RunOnComputingFake(program, journal, 3);
    auto reference = exec::MakeReferenceDevice();
    const run::Comparison c = run::Compare(got, RunChannelViewProgram(*reference, program, 3));
    EXPECT_FALSE(c.sizes_differ);
    EXPECT_EQ(c.max_abs_diff, 0) << "a copy is exact";
    ExpectNoViolations(*journal);
    ExpectNothingAlive(*journal);
  }
}

// A flatten: one cudnnTransformTensor from the input's NCHW view to the same
// dims strided as the vector orders them, into a view of a wider vector.
TEST(CudaDeviceTest, AFlattenIsOneTransformIntoAViewOfTheVector) {
  constexpr int kBatch = 2, kChannels = 3, kH = 2, kW = 4;
  for (const bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last ? "channels last" : "channels first");
    const exec::Program program = FlattenProgram(kChannels, channels_last, kH, kW);
    auto journal = std::make_shared<Journal>();
    std::vector<float> got = RunOnComputingFake(program, journal, kBatch);
    EXPECT_EQ(OpCalls(*journal), std::vector<std::string>{"cudnnTransformTensor"});
    // The input: channel 2 of 6 (2 + 3 + 1); the output: value 3 of a
    // vector of 29 (3 + 24 + 2) per sample.
    constexpr int kPlane = kH * kW, kValues = kChannels * kPlane;
    using Layout = cuda::TensorLayout;
    const Layout x{kBatch, kChannels, kH, kW, 6 * kPlane, kPlane, kW, 1};
    const Layout y = channels_last
                         ? Layout{kBatch, kChannels, kH, kW, 29, 1, kW * kChannels, kChannels}
                         : Layout{kBatch, kChannels, kH, kW, 29, kPlane, kW, 1};
    ASSERT_EQ(journal->transforms.size(), 1u);
    EXPECT_TRUE(journal->transforms[0] == std::pair(x, y)) << "not the vector's strides";
    auto reference = exec::MakeReferenceDevice();
    const run::Comparison c = run::Compare(got, RunChannelViewProgram(*reference, program, kBatch));
    EXPECT_FALSE(c.sizes_differ);
    EXPECT_EQ(c.max_abs_diff, 0) << "a copy is exact";
    ASSERT_EQ(got.size(), size_t{kBatch} * 29);
    EXPECT_EQ(got[0], -7.0f) << "the values before the view are left alone";
    EXPECT_EQ(got[3 + kValues], -7.0f) << "the values after the view are left alone";
    ExpectNoViolations(*journal);
    ExpectNothingAlive(*journal);
  }
}

// Garbage a test would compare: work the computing fake cannot compute is
// a violation, not a silent pass.
TEST(CudaDeviceTest, TheComputingFakeRefusesWorkItCannotCompute) {
  Network net;
  auto journal = std::make_shared<Journal>();
  journal->compute = true;
  {
    auto device = Device(journal);
    device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{"softmax"}})), 1)
        ->TimedRuns(1);
  }
  ASSERT_EQ(journal->violations.size(), 1u) << Listed(journal->violations);
  EXPECT_THAT(journal->violations[0], HasSubstr("cudnnSoftmaxForward: the journal computes"));
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
  EXPECT_EQ(convolutions, 4 + kExecutedCopies)
      << "one tried when prepared (bias and relu fused), one per timed run, one captured for "
         "replays (which launch the graph) and one per copy captured to time it as executed";
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

// ios-run --streams --cuda-graph: the network is timed by streams, then
// recorded and its replays timed the same way; the output is read after
// both. (Its default, the graph alone: cuda_protocol_test.cc.)
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

// ios-run and the tests open several devices in one process: the warning
// about unlocked clocks is said by the first only.
TEST(CudaDeviceTest, TheUnlockedClocksWarningIsSaidOncePerProcess) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  auto journal = std::make_shared<Journal>();
  journal->clocks_locked = false;
  OnceLatch said;
  {
    auto first = MakeCudaDevice(std::make_unique<RecordingApi>(journal), {}, said);
    auto second = MakeCudaDevice(std::make_unique<RecordingApi>(journal), {}, said);
  }
  spdlog::default_logger()->sinks().pop_back();
  const std::string text = log.str();
  size_t warnings = 0;
  for (size_t at = text.find("clocks are not locked"); at != std::string::npos;
       at = text.find("clocks are not locked", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << text;
  EXPECT_EQ(Count(journal->calls, "nvml clocks"), 1) << "the second device does not ask";
  EXPECT_TRUE(said.Done());
}

}  // namespace
}  // namespace ios::devices::cuda_testing
