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

//! The same walk, dst = src * relu6(src + 3) / 6 (PyTorch's Hardswish);
//! dst may be src.
cudaError_t LaunchHardSwishStrided(cudaStream_t stream, float* dst, int64_t dst_stride,
                                   const float* src, int64_t src_stride, int64_t count, int batch);

}  // namespace ios::cuda
