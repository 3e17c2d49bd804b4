// The calls of cuda::Api that launch our own kernels (cuda_kernels.cu), for
// what cuDNN has no call for. The real Api (cuda_api_real.cc) derives from
// this class and adds the CUDA runtime's and cuDNN's calls; the recording
// fake (tests/devices/cuda/) implements the same calls on its own.
#pragma once

#include <cstdint>

#include "devices/cuda/cuda_api.h"

namespace ios::cuda {

//! cuda::Api's kernel calls on a real GPU: each enqueues one kernel launch
//! (or one per chunk of samples) on `stream` and returns the launch's
//! error. Holds nothing.
class KernelApi : public Api {
 public:
  Status CopyStrided(Stream stream, float* dst, int64_t dst_stride, const float* src,
                     int64_t src_stride, int64_t count, int batch, bool accumulate) override;
  Status MaxPool(Stream stream, const MaxPoolShape& shape, const float* src, float* dst) override;
  Status ActivateStrided(Stream stream, ActivationMode mode, ActivationParams params, float* dst,
                         int64_t dst_stride, const float* src, int64_t src_stride, int64_t count,
                         int batch) override;
  Status LayerNormStrided(Stream stream, const LayerNormShape& shape, float eps, const float* src,
                          float* dst) override;
  Status AttentionStrided(Stream stream, const AttentionShape& shape, const float* src,
                          float* dst) override;
  Status EmbedTokensStrided(Stream stream, const EmbedTokensShape& shape, const float* src,
                            const float* position, const float* class_token, float* dst) override;
  Status WindowAttentionStrided(Stream stream, const WindowAttentionShape& shape, const float* src,
                                const float* bias, float* dst) override;
  Status SpaceToDepthStrided(Stream stream, const SpaceToDepthShape& shape, const float* src,
                             float* dst) override;
};

}  // namespace ios::cuda
