// The transformer kinds (common/op_kinds_transformer.h) on the cuda device
// against the recording fake: attention, embed_tokens, window attention
// and space_to_depth are one launch of our kernel each (cuda_kernels.cu) on
// the channel views as they are, embed_tokens and window attention reading
// weights uploaded once at prepare; the fake computes them as the kernels
// do, matching the reference device. The GPU's check is cuda_gpu_test.cc's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "exec/program.h"
#include "run/network_run.h"
#include "tests/devices/cuda/channel_view_program.h"
#include "tests/devices/cuda/device_test_support.h"

namespace ios::devices::cuda_testing {
namespace {

using cuda::testing::AttentionCall;
using cuda::testing::EmbedTokensCall;
using cuda::testing::SpaceToDepthCall;
using cuda::testing::WindowAttentionCall;

const std::string kUpload = "cudaMemcpy(host to device)";

//! Runs `program` on the computing fake at `batch`: its output within
//! `tolerance` of the reference device's (0: the same values), no protocol
//! violation, nothing left alive. Returns the journal, for the launches.
std::shared_ptr<Journal> ExpectComputesAsTheReference(exec::Device& reference,
                                                      const exec::Program& program, int batch,
                                                      double tolerance) {
  auto journal = std::make_shared<Journal>();
  const std::vector<float> got = RunOnComputingFake(program, journal, batch);
  const run::Comparison c = run::Compare(got, RunChannelViewProgram(reference, program, batch));
  EXPECT_FALSE(c.sizes_differ);
  EXPECT_LE(c.max_abs_diff, tolerance);
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
  return journal;
}

// 4 heads of 16 channels over 17 tokens (a 17 x 1 map) at batch 3: the
// input view at channel 2 of 195, the output's at channel 3 of 69. The
// kernel is handed the views' addresses and batch strides, no cuDNN
// descriptor, and the step takes part in captures and replays like any.
TEST(CudaTransformerTest, AttentionIsOneLaunchOfOurKernelOnTheChannelViewsAsTheyAre) {
  constexpr int kBatch = 3, kTokens = 17;
  const exec::Program program = AttentionProgram(4, 64, kTokens, 1);
  ASSERT_EQ(program.buffers[0].shape.c, 195);
  ASSERT_EQ(program.buffers[1].shape.c, 69);
  auto journal = std::make_shared<Journal>();
  RunOnComputingFake(program, journal, kBatch);
  EXPECT_EQ(OpCalls(*journal), std::vector<std::string>{"AttentionStrided"});
  EXPECT_EQ(Count(journal->calls, "cudnnCreateTensorDescriptor"), 0);
  const cuda::AttentionShape shape{kBatch, 64, 4, kTokens, 195 * kTokens, 69 * kTokens};
  EXPECT_EQ(journal->attentions, (std::vector<AttentionCall>{{shape}}));
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);

  auto exercised = std::make_shared<Journal>();
  {
    auto device = Device(exercised);
    Exercise(*device, program, kBatch);
  }
  ExpectNoViolations(*exercised);
  ExpectNothingAlive(*exercised);
}

// Against the reference device (which sums in double), on channel views
// whose neighbours must be left alone: 4 heads of 16 over 17 tokens in a
// row and over a 3 x 5 map, one head of 8 over 144 tokens (two tiles of
// keys: the softmax rescaled between them), 3 heads of 5 on a 2 x 2 map,
// and ViT-B's 12 heads of 64 over 197 tokens; batch 1 and 3.
TEST(CudaTransformerTest, AttentionComputesWhatTheReferenceDeviceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [heads, channels, h, w] :
       {std::tuple{4, 64, 17, 1}, std::tuple{4, 64, 3, 5}, std::tuple{1, 8, 12, 12},
        std::tuple{3, 15, 2, 2}, std::tuple{12, 768, 197, 1}}) {
    for (const int batch : {1, 3}) {
      if (channels == 768 && batch == 3) continue;  // the reference's time, not coverage
      const exec::Program program = AttentionProgram(heads, channels, h, w);
      SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                   std::to_string(batch));
      const auto journal = ExpectComputesAsTheReference(*reference, program, batch, 1e-5);
      EXPECT_EQ(journal->attentions.size(), 1u);
    }
  }
}

