#include "devices/cuda/cuda_kernels.h"
#include "devices/cuda/cuda_limits.h"

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

__device__ float Relu6(float x) { return fminf(fmaxf(x, 0.0f), 6.0f); }

// One instantiation per function: no branch on it per element.
template <KernelActivation kFunction>
__global__ void ActivationStridedKernel(float alpha, float beta, float* dst, int64_t dst_stride,
                                        const float* src, int64_t src_stride, int64_t count,
                                        int sample_base) {
  const int64_t sample = sample_base + blockIdx.y;
  float* to = dst + sample * dst_stride;
  const float* from = src + sample * src_stride;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = from[i];
    if (kFunction == KernelActivation::kHardSwish) {
      to[i] = x * Relu6(x + 3.0f) / 6.0f;
    } else if (kFunction == KernelActivation::kHardSigmoid) {
      to[i] = Relu6(x + 3.0f) / 6.0f;
    } else if (kFunction == KernelActivation::kLeakyRelu) {
      to[i] = x > 0.0f ? x : alpha * x;
    } else if (kFunction == KernelActivation::kHardSigmoidAlphaBeta) {
      to[i] = fminf(fmaxf(fmaf(alpha, x, beta), 0.0f), 1.0f);
    } else if (kFunction == KernelActivation::kGelu) {
      to[i] = 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));  // 1 / sqrt 2
    } else {  // gelu_tanh; 0.7978...: sqrt(2 / pi)
      to[i] = 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    }
  }
}

// One thread per output value (grid-stride): its window, clipped to the
// input, reduced by max. Windows always hold an input value: a window starts
// inside the input or its left padding, which is smaller than the kernel.
__global__ void MaxPoolKernel(MaxPoolGeometry g, const float* src, float* dst) {
  const int64_t plane = int64_t{g.out_h} * g.out_w;
  const int64_t total = int64_t{g.batch} * g.channels * plane;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / (g.channels * plane);
    const int64_t c = i / plane % g.channels;
    const int oy = static_cast<int>(i % plane / g.out_w);
    const int ox = static_cast<int>(i % g.out_w);
    const float* in = src + n * g.src_batch_stride + c * g.in_h * g.in_w;
    const int y0 = oy * g.stride_h - g.pad_h, x0 = ox * g.stride_w - g.pad_w;
    float best = -INFINITY;
    for (int y = max(y0, 0); y < min(y0 + g.kernel_h, g.in_h); ++y) {
      for (int x = max(x0, 0); x < min(x0 + g.kernel_w, g.in_w); ++x) {
        best = fmaxf(best, in[y * g.in_w + x]);
      }
    }
    dst[n * g.dst_batch_stride + c * plane + int64_t{oy} * g.out_w + ox] = best;
  }
}

// One thread per pixel (grid-stride over every sample's pixels), three
// passes over its channels: the mean, the variance as the mean of squared
// deviations (E[x^2] - mean^2 cancels when the mean is large), then the
// output. Neighbouring threads read neighbouring pixels of one channel
// plane, so every pass reads whole coalesced rows. The sums are doubles,
// as the reference device's are: with float sums, 768 channels of values
// around 100 come out up to 3e-4 off (1e-6 around 0), beyond the 1e-5 the
// tests ask. About five double operations per value: far below the memory
// traffic's time where doubles run at half the float rate (data-centre
// GPUs), about equal to it where they run at 1/64 (consumer cards;
// docs/gpu.md). dst may be src: a thread reads each of its pixel's values
// before it writes it, and touches no other pixel.
__global__ void LayerNormKernel(float eps, int batch, int channels, int64_t pixels,
                                const float* src, int64_t src_stride, float* dst,
                                int64_t dst_stride) {
  const int64_t total = int64_t{batch} * pixels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / pixels, pixel = i % pixels;
    const float* from = src + n * src_stride + pixel;
    float* to = dst + n * dst_stride + pixel;
    double sum = 0;
    for (int c = 0; c < channels; ++c) sum += from[c * pixels];
    const double mean = sum / channels;
    double squares = 0;
    for (int c = 0; c < channels; ++c) {
      const double deviation = from[c * pixels] - mean;
      squares += deviation * deviation;
    }
    const double scale = 1 / sqrt(squares / channels + eps);
    for (int c = 0; c < channels; ++c) {
      to[c * pixels] = static_cast<float>((from[c * pixels] - mean) * scale);
    }
  }
}

