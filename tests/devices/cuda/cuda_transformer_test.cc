// The transformer kinds (common/op_kinds_transformer.h) on the cuda device
// against the recording fake: attention and embed_tokens are one launch of
// our kernel each (cuda_kernels.cu) on the channel views as they are,
// embed_tokens reading weights uploaded once at prepare; the fake computes
// both as the kernels do, matching the reference device. The GPU's check
// is cuda_gpu_test.cc's.
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

const std::string kUpload = "cudaMemcpy(host to device)";

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
      auto journal = std::make_shared<Journal>();
      const std::vector<float> got = RunOnComputingFake(program, journal, batch);
      const run::Comparison c =
          run::Compare(got, RunChannelViewProgram(*reference, program, batch));
      EXPECT_FALSE(c.sizes_differ);
      EXPECT_LE(c.max_abs_diff, 1e-5);
      EXPECT_EQ(journal->attentions.size(), 1u);
      ExpectNoViolations(*journal);
      ExpectNothingAlive(*journal);
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
        auto journal = std::make_shared<Journal>();
        const std::vector<float> got = RunOnComputingFake(program, journal, batch);
        const run::Comparison c =
            run::Compare(got, RunChannelViewProgram(*reference, program, batch));
        EXPECT_FALSE(c.sizes_differ);
        EXPECT_EQ(c.max_abs_diff, 0);
        ExpectNoViolations(*journal);
        ExpectNothingAlive(*journal);
      }
    }
  }
}

}  // namespace
}  // namespace ios::devices::cuda_testing
