// The cuda backend on a real GPU (label `gpu`): every op kind, concurrent
// and merge stages and a whole network compute what the naive reference
// device (or the cpu backend) computes, within 1e-3 of the largest value
// with strict FP32; a replayed CUDA graph computes what the streams did; the
// a stage timed as executed computes what its streamed run did, and
// programs sharing the device's pool compute what they should; the
// backend measures and refuses an absurd batch as unsupported (beyond
// cuDNN's int tensor extents); channel views at unaligned offsets and the
// fused convolution over an output full of NaN compute what the reference
// device computes, and so do channel shuffles, layer norms, attention,
// embed_tokens, window attention and space_to_depth between channel views.
// Without a GPU (or a driver) every test skips and says why. docs/gpu.md
// lists what to run on a GPU machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/zoo.h"
#include "devices/cuda/cuda_api_real.h"
#include "devices/exec_backend.h"
#include "devices/linked.h"
#include "exec/device.h"
#include "exec/program.h"
#include "exec/weights.h"
#include "run/network_run.h"
#include "tests/devices/cuda/channel_view_program.h"
#include "tests/devices/cuda/channel_views.h"
#include "tests/devices/op_network.h"

namespace ios::devices {
namespace {

constexpr double kTolerance = 1e-3;

class CudaGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      device_ = MakeRealCudaDevice(CudaOptions{});
    } catch (const Error& e) {
      GTEST_SKIP() << "no GPU to run on: " << e.what();
    }
  }

  //! Runs `program` once on `device` with seeded inputs; returns its outputs.
  static std::vector<std::vector<float>> RunOnce(exec::Device& device, const exec::Program& program,
                                                 int batch) {
    auto prepared = device.Prepare(program, batch);
    for (size_t i = 0; i < program.inputs.size(); ++i) {
      const Shape& s = program.buffers.at(program.inputs[i]).shape;
      prepared->Write(program.inputs[i],
                      exec::SeededValues(static_cast<size_t>(batch) * s.c * s.h * s.w, i + 1));
    }
    prepared->TimedRuns(1);
    std::vector<std::vector<float>> outputs;
    for (const exec::View& view : program.outputs) outputs.push_back(prepared->Read(view));
    return outputs;
  }

  void ExpectSameAsReference(const StageSpec& spec, int batch) {
    SCOPED_TRACE(spec.Describe() + " at batch " + std::to_string(batch));
    const exec::Program program = exec::StageProgram(spec, 5);
    auto reference = exec::MakeReferenceDevice();
    const auto want = RunOnce(*reference, program, batch);
    const auto got = RunOnce(*device_, program, batch);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const run::Comparison c = run::Compare(got[i], want[i]);
      EXPECT_TRUE(c.Within(kTolerance)) << "output " << i << ": max |diff| " << c.max_abs_diff
                                        << " against max |value| " << c.max_abs_reference;
    }
  }

  std::unique_ptr<exec::Device> device_;
  Network net_;
};

TEST_F(CudaGpuTest, EveryOpKindComputesWhatTheReferenceDeviceComputes) {
  for (int batch : {1, 3}) {
    for (const Node& node : net_.graph().nodes) {
      if (node.op.kind == OpKind::kInput) continue;
      ExpectSameAsReference(net_.Spec(Strategy::kParallel, {{node.name}}), batch);
    }
  }
}

// One cudnnTransformTensor on permuting strides (cuda_compile.cc), between
// channel views whose neighbours it must leave alone: a copy, so exact.
// ShuffleNet V2's first stage shuffles 116 channels in 2 groups at 28x28.
TEST_F(CudaGpuTest, ChannelShufflesOnChannelViewsComputeWhatTheReferenceComputesExactly) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [channels, groups, size] :
       {std::tuple{6, 3, 5}, std::tuple{6, 2, 5}, std::tuple{58, 2, 7}, std::tuple{116, 2, 28},
        std::tuple{48, 8, 3}}) {
    for (int batch : {1, 3}) {
      SCOPED_TRACE(std::to_string(channels) + " channels in " + std::to_string(groups) +
                   " groups at batch " + std::to_string(batch));
      const exec::Program program = ChannelShuffleProgram(channels, groups, size, size);
      const run::Comparison c = run::Compare(RunChannelViewProgram(*device_, program, batch),
                                             RunChannelViewProgram(*reference, program, batch));
      EXPECT_FALSE(c.sizes_differ);
      EXPECT_EQ(c.max_abs_diff, 0);
    }
  }
}

