#include "worker/cuda/cuda_kernels.h"

namespace ios::cuda {
namespace {

// One thread per float of a sample's range (grid-stride), blockIdx.y picks
// the sample: slices of a channel range and sums of a term's slices are
// short, strided copies that cuDNN has no single call for.
__global__ void CopyStridedKernel(float* dst, int64_t dst_stride, const float* src,
                                  int64_t src_stride, int64_t count, int sample_base,
                                  bool accumulate) {
  const int64_t sample = sample_base + blockIdx.y;
  float* to = dst + sample * dst_stride;
  const float* from = src + sample * src_stride;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    to[i] = accumulate ? to[i] + from[i] : from[i];
  }
}

__global__ void HardSwishStridedKernel(float* dst, int64_t dst_stride, const float* src,
                                       int64_t src_stride, int64_t count, int sample_base) {
  const int64_t sample = sample_base + blockIdx.y;
  float* to = dst + sample * dst_stride;
  const float* from = src + sample * src_stride;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = from[i];
    to[i] = x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
  }
}

//! Launches `launch(blocks, samples, base)` over every sample, in chunks of
//! gridDim.y's limit; the first launch error, or cudaSuccess.
template <class Launch>
cudaError_t ForEachSampleChunk(int64_t count, int batch, const Launch& launch) {
  if (count <= 0 || batch <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 1024;         // grid-stride beyond this
  constexpr int kMaxSamplesPerLaunch = 65535;  // gridDim.y's limit
  const int64_t needed = (count + kThreads - 1) / kThreads;
  const auto blocks = static_cast<unsigned>(needed < kMaxBlocks ? needed : kMaxBlocks);
  for (int base = 0; base < batch; base += kMaxSamplesPerLaunch) {
    const int samples = batch - base < kMaxSamplesPerLaunch ? batch - base : kMaxSamplesPerLaunch;
    launch(dim3(blocks, static_cast<unsigned>(samples)), kThreads, base);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t LaunchCopyStrided(cudaStream_t stream, float* dst, int64_t dst_stride, const float* src,
                              int64_t src_stride, int64_t count, int batch, bool accumulate) {
  return ForEachSampleChunk(count, batch, [&](dim3 grid, int threads, int base) {
    CopyStridedKernel<<<grid, threads, 0, stream>>>(dst, dst_stride, src, src_stride, count, base,
                                                    accumulate);
  });
}

cudaError_t LaunchHardSwishStrided(cudaStream_t stream, float* dst, int64_t dst_stride,
                                   const float* src, int64_t src_stride, int64_t count, int batch) {
  return ForEachSampleChunk(count, batch, [&](dim3 grid, int threads, int base) {
    HardSwishStridedKernel<<<grid, threads, 0, stream>>>(dst, dst_stride, src, src_stride, count,
                                                         base);
  });
}

}  // namespace ios::cuda
