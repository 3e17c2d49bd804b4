// The layer norm over channels (common/op_kinds.h, ConvNeXt's) on the cuda
// device against the recording fake: one launch of our kernel
// (cuda_kernels.cu) on the channel views as they are, which the fake
// computes as the kernel does, matching the reference device; the GPU's
// check is cuda_gpu_test.cc's.
#include <gtest/gtest.h>

#include <cmath>
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

using cuda::testing::LayerNormCall;

// 7 channels of 3 x 5 at batch 3: the input view at channel 2 of 10, the
// output's at channel 3 of 12; a pixel's channels are a plane (15 floats)
// apart, a sample the whole buffer after the previous one. What the kernel
// is handed is all it needs; no cuDNN descriptor is made for it.
TEST(CudaLayerNormTest, IsOneLaunchOfOurKernelOnTheChannelViewsAsTheyAre) {
  constexpr int kBatch = 3, kChannels = 7, kPixels = 3 * 5;
  const exec::Program program = LayerNormProgram(kChannels, 1e-6f, 3, 5);
  const int out_c = program.buffers[1].shape.c;
  auto journal = std::make_shared<Journal>();
  std::vector<float> got = RunOnComputingFake(program, journal, kBatch);
  EXPECT_EQ(OpCalls(*journal), std::vector<std::string>{"LayerNormStrided"});
  EXPECT_EQ(Count(journal->calls, "cudnnCreateTensorDescriptor"), 0);
  const cuda::LayerNormShape shape{kBatch, kChannels, kPixels, 10 * kPixels, 12 * kPixels};
  EXPECT_EQ(journal->layer_norms, (std::vector<LayerNormCall>{{shape, 1e-6f}}));
  // Whatever the reference says: each pixel's channels have mean 0 and
  // variance 1 (less eps' share), and the channels around the view are
  // left alone.
  ASSERT_EQ(got.size(), static_cast<size_t>(kBatch) * out_c * kPixels);
  for (int n = 0; n < kBatch; ++n) {
    for (int pixel = 0; pixel < kPixels; ++pixel) {
      double sum = 0, squares = 0;
      for (int c = 0; c < out_c; ++c) {
        const float v = got[(static_cast<size_t>(n) * out_c + c) * kPixels + pixel];
        const bool inside = c >= kViewOutputOffset && c < kViewOutputOffset + kChannels;
        if (!inside) {
          ASSERT_EQ(v, -7.0f) << "sample " << n << " channel " << c << " pixel " << pixel;
          continue;
        }
        sum += v;
        squares += double{v} * v;
      }
      EXPECT_NEAR(sum / kChannels, 0, 1e-6) << "sample " << n << " pixel " << pixel;
      EXPECT_NEAR(squares / kChannels, 1, 1e-3) << "sample " << n << " pixel " << pixel;
    }
  }
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

// ConvNeXt-T's first 96 channels and an odd 7, at batch 3, on values
// around 0 and around 100 (a large mean: E[x^2] - mean^2 would cancel).
TEST(CudaLayerNormTest, OnChannelViewsItComputesWhatTheReferenceDeviceComputes) {
  auto reference = exec::MakeReferenceDevice();
  for (const int channels : {7, 96}) {
    for (const float shift : {0.0f, 100.0f}) {
      SCOPED_TRACE(std::to_string(channels) + " channels, values shifted by " +
                   std::to_string(shift));
      const exec::Program program = LayerNormProgram(channels, 1e-5f, 4, 6);
      auto journal = std::make_shared<Journal>();
      std::vector<float> got = RunOnComputingFake(program, journal, 3, shift);
      const run::Comparison c =
          run::Compare(got, RunChannelViewProgram(*reference, program, 3, shift));
      EXPECT_FALSE(c.sizes_differ);
      EXPECT_LE(c.max_abs_diff, 1e-5);
      ExpectNoViolations(*journal);
      ExpectNothingAlive(*journal);
    }
  }
}

// The every-kind network's layer norms (tests/devices/op_network.h): over
// a concatenation of 5 and 3 channels with the default eps, and over 5
// channels of a slice with eps set on the op; what the kernel is handed.
TEST(CudaLayerNormTest, TheOpsChannelsAndEpsReachTheKernel) {
  Network net;
  for (const auto& [name, channels, eps] :
       {std::tuple{"layernorm_of_concat", 8, 1e-5f}, std::tuple{"layernorm_on_slice", 5, 1e-6f}}) {
    SCOPED_TRACE(name);
    auto journal = std::make_shared<Journal>();
    {
      auto device = Device(journal);
      device->Prepare(exec::StageProgram(net.Spec(Strategy::kParallel, {{name}})), 2)->TimedRuns(1);
    }
    ASSERT_EQ(journal->layer_norms.size(), 1u);
    const LayerNormCall& call = journal->layer_norms[0];
    EXPECT_EQ(call.shape.batch, 2);
    EXPECT_EQ(call.shape.channels, channels);
    EXPECT_EQ(call.shape.pixels, 9 * 9);
    EXPECT_EQ(call.eps, eps);
    ExpectNoViolations(*journal);
  }
}

// Our kernel takes int64 strides: a layer norm whose tensors cuDNN's int
// descriptors could not hold (2^22 x 10 x 9 x 9 floats) is prepared and
// run, where a cuDNN call on them is refused before it is made.
TEST(CudaLayerNormTest, IsNotHeldToCuDnnsIntTensorExtents) {
  const exec::Program program = LayerNormProgram(7, 1e-6f, 9, 9);
  auto journal = std::make_shared<Journal>();
  journal->free_bytes = size_t{80} << 30;  // the 28 GiB of storage fit
  {
    auto device = Device(journal);
    auto prepared = device->Prepare(program, 1 << 22);
    journal->ops.clear();
    prepared->TimedRuns(1);
  }
  ASSERT_EQ(journal->layer_norms.size(), 1u);
  EXPECT_EQ(journal->layer_norms[0].shape.batch, 1 << 22);
  EXPECT_EQ(journal->layer_norms[0].shape.dst_batch_stride, 12 * 81);
  ExpectNoViolations(*journal);
  ExpectNothingAlive(*journal);
}

}  // namespace
}  // namespace ios::devices::cuda_testing