// A flatten (one cudnnTransformTensor) from a channel view into a view of a
// wider vector, in both orders: BlazeFace's heads (2 and 96 channels at
// 16x16 and 8x8) and an odd shape.
TEST_F(CudaGpuTest, FlattensIntoViewsOfAVectorComputeWhatTheReferenceComputesExactly) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [channels, h, w] :
       {std::tuple{2, 16, 16}, std::tuple{96, 8, 8}, std::tuple{5, 3, 7}}) {
    for (const bool channels_last : {false, true}) {
      for (int batch : {1, 3}) {
        SCOPED_TRACE(std::to_string(channels) + "x" + std::to_string(h) + "x" + std::to_string(w) +
                     (channels_last ? " channels last" : "") + " at batch " +
                     std::to_string(batch));
        const exec::Program program = FlattenProgram(channels, channels_last, h, w);
        const run::Comparison c = run::Compare(RunChannelViewProgram(*device_, program, batch),
                                               RunChannelViewProgram(*reference, program, batch));
        EXPECT_FALSE(c.sizes_differ);
        EXPECT_EQ(c.max_abs_diff, 0);
      }
    }
  }
}

// Our kernel (cuda_kernels.cu) between channel views whose neighbours it
// must leave alone, against the reference device within 1e-5 (both sum in
// double): ConvNeXt-T's 96 channels at 56x56 and 768 at 7x7, an odd 7, and
// values around 100 (a large mean, where E[x^2] - mean^2 would cancel).
TEST_F(CudaGpuTest, LayerNormsOnChannelViewsComputeWhatTheReferenceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [channels, size] :
       {std::tuple{7, 5}, std::tuple{96, 9}, std::tuple{96, 56}, std::tuple{768, 7}}) {
    for (const float shift : {0.0f, 100.0f}) {
      for (int batch : {1, 3}) {
        SCOPED_TRACE(std::to_string(channels) + " channels of " + std::to_string(size) + "x" +
                     std::to_string(size) + " shifted by " + std::to_string(shift) + " at batch " +
                     std::to_string(batch));
        const exec::Program program = LayerNormProgram(channels, 1e-6f, size, size);
        const run::Comparison c =
            run::Compare(RunChannelViewProgram(*device_, program, batch, shift),
                         RunChannelViewProgram(*reference, program, batch, shift));
        EXPECT_FALSE(c.sizes_differ);
        EXPECT_LE(c.max_abs_diff, 1e-5);
      }
    }
  }
}

// Our attention kernel (cuda_kernels.cu) between channel views whose
// neighbours it must leave alone, against the reference device (in
// double) within 1e-5 (the recording fake's float mirror of the kernel
// comes within 1e-7): 4 heads of 16 over 17 tokens in a row and over a 3x5
// map, one head of 8 over 144 tokens and 2 of 16 over 1600 (several tiles
// of keys: the online softmax's rescaling), 3 heads of 5, and ViT-B's 12
// heads of 64 over 197 tokens.
TEST_F(CudaGpuTest, AttentionOnChannelViewsComputesWhatTheReferenceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [heads, channels, h, w] :
       {std::tuple{4, 64, 17, 1}, std::tuple{4, 64, 3, 5}, std::tuple{1, 8, 12, 12},
        std::tuple{2, 32, 40, 40}, std::tuple{3, 15, 2, 2}, std::tuple{12, 768, 197, 1}}) {
    for (int batch : {1, 3}) {
      const exec::Program program = AttentionProgram(heads, channels, h, w);
      SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                   std::to_string(batch));
      const run::Comparison c = run::Compare(RunChannelViewProgram(*device_, program, batch),
                                             RunChannelViewProgram(*reference, program, batch));
      EXPECT_FALSE(c.sizes_differ);
      EXPECT_LE(c.max_abs_diff, 1e-5);
    }
  }
}