// A head wider than the kernel's shared memory holds is refused at
// prepare as unsupported (a fact about the stage), before any launch.
TEST(CudaTransformerTest, AHeadWiderThanTheKernelTakesIsUnsupported) {
  const int channels = cuda::kMaxAttentionHeadChannels + 1;
  const exec::Program program = AttentionProgram(1, channels, 1, 1);
  auto journal = std::make_shared<Journal>();
  auto device = Device(journal);
  try {
    device->Prepare(program, 1);
    ADD_FAILURE() << "prepared a head of " << channels << " channels";
  } catch (const exec::ExecError& e) {
    EXPECT_EQ(e.kind(), MeasureError::kUnsupported) << e.what();
    EXPECT_THAT(e.what(), ::testing::HasSubstr(std::to_string(cuda::kMaxAttentionHeadChannels)));
  }
  EXPECT_TRUE(journal->attentions.empty());
  device.reset();
  ExpectNothingAlive(*journal);
}

// 6 channels of 3 x 4 at batch 2, with and without a class token: the
// position embedding (and the class token's values) are copied to the GPU
// once, at prepare; every run's launch reads those copies.
TEST(CudaTransformerTest, EmbedTokensIsOneLaunchReadingWeightsUploadedOnceAtPrepare) {
  constexpr int kBatch = 2, kChannels = 6, kPixels = 12;
  for (const bool class_token : {true, false}) {
    SCOPED_TRACE(class_token ? "with a class token" : "without a class token");
    const exec::Program program = EmbedTokensProgram(kChannels, class_token, 3, 4);
    const int tokens = kPixels + (class_token ? 1 : 0);
    const int in_c = program.buffers[0].shape.c, out_c = program.buffers[1].shape.c;
    auto journal = std::make_shared<Journal>();
    {
      auto device = Device(journal);
      const int before = Count(journal->calls, kUpload);
      auto prepared = device->Prepare(program, kBatch);
      EXPECT_EQ(Count(journal->calls, kUpload) - before, class_token ? 2 : 1);
      const int prepared_uploads = Count(journal->calls, kUpload);
      prepared->TimedRuns(2);
      EXPECT_GT(prepared->TimedReplays(2), 0);
      EXPECT_EQ(Count(journal->calls, kUpload), prepared_uploads) << "weights copied per run";
    }
    ASSERT_FALSE(journal->embeds.empty());
    const EmbedTokensCall& first = journal->embeds[0];
    const cuda::EmbedTokensShape shape{
        kBatch, kChannels, kPixels, class_token, int64_t{in_c} * kPixels, int64_t{out_c} * tokens};
    EXPECT_EQ(first.shape, shape);
    EXPECT_NE(first.position, nullptr);
    EXPECT_EQ(first.class_token != nullptr, class_token);
    for (const EmbedTokensCall& call : journal->embeds) EXPECT_EQ(call, first);
    for (const cuda::testing::OpRecord& op : journal->ops) {
      EXPECT_EQ(op.call, "EmbedTokensStrided");
    }
    ExpectNoViolations(*journal);
    ExpectNothingAlive(*journal);
  }
}

// Each value is one float addition, as the reference device's: exactly its
// values, on channel views, ViT-B's 768 channels of 14 x 14 among them.
TEST(CudaTransformerTest, EmbedTokensComputesExactlyWhatTheReferenceDeviceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [channels, h, w] :
       {std::tuple{6, 3, 4}, std::tuple{5, 1, 1}, std::tuple{768, 14, 14}}) {
    for (const bool class_token : {true, false}) {
      for (const int batch : {1, 3}) {
        const exec::Program program = EmbedTokensProgram(channels, class_token, h, w);
        SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                     std::to_string(batch));
        ExpectComputesAsTheReference(*reference, program, batch, 0);
      }
    }
  }
}

