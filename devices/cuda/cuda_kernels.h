// Our own CUDA kernels, for what cuDNN does not express (cuda_kernels.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ios::cuda {

//! For each of `batch` samples: `count` floats from src + n * src_stride to
//! dst + n * dst_stride, added to dst when `accumulate`. Returns the launch's
//! error (cudaSuccess when enqueued).
cudaError_t LaunchCopyStrided(cudaStream_t stream, float* dst, int64_t dst_stride, const float* src,
                              int64_t src_stride, int64_t count, int batch, bool accumulate);

//! The activations cuDNN has no mode for, as common/activation.cc and
//! common/op_kinds.cc define them: hardswish x * relu6(x + 3) / 6,
//! hardsigmoid relu6(x + 3) / 6, leaky relu x or alpha * x below zero, gelu
//! 0.5 x (1 + erf(x / sqrt 2)), gelu_tanh 0.5 x (1 + tanh(sqrt(2 / pi) (x +
//! 0.044715 x^3))) and the hard_sigmoid kind's clip(alpha * x + beta, 0, 1).
enum class KernelActivation {
  kHardSwish,
  kHardSigmoid,
  kLeakyRelu,
  kGelu,
  kGeluTanh,
  kHardSigmoidAlphaBeta
};

//! The same walk, dst = function(src); dst may be src. `alpha`: leaky
//! relu's slope and, with `beta`, hard sigmoid's line; unused by the others.
cudaError_t LaunchActivationStrided(cudaStream_t stream, KernelActivation function, float alpha,
                                    float beta, float* dst, int64_t dst_stride, const float* src,
                                    int64_t src_stride, int64_t count, int batch);

//! cuda_api.h's MaxPoolShape, field for field: this header is compiled as
//! C++17 by nvcc (CUDA 11.4 knows no C++20), which cuda_api.h is not.
struct MaxPoolGeometry {
  int batch, channels, in_h, in_w, out_h, out_w;
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  int64_t src_batch_stride, dst_batch_stride;
};

//! Max pooling over windows clipped to the input.
cudaError_t LaunchMaxPool(cudaStream_t stream, const MaxPoolGeometry& shape, const float* src,
                          float* dst);

//! LayerNorm over the channels of each pixel, no affine (common/op_kinds.cc
//! defines it): (x - mean) / sqrt(variance + eps), the variance the mean of
//! squared deviations. NCHW views: channel c of a pixel `c * pixels` floats
//! after channel 0, sample n at src + n * src_stride, dst + n * dst_stride.
//! dst may be src.
cudaError_t LaunchLayerNorm(cudaStream_t stream, float eps, int batch, int channels, int64_t pixels,
                            const float* src, int64_t src_stride, float* dst, int64_t dst_stride);

//! Multi-head scaled dot-product attention (common/op_kinds_transformer.h)
//! of `batch` samples: per sample, `channels` query planes of `tokens`
//! floats at src + n * src_stride, the keys' `channels * tokens` floats
//! after them, the values' after those; head h's output on channels [h *
//! d, (h + 1) * d), d = channels / heads, at dst + n * dst_stride, a plane
//! per channel. Requires d <= 4096 (cudaErrorInvalidValue otherwise) and
//! dst apart from src.
cudaError_t LaunchAttention(cudaStream_t stream, int batch, int channels, int heads, int64_t tokens,
                            const float* src, int64_t src_stride, float* dst, int64_t dst_stride);

//! embed_tokens: per sample, dst's channel c, token t (`pixels + 1` tokens
//! with a class token, `pixels` without one: `class_token` null) is
//! position[c * tokens + t] plus class_token[c] at t = 0 with a class
//! token, src's pixel t (t - 1 with one) otherwise; the planes of src from
//! src + n * src_stride, those of dst from dst + n * dst_stride.
cudaError_t LaunchEmbedTokens(cudaStream_t stream, int batch, int channels, int64_t pixels,
                              const float* src, int64_t src_stride, const float* position,
                              const float* class_token, float* dst, int64_t dst_stride);

//! Swin's shifted-window attention (the window_attention kind,
//! common/op_kinds_transformer.h): LaunchAttention's queries, keys and
//! values on a height x width map, rolled up and left by `shift` and cut
//! into window x window windows whose tokens attend to each other only;
//! each score plus `bias` (heads x window^2 x window^2) and, when shifted,
//! -100 between tokens of different regions; each output at its pixel
//! before the roll. With `grid` (MaxViT's grid attention) window (gy, gx)
//! is instead the pixels (ty * height / window + gy, tx * width / window +
//! gx), token (ty, tx) row-major, never shifted. Requires the window to
//! divide the map, 0 <= shift < window (0 with grid), d <= 4096
//! (cudaErrorInvalidValue otherwise) and dst apart from src. `scale`, when
//! not 0, multiplies the scores instead of 1/sqrt(d).
cudaError_t LaunchWindowAttention(cudaStream_t stream, int batch, int channels, int heads,
                                  int height, int width, int window, int shift, bool grid,
                                  float scale, const float* src, int64_t src_stride,
                                  const float* bias, float* dst, int64_t dst_stride);

//! space_to_depth: per sample, dst's channel (dx * block + dy) * channels
//! + c at (y, x) is src's channel c at (block * y + dy, block * x + dx);
//! the planes of src from src + n * src_stride, those of dst from dst + n
//! * dst_stride. Requires the block to divide height and width
//! (cudaErrorInvalidValue otherwise).
cudaError_t LaunchSpaceToDepth(cudaStream_t stream, int batch, int channels, int height, int width,
                               int block, const float* src, int64_t src_stride, float* dst,
                               int64_t dst_stride);

}  // namespace ios::cuda