// Our embed_tokens kernel: one float addition per value, as the reference
// device's, so exactly its values; with and without a class token, ViT-B's
// 768 channels of 14x14 among the cases.
TEST_F(CudaGpuTest, EmbedTokensOnChannelViewsComputeWhatTheReferenceComputesExactly) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [channels, h, w] :
       {std::tuple{6, 3, 4}, std::tuple{5, 1, 1}, std::tuple{768, 14, 14}}) {
    for (const bool class_token : {true, false}) {
      for (int batch : {1, 3}) {
        const exec::Program program = EmbedTokensProgram(channels, class_token, h, w);
        SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                     std::to_string(batch));
        const run::Comparison c = run::Compare(RunChannelViewProgram(*device_, program, batch),
                                               RunChannelViewProgram(*reference, program, batch));
        EXPECT_FALSE(c.sizes_differ);
        EXPECT_EQ(c.max_abs_diff, 0);
      }
    }
  }
}

// Our window attention kernel (cuda_kernels.cu's AttentionKernel over a
// shifted window's keys) between channel views, against the reference
// device within 1e-5: 2 heads of 4 on 8x8 in 4x4 windows, unshifted and
// shifted by 2; one head of 5 on 4x6 in 2x2 windows shifted by 1; 12x12
// windows (two tiles of keys) shifted by 5; and Swin-T's stages: 3 heads
// of 32 on 56x56 and 24 of 32 on 7x7 (one window: the shift is 0 there),
// in 7x7 windows shifted by 3.
TEST_F(CudaGpuTest, WindowAttentionOnChannelViewsComputesWhatTheReferenceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [heads, channels, window, shift, h, w] :
       {std::tuple{2, 8, 4, 0, 8, 8}, std::tuple{2, 8, 4, 2, 8, 8}, std::tuple{1, 5, 2, 1, 4, 6},
        std::tuple{2, 6, 12, 5, 12, 24}, std::tuple{3, 96, 7, 3, 56, 56},
        std::tuple{24, 768, 7, 0, 7, 7}}) {
    for (int batch : {1, 3}) {
      const exec::Program program = WindowAttentionProgram(heads, channels, window, shift, h, w);
      SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                   std::to_string(batch));
      const run::Comparison c = run::Compare(RunChannelViewProgram(*device_, program, batch),
                                             RunChannelViewProgram(*reference, program, batch));
      EXPECT_FALSE(c.sizes_differ);
      EXPECT_LE(c.max_abs_diff, 1e-5);
    }
  }
}

// Our window attention kernel over MaxViT's grid windows (tokens spread
// height / window rows and width / window columns apart) between channel
// views, against the reference device within 1e-5: 2 heads of 4 on 8x8 in
// a 4x4 grid; one head of 3 on 9x6 in a 3x3 grid; MaxViT-T's first grid
// block, 2 heads of 32 on 14x14 in a 7x7 grid.
TEST_F(CudaGpuTest, GridAttentionOnChannelViewsComputesWhatTheReferenceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [heads, channels, window, h, w] :
       {std::tuple{2, 8, 4, 8, 8}, std::tuple{1, 3, 3, 9, 6}, std::tuple{2, 64, 7, 14, 14}}) {
    for (int batch : {1, 3}) {
      const exec::Program program = WindowAttentionProgram(heads, channels, window, 0, h, w, true);
      SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                   std::to_string(batch));
      const run::Comparison c = run::Compare(RunChannelViewProgram(*device_, program, batch),
                                             RunChannelViewProgram(*reference, program, batch));
      EXPECT_FALSE(c.sizes_differ);
      EXPECT_LE(c.max_abs_diff, 1e-5);
    }
  }
}

// Our space_to_depth kernel is a copy: exactly the reference's values,
// blocks of 2 (Swin-T's first merge, 96 channels of 56x56, among them), 3
// and 1.
TEST_F(CudaGpuTest, SpaceToDepthOnChannelViewsComputesWhatTheReferenceComputesExactly) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [channels, block, h, w] : {std::tuple{3, 2, 4, 6}, std::tuple{5, 3, 6, 3},
                                              std::tuple{2, 1, 3, 3}, std::tuple{96, 2, 56, 56}}) {
    for (int batch : {1, 3}) {
      const exec::Program program = SpaceToDepthProgram(channels, block, h, w);
      SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                   std::to_string(batch));
      const run::Comparison c = run::Compare(RunChannelViewProgram(*device_, program, batch),
                                             RunChannelViewProgram(*reference, program, batch));
      EXPECT_FALSE(c.sizes_differ);
      EXPECT_EQ(c.max_abs_diff, 0);
    }
  }
}