// 2 heads of 4 channels on an 8 x 8 map in 4 x 4 windows shifted by 2, at
// batch 3, input view at channel 2 of 27, output's at channel 3 of 13: the
// relative position bias is copied to the GPU once, at prepare; every
// run's single launch reads that copy, with the views' addresses and batch
// strides and no cuDNN descriptor; captures and replays take the step.
TEST(CudaTransformerTest, WindowAttentionIsOneLaunchReadingItsBiasUploadedOnceAtPrepare) {
  constexpr int kBatch = 3, kTokens = 64;
  const exec::Program program = WindowAttentionProgram(2, 8, 4, 2, 8, 8);
  ASSERT_EQ(program.buffers[0].shape.c, 27);
  ASSERT_EQ(program.buffers[1].shape.c, 13);
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    const int before = Count(journal->calls, kUpload);
    auto prepared = device->Prepare(program, kBatch);
    EXPECT_EQ(Count(journal->calls, kUpload) - before, 1);
    const int prepared_uploads = Count(journal->calls, kUpload);
    prepared->TimedRuns(2);
    EXPECT_GT(prepared->TimedReplays(2), 0);
    EXPECT_EQ(Count(journal->calls, kUpload), prepared_uploads) << "bias copied per run";
  }
  EXPECT_EQ(Count(journal->calls, "cudnnCreateTensorDescriptor"), 0);
  ASSERT_FALSE(journal->window_attentions.empty());
  const WindowAttentionCall& first = journal->window_attentions[0];
  const cuda::WindowAttentionShape shape{kBatch,       8,           2, 8, 8, 4, 2, false, 0.0f,
                                         27 * kTokens, 13 * kTokens};
  EXPECT_EQ(first.shape, shape);
  EXPECT_NE(first.bias, nullptr);
  for (const WindowAttentionCall& call : journal->window_attentions) EXPECT_EQ(call, first);
  for (const cuda::testing::OpRecord& op : journal->ops) {
    EXPECT_EQ(op.call, "WindowAttentionStrided");
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);

  auto exercised = std::make_shared<Journal>();
  {
    auto device = Device(exercised);
    Exercise(*device, program, kBatch);
  }
  ExpectNoViolations(*exercised);
  ExpectNothingAlive(*exercised);
}

// Against the reference device (in double), on channel views whose
// neighbours must be left alone: 2 heads of 4 on 8 x 8 in 4 x 4 windows,
// unshifted and shifted by 2 (Swin's mask between the regions the roll
// brings together); one head of 5 on a 4 x 6 map in 2 x 2 windows shifted
// by 1; 2 heads of 2 on 9 x 9 in 3 x 3 windows shifted by 1; 12 x 12
// windows (144 keys: two tiles, the softmax rescaled between them) shifted
// by 5; and Swin-T's first block, 3 heads of 32 on 56 x 56 in 7 x 7
// windows shifted by 3 (batch 1: the reference's time). Batch 1 and 3.
TEST(CudaTransformerTest, WindowAttentionComputesWhatTheReferenceDeviceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [heads, channels, window, shift, h, w] :
       {std::tuple{2, 8, 4, 0, 8, 8}, std::tuple{2, 8, 4, 2, 8, 8}, std::tuple{1, 5, 2, 1, 4, 6},
        std::tuple{2, 4, 3, 1, 9, 9}, std::tuple{2, 6, 12, 5, 12, 24},
        std::tuple{3, 96, 7, 3, 56, 56}}) {
    for (const int batch : {1, 3}) {
      if (h == 56 && batch == 3) continue;  // the reference's time, not coverage
      const exec::Program program = WindowAttentionProgram(heads, channels, window, shift, h, w);
      SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                   std::to_string(batch));
      const auto journal = ExpectComputesAsTheReference(*reference, program, batch, 1e-5);
      EXPECT_EQ(journal->window_attentions.size(), 1u);
    }
  }
}

// The shift matters: the same input and bias give other values shifted
// than unshifted (so the comparison above does check the roll and mask).
TEST(CudaTransformerTest, ShiftedWindowsComputeOtherValuesThanUnshiftedOnes) {
  auto unshifted = std::make_shared<Journal>(), shifted = std::make_shared<Journal>();
  const std::vector<float> plain =
      RunOnComputingFake(WindowAttentionProgram(2, 8, 4, 0, 8, 8), unshifted, 1);
  const std::vector<float> rolled =
      RunOnComputingFake(WindowAttentionProgram(2, 8, 4, 2, 8, 8), shifted, 1);
  EXPECT_GT(run::Compare(plain, rolled).max_abs_diff, 1e-3);
}

