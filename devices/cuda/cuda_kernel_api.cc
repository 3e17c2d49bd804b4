// cuda::Api's calls of our own kernels on a real GPU (cuda_kernel_api.h):
// our types in, the launch's error out as a Status naming the call.
#include "devices/cuda/cuda_kernel_api.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "devices/cuda/cuda_kernels.h"
#include "devices/cuda/cuda_real_support.h"

namespace ios::cuda {

Status KernelApi::CopyStrided(Stream stream, float* dst, int64_t dst_stride, const float* src,
                              int64_t src_stride, int64_t count, int batch, bool accumulate) {
  return FromCuda(LaunchCopyStrided(As<CUstream_st>(stream.value), dst, dst_stride, src, src_stride,
                                    count, batch, accumulate),
                  accumulate ? "ios::cuda::CopyStrided(accumulate)" : "ios::cuda::CopyStrided");
}

Status KernelApi::MaxPool(Stream stream, const MaxPoolShape& shape, const float* src, float* dst) {
  const MaxPoolGeometry g{shape.batch,
                          shape.channels,
                          shape.in_h,
                          shape.in_w,
                          shape.out_h,
                          shape.out_w,
                          shape.kernel_h,
                          shape.kernel_w,
                          shape.stride_h,
                          shape.stride_w,
                          shape.pad_h,
                          shape.pad_w,
                          shape.src_batch_stride,
                          shape.dst_batch_stride};
  return FromCuda(LaunchMaxPool(As<CUstream_st>(stream.value), g, src, dst), "ios::cuda::MaxPool");
}

Status KernelApi::ActivateStrided(Stream stream, ActivationMode mode, ActivationParams params,
                                  float* dst, int64_t dst_stride, const float* src,
                                  int64_t src_stride, int64_t count, int batch) {
  constexpr std::pair<ActivationMode, KernelActivation> kFunctions[] = {
      {ActivationMode::kHardSwish, KernelActivation::kHardSwish},
      {ActivationMode::kHardSigmoid, KernelActivation::kHardSigmoid},
      {ActivationMode::kLeakyRelu, KernelActivation::kLeakyRelu},
      {ActivationMode::kGelu, KernelActivation::kGelu},
      {ActivationMode::kGeluTanh, KernelActivation::kGeluTanh},
      {ActivationMode::kHardSigmoidAlphaBeta, KernelActivation::kHardSigmoidAlphaBeta},
  };
  for (const auto& [ours, function] : kFunctions) {
    if (ours != mode) continue;
    return FromCuda(
        LaunchActivationStrided(As<CUstream_st>(stream.value), function, params.alpha, params.beta,
                                dst, dst_stride, src, src_stride, count, batch),
        "ios::cuda::ActivateStrided");
  }
  return {Code::kUnsupported, "ios::cuda::ActivateStrided",
          "our kernel computes hardswish, hardsigmoid (either), leaky relu, gelu and gelu_tanh "
          "only"};
}

Status KernelApi::LayerNormStrided(Stream stream, const LayerNormShape& shape, float eps,
                                   const float* src, float* dst) {
  return FromCuda(
      LaunchLayerNorm(As<CUstream_st>(stream.value), eps, shape.batch, shape.channels, shape.pixels,
                      src, shape.src_batch_stride, dst, shape.dst_batch_stride),
      "ios::cuda::LayerNormStrided");
}

Status KernelApi::AttentionStrided(Stream stream, const AttentionShape& shape, const float* src,
                                   float* dst) {
  if (shape.heads < 1 || shape.channels % shape.heads != 0 ||
      shape.channels / shape.heads > kMaxAttentionHeadChannels) {
    return {Code::kUnsupported, "ios::cuda::AttentionStrided",
            "our kernel takes heads that divide the channels, of at most " +
                std::to_string(kMaxAttentionHeadChannels) + " channels each"};
  }
  return FromCuda(
      LaunchAttention(As<CUstream_st>(stream.value), shape.batch, shape.channels, shape.heads,
                      shape.tokens, src, shape.src_batch_stride, dst, shape.dst_batch_stride),
      "ios::cuda::AttentionStrided");
}

Status KernelApi::EmbedTokensStrided(Stream stream, const EmbedTokensShape& shape, const float* src,
                                     const float* position, const float* class_token, float* dst) {
  if (shape.class_token != (class_token != nullptr)) {
    return {Code::kRefused, "ios::cuda::EmbedTokensStrided",
            shape.class_token ? "a class token without its values" : "class token values unasked"};
  }
  return FromCuda(LaunchEmbedTokens(As<CUstream_st>(stream.value), shape.batch, shape.channels,
                                    shape.pixels, src, shape.src_batch_stride, position,
                                    class_token, dst, shape.dst_batch_stride),
                  "ios::cuda::EmbedTokensStrided");
}

Status KernelApi::WindowAttentionStrided(Stream stream, const WindowAttentionShape& shape,
                                         const float* src, const float* bias, float* dst) {
  if (shape.heads < 1 || shape.channels % shape.heads != 0 ||
      shape.channels / shape.heads > kMaxAttentionHeadChannels) {
    return {Code::kUnsupported, "ios::cuda::WindowAttentionStrided",
            "our kernel takes heads that divide the channels, of at most " +
                std::to_string(kMaxAttentionHeadChannels) + " channels each"};
  }
  if (shape.window < 1 || shape.height % shape.window != 0 || shape.width % shape.window != 0 ||
      shape.shift < 0 || shape.shift >= shape.window || (shape.grid && shape.shift != 0) ||
      bias == nullptr) {
    return {Code::kRefused, "ios::cuda::WindowAttentionStrided",
            "a window that does not divide the map, a shift not below it (or any with a grid), "
            "or no bias"};
  }
  return FromCuda(LaunchWindowAttention(As<CUstream_st>(stream.value), shape.batch, shape.channels,
                                        shape.heads, shape.height, shape.width, shape.window,
                                        shape.shift, shape.grid, shape.scale, src,
                                        shape.src_batch_stride, bias, dst, shape.dst_batch_stride),
                  "ios::cuda::WindowAttentionStrided");
}

Status KernelApi::SpaceToDepthStrided(Stream stream, const SpaceToDepthShape& shape,
                                      const float* src, float* dst) {
  if (shape.block < 1 || shape.height % shape.block != 0 || shape.width % shape.block != 0) {
    return {Code::kRefused, "ios::cuda::SpaceToDepthStrided",
            "a block that does not divide the map"};
  }
  return FromCuda(LaunchSpaceToDepth(As<CUstream_st>(stream.value), shape.batch, shape.channels,
                                     shape.height, shape.width, shape.block, src,
                                     shape.src_batch_stride, dst, shape.dst_batch_stride),
                  "ios::cuda::SpaceToDepthStrided");
}

}  // namespace ios::cuda