TEST_F(CudaGpuTest, ConcurrentAndMergeStagesComputeWhatTheReferenceDeviceComputes) {
  for (int batch : {1, 2}) {
    ExpectSameAsReference(
        net_.Spec(Strategy::kParallel,
                  {{"conv3", "conv1_after_conv3"}, {"max_pool"}, {"sep_conv"}, {"summed_slices"}}),
        batch);
    ExpectSameAsReference(net_.Spec(Strategy::kMerge, {{"conv3"}, {"conv1"}}), batch);
  }
}

TEST_F(CudaGpuTest, AReplayedGraphComputesWhatTheStreamsComputed) {
  const exec::Program program = exec::StageProgram(
      net_.Spec(Strategy::kParallel, {{"conv3", "conv1_after_conv3"}, {"avg_pool"}}), 5);
  auto prepared = device_->Prepare(program, 2);
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const Shape& s = program.buffers.at(program.inputs[i]).shape;
    prepared->Write(program.inputs[i],
                    exec::SeededValues(static_cast<size_t>(2) * s.c * s.h * s.w, i + 1));
  }
  prepared->TimedRuns(1);
  const std::vector<float> streamed = prepared->Read(program.outputs[0]);
  ASSERT_TRUE(prepared->CanReplay());
  EXPECT_GT(prepared->TimedReplays(3), 0);
  const run::Comparison c = run::Compare(prepared->Read(program.outputs[0]), streamed);
  EXPECT_TRUE(c.Within(1e-6)) << c.max_abs_diff;
}

// A stage timed as executed (kExecutedCopies copies in one recorded graph,
// each forked and joined on the pooled streams) computes what one streamed
// run computed, and takes time.
TEST_F(CudaGpuTest, AStageTimedAsExecutedComputesWhatItsStreamedRunComputed) {
  const exec::Program program = exec::StageProgram(
      net_.Spec(Strategy::kParallel, {{"conv3", "conv1_after_conv3"}, {"max_pool"}, {"add"}}), 5);
  auto prepared = device_->Prepare(program, 2);
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const Shape& s = program.buffers.at(program.inputs[i]).shape;
    prepared->Write(program.inputs[i],
                    exec::SeededValues(static_cast<size_t>(2) * s.c * s.h * s.w, i + 1));
  }
  prepared->TimedRuns(1);
  const std::vector<float> streamed = prepared->Read(program.outputs[0]);
  EXPECT_GT(prepared->TimedRunsAsExecuted(9, true), 0);
  EXPECT_GT(prepared->TimedRunsAsExecuted(1, false), 0);
  const run::Comparison c = run::Compare(prepared->Read(program.outputs[0]), streamed);
  EXPECT_TRUE(c.Within(1e-6)) << c.max_abs_diff;
}

// Two programs alive at once share the device's pooled streams, handles and
// workspaces: interleaved, each still computes what the reference does.
TEST_F(CudaGpuTest, ProgramsSharingTheDevicesPoolComputeWhatTheReferenceComputes) {
  const exec::Program wide = exec::StageProgram(
      net_.Spec(Strategy::kParallel, {{"conv3"}, {"grouped_dilated"}, {"sep_conv"}}), 5);
  const exec::Program narrow =
      exec::StageProgram(net_.Spec(Strategy::kParallel, {{"depthwise_s2"}}), 5);
  auto reference = exec::MakeReferenceDevice();
  const auto want_wide = RunOnce(*reference, wide, 2);
  const auto want_narrow = RunOnce(*reference, narrow, 2);
  auto keep_alive = device_->Prepare(narrow, 2);
  keep_alive->TimedRunsAsExecuted(4, true);
  const auto got_wide = RunOnce(*device_, wide, 2);
  const auto got_narrow = RunOnce(*device_, narrow, 2);
  for (size_t i = 0; i < got_wide.size(); ++i) {
    EXPECT_TRUE(run::Compare(got_wide[i], want_wide[i]).Within(kTolerance)) << "wide " << i;
  }
  for (size_t i = 0; i < got_narrow.size(); ++i) {
    EXPECT_TRUE(run::Compare(got_narrow[i], want_narrow[i]).Within(kTolerance)) << "narrow " << i;
  }
}