// MaxViT's grid attention against the reference device (in double), on
// channel views whose neighbours must be left alone: 2 heads of 4 on 8 x 8
// in a 4 x 4 grid (tokens 2 pixels apart); one head of 3 on 9 x 6 in a 3 x
// 3 grid (3 rows and 2 columns apart); and MaxViT-T's first grid block, 2
// heads of 32 on 14 x 14 in a 7 x 7 grid (batch 1 only). Batch 1 and 3.
TEST(CudaTransformerTest, GridAttentionComputesWhatTheReferenceDeviceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [heads, channels, window, h, w] :
       {std::tuple{2, 8, 4, 8, 8}, std::tuple{1, 3, 3, 9, 6}, std::tuple{2, 64, 7, 14, 14}}) {
    for (const int batch : {1, 3}) {
      if (h == 14 && batch == 3) continue;  // the reference's time, not coverage
      const exec::Program program = WindowAttentionProgram(heads, channels, window, 0, h, w, true);
      SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                   std::to_string(batch));
      const auto journal = ExpectComputesAsTheReference(*reference, program, batch, 1e-5);
      ASSERT_EQ(journal->window_attentions.size(), 1u);
      EXPECT_TRUE(journal->window_attentions[0].shape.grid);
    }
  }
}

// MaxViT scales its scores by 1/sqrt(C), not 1/sqrt(C/heads): the
// attribute reaches the launch and the values follow it.
TEST(CudaTransformerTest, AScaleAttributeScalesTheScoresInsteadOfTheRootOfTheHeadSize) {
  auto reference = exec::MakeReferenceDevice();
  exec::Program program = WindowAttentionProgram(2, 8, 4, 0, 8, 8, true);
  RegisteredOp& op = program.stages[0].lanes[0].steps[0].op.registered;
  SetFloatAttribute(op, "scale", 0.125f, "scale test");
  auto journal = std::make_shared<Journal>();
  const std::vector<float> got = RunOnComputingFake(program, journal, 2);
  const run::Comparison c = run::Compare(got, RunChannelViewProgram(*reference, program, 2));
  EXPECT_LE(c.max_abs_diff, 1e-5);
  ASSERT_EQ(journal->window_attentions.size(), 1u);
  EXPECT_EQ(journal->window_attentions[0].shape.scale, 0.125f);
  ExpectNoViolations(*journal);
}