// Attention's block: four warps; a tile of keys is one key per thread.
constexpr int kAttentionThreads = 128;
constexpr int kAttentionWarps = kAttentionThreads / 32;

struct MaxOf {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOf {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <class Op>
__device__ float WarpReduce(float x, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) {
    x = op(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

// Every thread of the block calls it and gets the same value (the warps'
// results combined in one order by every thread), so that the softmax's
// running max and sum stay uniform without a broadcast. Its syncs also
// publish what the block wrote to shared memory before the call.
template <class Op>
__device__ float BlockReduce(float x, float* scratch, Op op) {
  x = WarpReduce(x, op);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  float result = scratch[0];
  for (int w = 1; w < kAttentionWarps; ++w) result = op(result, scratch[w]);
  __syncthreads();  // the next call overwrites scratch
  return result;
}

// The keys of plain attention: every token of the map, in order, no term
// added to the scores. kInOrder: key t is pixel t, so the weighted sums
// read the values' rows directly rather than through the tile's pixels.
struct EveryToken {
  static constexpr bool kInOrder = true;
  int64_t tokens;
  struct Query {
    int64_t pixel;
  };
  __host__ __device__ int64_t Queries() const { return tokens; }
  __device__ Query At(int64_t i) const { return {i}; }
  __device__ int64_t KeyCount() const { return tokens; }
  //! Key t's pixel; `added` the term its score gets.
  __device__ int64_t Key(const Query&, int64_t t, int, float& added) const {
    added = 0.0f;
    return t;
  }
};

// The keys of Swin's shifted windows: query i is pixel i of the rolled map
// (row-major), its keys its window's window^2 pixels of the rolled map,
// each found in the unrolled one through the roll, so that no rolled copy
// of the map is ever written. A key's added term is its bias (head, the
// query's place in the window, the key's) and Swin's -100 when the roll
// brought the two together from different regions; the regions are a few
// integer compares, cheaper than reading a mask. With `grid` (MaxViT's
// grid attention, shift 0: no roll, one region) a window's tokens are
// spread over the map instead, `row_step` rows and `column_step` columns
// apart (height / window, width / window), its first pixel (gy, gx) the
// window's index; Swin's are contiguous (steps of 1).
struct WindowTokens {
  static constexpr bool kInOrder = false;
  int height, width, window, shift;
  bool grid;
  int row_step, column_step;  // between a window's neighbouring tokens
  const float* bias;          // heads x window^2 x window^2
  struct Query {
    int64_t pixel;     // in the unrolled map
    int top, left;     // its window's first row and column, rolled
    int64_t bias_row;  // its row of head 0's bias
    int region;        // row region * 3 + column region
  };
  // common/op_kinds_transformer.cc's WindowRegion.
  __device__ int Region(int at, int extent) const {
    if (shift == 0 || at < extent - window) return 0;
    return at < extent - shift ? 1 : 2;
  }
  __device__ int64_t Unrolled(int y, int x) const {
    return int64_t{(y + shift) % height} * width + (x + shift) % width;
  }
  __host__ __device__ int64_t Queries() const { return int64_t{height} * width; }
  __device__ Query At(int64_t i) const {
    const int y = static_cast<int>(i / width), x = static_cast<int>(i % width);
    if (grid) {  // token (y / row_step, x / column_step) of window (y % row_step, ...)
      return {i, y % row_step, x % column_step,
              int64_t{(y / row_step) * window + x / column_step} * KeyCount(), 0};
    }
    return {Unrolled(y, x), y - y % window, x - x % window,
            int64_t{(y % window) * window + x % window} * KeyCount(),
            Region(y, height) * 3 + Region(x, width)};
  }
  __device__ int64_t KeyCount() const { return int64_t{window} * window; }
  __device__ int64_t Key(const Query& q, int64_t t, int head, float& added) const {
    const int y = q.top + static_cast<int>(t) / window * row_step;
    const int x = q.left + static_cast<int>(t) % window * column_step;
    added = bias[head * KeyCount() * KeyCount() + q.bias_row + t];
    if (Region(y, height) * 3 + Region(x, width) != q.region) added -= 100.0f;
    return Unrolled(y, x);
  }
};

// One block per (query token, head, sample): blockIdx.x strides over the
// queries, y and z are the head and the sample. The keys (`Keys`: every
// token, or a shifted window's) go by in tiles of one per thread, with the
// softmax kept online (flash attention's rescaling): the running max and
// sum of exponentials, and each output channel's running sum of p * v, are
// rescaled by exp(old max - new max) whenever a tile raises the max, so
// every exponent is at most 0 (stable) and any number of keys fits in
// fixed shared memory. Scores: thread t reads key t of each channel,
// neighbours on neighbouring floats where the keys are (coalesced; a
// window's rows of them). Weighted sums: warp w takes channels w, w + 4,
// ..., its lanes read a tile's values of one channel side by side and
// reduce by shuffles; only its lane 0 touches that channel's running sum,
// so no other thread races it. Shared: the query (scaled) and the running
// sums, `depth` floats each, and the tile's weights and key pixels.
template <class Keys>
__global__ void __launch_bounds__(kAttentionThreads)
    AttentionKernel(Keys keys, int channels, int depth, float scale, const float* src,
                    int64_t src_stride, float* dst, int64_t dst_stride, int head_base,
                    int sample_base) {
  extern __shared__ float shared[];
  float* query = shared;
  float* sums = query + depth;
  float* weights = sums + depth;
  __shared__ float scratch[kAttentionWarps];
  __shared__ int64_t pixels[kAttentionThreads];
  const int64_t tokens = keys.Queries();  // a plane's floats
  const int64_t key_count = keys.KeyCount();
  const int head = head_base + static_cast<int>(blockIdx.y);
  const int64_t sample = sample_base + int64_t{blockIdx.z};
  const int64_t first_channel = int64_t{head} * depth;
  const float* q = src + sample * src_stride + first_channel * tokens;
  const float* k = q + int64_t{channels} * tokens;
  const float* v = k + int64_t{channels} * tokens;
  float* out = dst + sample * dst_stride + first_channel * tokens;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t i = blockIdx.x; i < tokens; i += gridDim.x) {
    const typename Keys::Query at = keys.At(i);
    for (int c = threadIdx.x; c < depth; c += kAttentionThreads) {
      query[c] = q[c * tokens + at.pixel] * scale;
      sums[c] = 0;
    }
    __syncthreads();
    float largest = -INFINITY, total = 0;
    for (int64_t tile = 0; tile < key_count; tile += kAttentionThreads) {
      const int64_t t = tile + threadIdx.x;
      float score = -INFINITY;
      if (t < key_count) {
        float added = 0.0f;
        const int64_t pixel = keys.Key(at, t, head, added);
        pixels[threadIdx.x] = pixel;
        score = 0;
        for (int c = 0; c < depth; ++c) score = fmaf(query[c], k[c * tokens + pixel], score);
        score += added;
      }
      // Its syncs also publish the tile's pixels.
      const float raised = fmaxf(largest, BlockReduce(score, scratch, MaxOf{}));
      const float p = t < key_count ? expf(score - raised) : 0.0f;
      weights[threadIdx.x] = p;
      const float rescale = expf(largest - raised);  // 0 on the first tile
      total = total * rescale + BlockReduce(p, scratch, SumOf{});
      largest = raised;
      const int count = static_cast<int>(key_count - tile < kAttentionThreads ? key_count - tile
                                                                              : kAttentionThreads);
      for (int j = warp; j < depth; j += kAttentionWarps) {
        const float* row = v + j * tokens;
        float part = 0;
        for (int u = lane; u < count; u += 32) {
          part = fmaf(weights[u], Keys::kInOrder ? row[tile + u] : row[pixels[u]], part);
        }
        part = WarpReduce(part, SumOf{});
        if (lane == 0) sums[j] = sums[j] * rescale + part;
      }
      __syncthreads();  // the next tile overwrites the weights and pixels
    }
    if (lane == 0) {
      for (int j = warp; j < depth; j += kAttentionWarps) {
        out[j * tokens + at.pixel] = sums[j] / total;
      }
    }
    __syncthreads();  // the next token overwrites the query and the sums
  }
}

// One thread per output value of a sample (grid-stride), blockIdx.y the
// sample: the output is in the position embedding's own order, so both
// are read and written in coalesced rows.
__global__ void EmbedTokensKernel(int channels, int64_t pixels, int64_t tokens, const float* src,
                                  int64_t src_stride, const float* position,
                                  const float* class_token, float* dst, int64_t dst_stride,
                                  int sample_base) {
  const int64_t sample = sample_base + blockIdx.y;
  const float* from = src + sample * src_stride;
  float* to = dst + sample * dst_stride;
  const int64_t count = int64_t{channels} * tokens;
  const int64_t skip = tokens - pixels;  // 1: the class token comes first
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i / tokens, t = i % tokens;
    const float token = t < skip ? class_token[c] : from[c * pixels + t - skip];
    to[i] = token + position[i];
  }
}

// One thread per output value of a sample (grid-stride), blockIdx.y the
// sample: the writes go in coalesced rows, the reads `block` floats apart
// (each input value is read once, so nothing would be gained by staging
// squares in shared memory).
__global__ void SpaceToDepthKernel(int channels, int height, int width, int block, const float* src,
                                   int64_t src_stride, float* dst, int64_t dst_stride,
                                   int sample_base) {
  const int64_t sample = sample_base + blockIdx.y;
  const float* from = src + sample * src_stride;
  float* to = dst + sample * dst_stride;
  const int out_w = width / block;
  const int64_t plane = int64_t{height / block} * out_w;
  const int64_t count = int64_t{channels} * height * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t out_channel = i / plane, pixel = i % plane;
    const int64_t c = out_channel % channels;
    const int square = static_cast<int>(out_channel / channels);  // dx * block + dy
    const int dx = square / block, dy = square % block;
    const int y = static_cast<int>(pixel / out_w), x = static_cast<int>(pixel % out_w);
    to[i] = from[(c * height + block * y + dy) * width + block * x + dx];
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

//! Launches AttentionKernel over `keys` for every head and sample, in
//! chunks of gridDim.y's and z's limit; the first launch error, or
//! cudaSuccess.
template <class Keys>
cudaError_t LaunchAttentionOver(cudaStream_t stream, const Keys& keys, int batch, int channels,
                                int heads, const float* src, int64_t src_stride, float* dst,
                                int64_t dst_stride, float scale_or_zero = 0) {
  const int64_t tokens = keys.Queries();
  if (batch <= 0 || channels <= 0 || tokens <= 0) return cudaSuccess;
  if (heads <= 0 || channels % heads != 0 || channels / heads > kMaxAttentionHeadChannels) {
    return cudaErrorInvalidValue;
  }
  const int depth = channels / heads;
  const auto scale =
      scale_or_zero != 0 ? scale_or_zero : static_cast<float>(1 / sqrt(static_cast<double>(depth)));
  const size_t shared = (2 * static_cast<size_t>(depth) + kAttentionThreads) * sizeof(float);
  constexpr int64_t kMaxTokenBlocks = int64_t{1} << 30;  // blockIdx.x strides beyond this
  constexpr int kMaxPerLaunch = 65535;                   // gridDim.y's and z's limit
  const auto blocks = static_cast<unsigned>(tokens < kMaxTokenBlocks ? tokens : kMaxTokenBlocks);
  for (int head = 0; head < heads; head += kMaxPerLaunch) {
    const int head_count = heads - head < kMaxPerLaunch ? heads - head : kMaxPerLaunch;
    for (int sample = 0; sample < batch; sample += kMaxPerLaunch) {
      const int samples = batch - sample < kMaxPerLaunch ? batch - sample : kMaxPerLaunch;
      const dim3 grid(blocks, static_cast<unsigned>(head_count), static_cast<unsigned>(samples));
      AttentionKernel<Keys><<<grid, kAttentionThreads, shared, stream>>>(
          keys, channels, depth, scale, src, src_stride, dst, dst_stride, head, sample);
      const cudaError_t error = cudaGetLastError();
      if (error != cudaSuccess) return error;
    }
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

cudaError_t LaunchActivationStrided(cudaStream_t stream, KernelActivation function, float alpha,
                                    float beta, float* dst, int64_t dst_stride, const float* src,
                                    int64_t src_stride, int64_t count, int batch) {
  return ForEachSampleChunk(count, batch, [&](dim3 grid, int threads, int base) {
    switch (function) {
      case KernelActivation::kHardSwish:
        ActivationStridedKernel<KernelActivation::kHardSwish><<<grid, threads, 0, stream>>>(
            alpha, beta, dst, dst_stride, src, src_stride, count, base);
        break;
      case KernelActivation::kHardSigmoid:
        ActivationStridedKernel<KernelActivation::kHardSigmoid><<<grid, threads, 0, stream>>>(
            alpha, beta, dst, dst_stride, src, src_stride, count, base);
        break;
      case KernelActivation::kLeakyRelu:
        ActivationStridedKernel<KernelActivation::kLeakyRelu><<<grid, threads, 0, stream>>>(
            alpha, beta, dst, dst_stride, src, src_stride, count, base);
        break;
      case KernelActivation::kGelu:
        ActivationStridedKernel<KernelActivation::kGelu><<<grid, threads, 0, stream>>>(
            alpha, beta, dst, dst_stride, src, src_stride, count, base);
        break;
      case KernelActivation::kGeluTanh:
        ActivationStridedKernel<KernelActivation::kGeluTanh><<<grid, threads, 0, stream>>>(
            alpha, beta, dst, dst_stride, src, src_stride, count, base);
        break;
      case KernelActivation::kHardSigmoidAlphaBeta:
        ActivationStridedKernel<KernelActivation::kHardSigmoidAlphaBeta>
            <<<grid, threads, 0, stream>>>(alpha, beta, dst, dst_stride, src, src_stride, count,
                                           base);
        break;
    }
  });
}

cudaError_t LaunchMaxPool(cudaStream_t stream, const MaxPoolGeometry& shape, const float* src,
                          float* dst) {
  const int64_t total = int64_t{shape.batch} * shape.channels * int64_t{shape.out_h} * shape.out_w;
  if (total <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond this
  const int64_t needed = (total + kThreads - 1) / kThreads;
  MaxPoolKernel<<<static_cast<unsigned>(needed < kMaxBlocks ? needed : kMaxBlocks), kThreads, 0,
                  stream>>>(shape, src, dst);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNorm(cudaStream_t stream, float eps, int batch, int channels, int64_t pixels,
                            const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
  const int64_t total = int64_t{batch} * pixels;
  if (total <= 0 || channels <= 0) return cudaSuccess;
  // Smaller blocks than the copies': ConvNeXt's late stages have few
  // pixels (7x7 per sample), and each thread does a pixel's whole work.
  constexpr int kThreads = 128;
  constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond this
  const int64_t needed = (total + kThreads - 1) / kThreads;
  LayerNormKernel<<<static_cast<unsigned>(needed < kMaxBlocks ? needed : kMaxBlocks), kThreads, 0,
                    stream>>>(eps, batch, channels, pixels, src, src_stride, dst, dst_stride);
  return cudaGetLastError();
}

cudaError_t LaunchAttention(cudaStream_t stream, int batch, int channels, int heads, int64_t tokens,
                            const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
  return LaunchAttentionOver(stream, EveryToken{tokens}, batch, channels, heads, src, src_stride,
                             dst, dst_stride);
}

cudaError_t LaunchWindowAttention(cudaStream_t stream, int batch, int channels, int heads,
                                  int height, int width, int window, int shift, bool grid,
                                  float scale, const float* src, int64_t src_stride,
                                  const float* bias, float* dst, int64_t dst_stride) {
  if (window <= 0 || height % window != 0 || width % window != 0 || shift < 0 || shift >= window ||
      (grid && shift != 0) || bias == nullptr) {
    return cudaErrorInvalidValue;
  }
  const WindowTokens keys{
      height, width, window, shift, grid, grid ? height / window : 1, grid ? width / window : 1,
      bias};
  return LaunchAttentionOver(stream, keys, batch, channels, heads, src, src_stride, dst, dst_stride,
                             scale);
}

cudaError_t LaunchEmbedTokens(cudaStream_t stream, int batch, int channels, int64_t pixels,
                              const float* src, int64_t src_stride, const float* position,
                              const float* class_token, float* dst, int64_t dst_stride) {
  const int64_t tokens = pixels + (class_token != nullptr ? 1 : 0);
  return ForEachSampleChunk(
      int64_t{channels} * tokens, batch, [&](dim3 grid, int threads, int base) {
        EmbedTokensKernel<<<grid, threads, 0, stream>>>(channels, pixels, tokens, src, src_stride,
                                                        position, class_token, dst, dst_stride,
                                                        base);
      });
}

cudaError_t LaunchSpaceToDepth(cudaStream_t stream, int batch, int channels, int height, int width,
                               int block, const float* src, int64_t src_stride, float* dst,
                               int64_t dst_stride) {
  if (block <= 0 || height % block != 0 || width % block != 0) return cudaErrorInvalidValue;
  return ForEachSampleChunk(
      int64_t{channels} * height * width, batch, [&](dim3 grid, int threads, int base) {
        SpaceToDepthKernel<<<grid, threads, 0, stream>>>(channels, height, width, block, src,
                                                         src_stride, dst, dst_stride, base);
      });
}

}  // namespace ios::cuda