TEST_F(CudaGpuTest, AWholeNetworkComputesWhatTheCpuComputes) {
  const Graph graph = BuildZooModel("squeezenet");
  const exec::WeightStore weights = exec::WeightStore::Random(graph, 11);
  const Shape in = graph.node(0).output;
  const std::vector<float> input =
      exec::SeededValues(static_cast<size_t>(2) * in.c * in.h * in.w, 11);
  std::unique_ptr<exec::Device> cpu;
  try {
    cpu = devices::LinkedRegistry().OpenDevice("cpu");
  } catch (const Error& e) {
    GTEST_SKIP() << "no cpu backend in this build to compare with: " << e.what();
  }
  const run::Execution want =
      run::Execute(*cpu, graph, run::SequentialNetworkSchedule(graph), weights, 2, input, nullptr);
  const run::Execution got =
      run::Execute(*device_, graph, run::GreedyNetworkSchedule(graph), weights, 2, input, nullptr);
  const run::Comparison c = run::Compare(got.output, want.output);
  EXPECT_TRUE(c.Within(kTolerance)) << c.max_abs_diff << " of " << c.max_abs_reference;
}

// 4194304 x 8 x 9 x 9 floats pass int's range: refused before cuDNN is
// asked (it answered cudnnSetTensor4dDescriptorEx with NOT_SUPPORTED on an
// H100, whose memory would have held the tensor), naming the limit.
TEST_F(CudaGpuTest, TheBackendMeasuresAndRefusesAnAbsurdBatchAsBeyondCuDnnsTensorExtents) {
  auto backend = MakeExecBackend(std::move(device_));
  MeasureSettings quick;
  quick.warmup = 1;
  quick.number = 2;
  quick.repeat = 2;
  const StageSpec spec = net_.Spec(Strategy::kParallel, {{"conv3"}, {"max_pool"}});
  const MeasureResult ok = backend->Measure(spec, 1, quick);
  ASSERT_TRUE(ok.ok()) << ok.error_message;
  EXPECT_GT(ok.median_ms, 0);
  const MeasureResult huge = backend->Measure(spec, 1 << 22, quick);
  EXPECT_EQ(huge.error, MeasureError::kUnsupported) << huge.error_message;
  EXPECT_THAT(huge.error_message, ::testing::HasSubstr("2147483647"));
  EXPECT_FALSE(backend->Lost());
}

// Inception V3's 17x17 and 35x35 maps at an odd channel offset are only
// 4-byte aligned: each view gets an algorithm searched at its own alignment
// (the aligned view's choice, reused, computed wrong on an H100).
TEST_F(CudaGpuTest, ConvolutionsOnChannelViewsAtAnOddOffsetComputeWhatTheReferenceComputes) {
  for (const int size : {17, 35}) {
    const Graph graph = ChannelViewsGraph(size);
    ExpectSameAsReference(ChannelViewsStage(graph), 2);
  }
}

// The fused call's no-residual form (z = y, alpha2 = 0) over an output full
// of NaN: if cuDNN read z despite alpha2 = 0, 0 * NaN would show.
TEST_F(CudaGpuTest, TheFusedConvolutionIgnoresWhatItsOutputHeldBefore) {
  for (const char* name : {"conv3", "conv1"}) {
    SCOPED_TRACE(name);
    const exec::Program program = exec::StageProgram(net_.Spec(Strategy::kParallel, {{name}}), 5);
    auto reference = exec::MakeReferenceDevice();
    const auto want = RunOnce(*reference, program, 2);
    auto prepared = device_->Prepare(program, 2);
    for (size_t i = 0; i < program.inputs.size(); ++i) {
      const Shape& s = program.buffers.at(program.inputs[i]).shape;
      prepared->Write(program.inputs[i],
                      exec::SeededValues(static_cast<size_t>(2) * s.c * s.h * s.w, i + 1));
    }
    const int out = program.outputs.at(0).buffer;
    const Shape& o = program.buffers.at(out).shape;
    prepared->Write(out, std::vector<float>(static_cast<size_t>(2) * o.c * o.h * o.w,
                                            std::numeric_limits<float>::quiet_NaN()));
    prepared->TimedRuns(1);
    const std::vector<float> got = prepared->Read(program.outputs[0]);
    for (float v : got) ASSERT_FALSE(std::isnan(v)) << "a NaN came through from the output";
    const run::Comparison c = run::Compare(got, want.at(0));
    EXPECT_TRUE(c.Within(kTolerance)) << c.max_abs_diff << " of " << c.max_abs_reference;
  }
}

}  // namespace
}  // namespace ios::devices