// 2 heads of 4 on 8 x 8 in a 4 x 4 grid at batch 3, input view at channel
// 2 of 27, output's at channel 3 of 13: one launch whose shape carries the
// grid (and no shift), the bias uploaded once at prepare.
TEST(CudaTransformerTest, GridAttentionIsOneLaunchWhoseShapeCarriesTheGrid) {
  constexpr int kBatch = 3, kTokens = 64;
  const exec::Program program = WindowAttentionProgram(2, 8, 4, 0, 8, 8, true);
  ASSERT_EQ(program.buffers[0].shape.c, 27);
  ASSERT_EQ(program.buffers[1].shape.c, 13);
  auto journal = std::make_shared<Journal>();
  {
    auto device = Device(journal);
    const int before = Count(journal->calls, kUpload);
    auto prepared = device->Prepare(program, kBatch);
    EXPECT_EQ(Count(journal->calls, kUpload) - before, 1);
    prepared->TimedRuns(2);
  }
  ASSERT_FALSE(journal->window_attentions.empty());
  const cuda::WindowAttentionShape shape{kBatch,       8,           2, 8, 8, 4, 0, true, 0.0f,
                                         27 * kTokens, 13 * kTokens};
  for (const WindowAttentionCall& call : journal->window_attentions) {
    EXPECT_EQ(call.shape, shape);
    EXPECT_NE(call.bias, nullptr);
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

// The grid matters: the same input and bias give other values in grid
// windows than in contiguous ones (so the comparison above does check the
// grid's pixels).
TEST(CudaTransformerTest, GridWindowsComputeOtherValuesThanContiguousOnes) {
  auto contiguous = std::make_shared<Journal>(), spread = std::make_shared<Journal>();
  const std::vector<float> windows =
      RunOnComputingFake(WindowAttentionProgram(2, 8, 4, 0, 8, 8), contiguous, 1);
  const std::vector<float> grid =
      RunOnComputingFake(WindowAttentionProgram(2, 8, 4, 0, 8, 8, true), spread, 1);
  EXPECT_GT(run::Compare(windows, grid).max_abs_diff, 1e-3);
}

// A head wider than the kernel's shared memory holds is refused at
// prepare as unsupported, before any launch, as for attention.
TEST(CudaTransformerTest, AWindowHeadWiderThanTheKernelTakesIsUnsupported) {
  const int channels = cuda::kMaxAttentionHeadChannels + 1;
  const exec::Program program = WindowAttentionProgram(1, channels, 1, 0, 1, 1);
  auto journal = std::make_shared<Journal>();
  auto device = Device(journal);
  try {
    device->Prepare(program, 1);
    ADD_FAILURE() << "prepared a head of " << channels << " channels";
  } catch (const exec::ExecError& e) {
    EXPECT_EQ(e.kind(), MeasureError::kUnsupported) << e.what();
    EXPECT_THAT(e.what(), ::testing::HasSubstr(std::to_string(cuda::kMaxAttentionHeadChannels)));
  }
  EXPECT_TRUE(journal->window_attentions.empty());
  device.reset();
  ExpectNothingAlive(*journal);
}

// 3 channels of 4 x 6 by 2 at batch 3: one launch of our copy kernel
// handed the views' addresses and batch strides (input at channel 2 of 6,
// output at channel 3 of 17), no cuDNN descriptor; captures and replays
// take it.
TEST(CudaTransformerTest, SpaceToDepthIsOneLaunchOfOurKernelOnTheChannelViewsAsTheyAre) {
  constexpr int kBatch = 3;
  const exec::Program program = SpaceToDepthProgram(3, 2, 4, 6);
  ASSERT_EQ(program.buffers[0].shape.c, 6);
  ASSERT_EQ(program.buffers[1].shape.c, 17);
  auto journal = std::make_shared<Journal>();
  RunOnComputingFake(program, journal, kBatch);
  EXPECT_EQ(OpCalls(*journal), std::vector<std::string>{"SpaceToDepthStrided"});
  EXPECT_EQ(Count(journal->calls, "cudnnCreateTensorDescriptor"), 0);
  const cuda::SpaceToDepthShape shape{kBatch, 3, 4, 6, 2, 6 * 24, 17 * 6};
  EXPECT_EQ(journal->space_to_depths, (std::vector<SpaceToDepthCall>{{shape}}));
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);

  auto exercised = std::make_shared<Journal>();
  {
    auto device = Device(exercised);
    Exercise(*device, program, kBatch);
  }
  ExpectNoViolations(*exercised);
  ExpectNothingAlive(*exercised);
}

// A copy: exactly the reference device's values, on channel views: block
// 2 (Swin's patch merging, its 96 channels of 56 x 56 among the cases), 3
// on a 6 x 3 and a 9 x 9 map, and 1 (the identity).
TEST(CudaTransformerTest, SpaceToDepthComputesExactlyWhatTheReferenceDeviceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const auto& [channels, block, h, w] :
       {std::tuple{3, 2, 4, 6}, std::tuple{5, 3, 6, 3}, std::tuple{4, 3, 9, 9},
        std::tuple{2, 1, 3, 3}, std::tuple{96, 2, 56, 56}}) {
    for (const int batch : {1, 3}) {
      const exec::Program program = SpaceToDepthProgram(channels, block, h, w);
      SCOPED_TRACE(program.stages[0].lanes[0].steps[0].label + " at batch " +
                   std::to_string(batch));
      const auto journal = ExpectComputesAsTheReference(*reference, program, batch, 0);
      EXPECT_EQ(journal->space_to_depths.size(), 1u);
    }
  }
}

}  // namespace
}  // namespace ios::devices::cuda_testing
