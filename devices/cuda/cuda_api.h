// The only way the cuda device reaches the CUDA runtime and cuDNN: the calls
// it makes, in our own types. The real implementation (cuda_api_real.cc, the
// one translation unit that includes CUDA and cuDNN headers) forwards each to
// the library; tests drive the device with a recording fake that checks the
// call protocol without a GPU (tests/devices/cuda/). Nothing here throws:
// every call returns a Status, and the device decides what a failure means.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "devices/cuda/cuda_limits.h"

namespace ios::cuda {

//! What a failed call means to the farm.
enum class Code {
  kOk,
  kOutOfMemory,  // cudaErrorMemoryAllocation, CUDNN_STATUS_ALLOC_FAILED
  kUnsupported,  // CUDNN_STATUS_NOT_SUPPORTED (and its sub-codes about the problem)
  kRefused,      // CUDNN_STATUS_BAD_PARAM (and its sub-codes): the library refuses
                 // these arguments, and will again; a fact about the problem
  kFailure,      // anything else; the device stays usable
  kDeviceLost,   // a sticky error (illegal address, launch failure): the
                 // context is unusable until the process exits
  kNoDevice,     // no driver, or no such GPU
};

struct Status {
  Code code = Code::kOk;
  std::string call;     // the call as written in our code, e.g. "cudaMalloc(256 MiB)"
  std::string message;  // the library's own error string
  bool ok() const { return code == Code::kOk; }
};

inline Status Ok() { return {}; }

//! Opaque library objects, carried as the pointers the library hands out
//! (the fake hands out numbers). A default one is "none".
template <class Tag>
struct Handle {
  void* value = nullptr;
  explicit operator bool() const { return value != nullptr; }
  friend bool operator==(const Handle&, const Handle&) = default;
};
using Stream = Handle<struct StreamTag>;
using Event = Handle<struct EventTag>;
using Graph = Handle<struct GraphTag>;
using GraphExec = Handle<struct GraphExecTag>;
using DnnHandle = Handle<struct DnnHandleTag>;
using TensorDesc = Handle<struct TensorDescTag>;
using FilterDesc = Handle<struct FilterDescTag>;
using ConvDesc = Handle<struct ConvDescTag>;
using ActivationDesc = Handle<struct ActivationDescTag>;
using PoolingDesc = Handle<struct PoolingDescTag>;
using OpTensorDesc = Handle<struct OpTensorDescTag>;

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;
  int64_t memory_bytes = 0;
  int clock_khz = 0, memory_clock_khz = 0;  // 0: not reported
};

struct Versions {
  int driver = 0, runtime = 0;  // CUDA's encoding: 1000 * major + 10 * minor
  int64_t cudnn = 0;            // cudnnGetVersion()
};

//! A float32 4-D tensor: sizes and strides in elements (strides allow a
//! channel range of a larger buffer at any batch size).
struct TensorLayout {
  int n = 1, c = 1, h = 1, w = 1;
  int64_t stride_n = 0, stride_c = 0, stride_h = 0, stride_w = 1;
  friend bool operator==(const TensorLayout&, const TensorLayout&) = default;
};

//! cuDNN's math type of a convolution: strict FP32 (FMA), the library's
//! default (may use TF32 tensor cores on Ampere and newer), or tensor cores.
enum class MathType { kFma, kDefault, kTensorOp };

struct ConvGeometry {
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int groups = 1;
  MathType math = MathType::kFma;
};

//! One result of an algorithm search, as cuDNN reports it.
struct AlgoResult {
  int algo = 0;
  Code status = Code::kOk;  // not kOk: the algorithm cannot run this shape
  float ms = 0;
  size_t workspace_bytes = 0;
  MathType math = MathType::kFma;
};

//! cuDNN's activations (kRelu6: clipped at 6; kSwish: x * sigmoid(x), cuDNN
//! 8.2 and newer), and kHardSwish, kHardSigmoid (relu6(x + 3) / 6),
//! kLeakyRelu (x, or alpha * x below zero), kGelu (erf), kGeluTanh and
//! kHardSigmoidAlphaBeta (clip(alpha * x + beta, 0, 1), the hard_sigmoid
//! kind), which only our kernel computes.
enum class ActivationMode {
  kRelu,
  kSigmoid,
  kTanh,
  kRelu6,
  kSwish,
  kHardSwish,
  kHardSigmoid,
  kLeakyRelu,
  kGelu,
  kGeluTanh,
  kHardSigmoidAlphaBeta
};

//! The coefficients ActivateStrided's kLeakyRelu (alpha: its slope below
//! zero) and kHardSigmoidAlphaBeta read; the other modes read neither.
struct ActivationParams {
  float alpha = 0, beta = 0;
  friend bool operator==(const ActivationParams&, const ActivationParams&) = default;
};

//! True for the modes ActivateStrided computes and cuDNN has not.
constexpr bool OnlyOurKernelComputes(ActivationMode mode) {
  return mode == ActivationMode::kHardSwish || mode == ActivationMode::kHardSigmoid ||
         mode == ActivationMode::kLeakyRelu || mode == ActivationMode::kGelu ||
         mode == ActivationMode::kGeluTanh || mode == ActivationMode::kHardSigmoidAlphaBeta;
}
enum class PoolingMode { kMax, kAverageCountingPadding, kAverageExcludingPadding };

//! A max pool our kernel computes: the last window may run past the input
//! on the bottom and right (ceil_mode), which cuDNN's equal padding of both
//! sides cannot express. Views: `channels` channels from the pointers, each
//! sample `*_batch_stride` floats after the previous one.
struct MaxPoolShape {
  int batch = 1, channels = 1;
  int in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t src_batch_stride = 0, dst_batch_stride = 0;
};

//! A layer norm's views for our kernel: `batch` samples of `channels`
//! planes of `pixels` floats (NCHW: channel c of a pixel is c * pixels
//! floats after its channel 0), each sample `*_batch_stride` floats after
//! the previous one (a channel view of a wider buffer: the buffer's C*H*W).
struct LayerNormShape {
  int batch = 1, channels = 1;
  int64_t pixels = 1;
  int64_t src_batch_stride = 0, dst_batch_stride = 0;
  friend bool operator==(const LayerNormShape&, const LayerNormShape&) = default;
};

//! Multi-head attention's views for our kernel (the attention kind,
//! common/op_kinds_transformer.h): per sample, `channels` query planes of
//! `tokens` floats from the source, then as many key planes, then as many
//! value planes (one channel range: a plane apart each); the output's
//! `channels` planes at the destination. Head h owns channels [h * d,
//! (h + 1) * d) of each, d = channels / heads. Each sample is
//! `*_batch_stride` floats after the previous one.
struct AttentionShape {
  int batch = 1, channels = 1, heads = 1;
  int64_t tokens = 1;
  int64_t src_batch_stride = 0, dst_batch_stride = 0;
  friend bool operator==(const AttentionShape&, const AttentionShape&) = default;
};

//! embed_tokens' views for our kernel: `channels` planes of `pixels`
//! floats in, of `pixels + class_token` out (the class token first), each
//! sample `*_batch_stride` floats after the previous one.
struct EmbedTokensShape {
  int batch = 1, channels = 1;
  int64_t pixels = 1;
  bool class_token = false;
  int64_t src_batch_stride = 0, dst_batch_stride = 0;
  int64_t tokens() const { return pixels + (class_token ? 1 : 0); }
  friend bool operator==(const EmbedTokensShape&, const EmbedTokensShape&) = default;
};

//! Swin's shifted-window attention's views for our kernel (the
//! window_attention kind, common/op_kinds_transformer.h): the queries,
//! keys and values of AttentionShape, on a height x width map rolled up and
//! left by `shift` and cut into window x window windows whose tokens
//! attend to each other only. With `grid` (MaxViT's grid attention, shift
//! 0) window (gy, gx) is instead the pixels (ty * height / window + gy,
//! tx * width / window + gx), token (ty, tx) row-major. Each sample is
//! `*_batch_stride` floats after the previous one.
struct WindowAttentionShape {
  int batch = 1, channels = 1, heads = 1;
  int height = 1, width = 1, window = 1, shift = 0;
  bool grid = false;
  float scale = 0;  // the scores' factor; 0: 1/sqrt(channels / heads)
  int64_t src_batch_stride = 0, dst_batch_stride = 0;
  int64_t tokens() const { return int64_t{height} * width; }
  friend bool operator==(const WindowAttentionShape&, const WindowAttentionShape&) = default;
};

//! space_to_depth's views for our kernel: `channels` planes of height x
//! width in, block^2 x channels planes of (height / block) x (width /
//! block) out, each sample `*_batch_stride` floats after the previous one.
struct SpaceToDepthShape {
  int batch = 1, channels = 1, height = 1, width = 1, block = 1;
  int64_t src_batch_stride = 0, dst_batch_stride = 0;
  int64_t values() const { return int64_t{channels} * height * width; }  // per sample, either side
  friend bool operator==(const SpaceToDepthShape&, const SpaceToDepthShape&) = default;
};

enum class OpTensorOp { kAdd, kMul };

//! Everything the cuda device calls. Implementations are not thread-safe;
//! one device (one thread) owns one.
class Api {
 public:
  virtual ~Api() = default;

  // ---- The machine ---------------------------------------------------------
  virtual Status DeviceCount(int& count) = 0;
  virtual Status Properties(int device, DeviceProperties& out) = 0;
  virtual Status GetVersions(Versions& out) = 0;
  virtual Status SetDevice(int device) = 0;
  virtual Status MemoryInfo(size_t& free_bytes, size_t& total_bytes) = 0;
  //! Whether the GPU's application clocks are pinned (NVML); false when
  //! unknown.
  virtual bool ClocksLocked(int device) = 0;

  // ---- Memory. Copies are complete on return (they also wait for the
  // device to be idle): prepare, Write and Read only. ----------------------
  virtual Status Malloc(size_t bytes, void*& pointer) = 0;
  virtual Status Free(void* pointer) = 0;
  virtual Status CopyToDevice(void* device, const void* host, size_t bytes) = 0;
  virtual Status CopyToHost(void* host, const void* device, size_t bytes) = 0;

  // ---- Several GPUs (a multi-device run, cuda_multi.h) ---------------------
  //! Whether `device` can read and write `peer`'s memory directly (NVLink,
  //! PCIe peer-to-peer). False for a device and itself.
  virtual Status CanAccessPeer(int device, int peer, bool& can) = 0;
  //! Lets the current device access `peer`'s memory; enabling it again is
  //! not a failure. Only where CanAccessPeer says it can.
  virtual Status EnablePeerAccess(int peer) = 0;
  //! Enqueues a copy of `bytes` from `src` on `src_device` to `dst` on
  //! `dst_device` (the same device: a plain device copy) on `stream`. Works
  //! without peer access too: the driver stages it through the host.
  virtual Status CopyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                               size_t bytes, Stream stream) = 0;

  // ---- Streams, events, graphs ---------------------------------------------
  //! A non-blocking stream (no implicit synchronisation with stream 0).
  virtual Status CreateStream(Stream& stream) = 0;
  virtual Status DestroyStream(Stream stream) = 0;
  //! `timing`: an event that can be an end point of ElapsedMs; others are
  //! created with timing disabled (cheaper to record and wait on).
  virtual Status CreateEvent(Event& event, bool timing) = 0;
  virtual Status DestroyEvent(Event event) = 0;
  virtual Status RecordEvent(Event event, Stream stream) = 0;
  virtual Status WaitEvent(Stream stream, Event event) = 0;
  virtual Status SynchronizeEvent(Event event) = 0;
  virtual Status SynchronizeStream(Stream stream) = 0;
  virtual Status ElapsedMs(Event start, Event end, float& ms) = 0;
  //! Capture of `stream`'s work (and of streams that join it through
  //! events) into a graph, mode thread-local.
  virtual Status BeginCapture(Stream stream) = 0;
  virtual Status EndCapture(Stream stream, Graph& graph) = 0;
  virtual Status InstantiateGraph(Graph graph, GraphExec& exec) = 0;
  virtual Status LaunchGraph(GraphExec exec, Stream stream) = 0;
  virtual Status DestroyGraph(Graph graph) = 0;
  virtual Status DestroyGraphExec(GraphExec exec) = 0;

  // ---- cuDNN objects -------------------------------------------------------
  virtual Status CreateDnn(DnnHandle& handle) = 0;
  virtual Status DestroyDnn(DnnHandle handle) = 0;
  virtual Status SetDnnStream(DnnHandle handle, Stream stream) = 0;
  //! Creates and sets a descriptor; on a failed set nothing is left behind.
  virtual Status CreateTensor(const TensorLayout& layout, TensorDesc& desc) = 0;
  virtual Status DestroyTensor(TensorDesc desc) = 0;
  //! KCRS float32 filter: k outputs, c inputs per group, r x s window.
  virtual Status CreateFilter(int k, int c, int r, int s, FilterDesc& desc) = 0;
  virtual Status DestroyFilter(FilterDesc desc) = 0;
  virtual Status CreateConvolution(const ConvGeometry& geometry, ConvDesc& desc) = 0;
  virtual Status SetConvolutionMath(ConvDesc desc, MathType math) = 0;
  virtual Status DestroyConvolution(ConvDesc desc) = 0;
  virtual Status CreateActivation(ActivationMode mode, ActivationDesc& desc) = 0;
  virtual Status DestroyActivation(ActivationDesc desc) = 0;
  //! A 2-D pooling window; padding is never a maximum's candidate.
  virtual Status CreatePooling(PoolingMode mode, int window_h, int window_w, int pad_h, int pad_w,
                               int stride_h, int stride_w, PoolingDesc& desc) = 0;
  virtual Status DestroyPooling(PoolingDesc desc) = 0;
  virtual Status CreateOpTensor(OpTensorOp op, OpTensorDesc& desc) = 0;
  virtual Status DestroyOpTensor(OpTensorDesc desc) = 0;

  // ---- Work, enqueued on the handle's stream -------------------------------
  //! Runs every algorithm that fits `workspace_bytes` on the given buffers
  //! (their contents are overwritten) and reports them fastest first.
  //! Synchronous; never inside a timed region or a capture.
  virtual Status FindConvolutionAlgorithms(DnnHandle handle, TensorDesc x_desc, const void* x,
                                           FilterDesc w_desc, const void* w, ConvDesc conv,
                                           TensorDesc y_desc, void* y, void* workspace,
                                           size_t workspace_bytes,
                                           std::vector<AlgoResult>& results) = 0;
  //! cuDNN's heuristic ranking (nothing is run), best first.
  virtual Status HeuristicConvolutionAlgorithms(DnnHandle handle, TensorDesc x_desc,
                                                FilterDesc w_desc, ConvDesc conv, TensorDesc y_desc,
                                                std::vector<AlgoResult>& results) = 0;
  //! y = conv(x, w).
  virtual Status ConvolutionForward(DnnHandle handle, TensorDesc x_desc, const void* x,
                                    FilterDesc w_desc, const void* w, ConvDesc conv, int algo,
                                    void* workspace, size_t workspace_bytes, TensorDesc y_desc,
                                    void* y) = 0;
  //! y = relu(conv(x, w) + bias), in one call (cuDNN's fused form; relu
  //! only: its identity form is restricted to one algorithm).
  virtual Status ConvolutionBiasRelu(DnnHandle handle, TensorDesc x_desc, const void* x,
                                     FilterDesc w_desc, const void* w, ConvDesc conv, int algo,
                                     void* workspace, size_t workspace_bytes, TensorDesc bias_desc,
                                     const void* bias, ActivationDesc relu, TensorDesc y_desc,
                                     void* y) = 0;
  //! c += a, a broadcast along each dimension where it is 1 (a bias of
  //! 1 x K x 1 x 1; a C x 1 x 1 term): cuDNN's blend into a destination.
  virtual Status AddTensor(DnnHandle handle, TensorDesc a_desc, const void* a, TensorDesc c_desc,
                           void* c) = 0;
  virtual Status ActivationForward(DnnHandle handle, ActivationDesc act, TensorDesc x_desc,
                                   const void* x, TensorDesc y_desc, void* y) = 0;
  virtual Status PoolingForward(DnnHandle handle, PoolingDesc pool, TensorDesc x_desc,
                                const void* x, TensorDesc y_desc, void* y) = 0;
  //! Softmax over the channels of each pixel (`log`: its logarithm), the
  //! largest value subtracted first; x and y of one shape.
  virtual Status SoftmaxForward(DnnHandle handle, bool log, TensorDesc x_desc, const void* x,
                                TensorDesc y_desc, void* y) = 0;
  //! c = a op b (b broadcast where its dimensions are 1; c may be a, which
  //! cuDNN's documentation does not promise: only a product of three or
  //! more terms does that).
  virtual Status OpTensor(DnnHandle handle, OpTensorDesc op, TensorDesc a_desc, const void* a,
                          TensorDesc b_desc, const void* b, TensorDesc c_desc, void* c) = 0;
  //! y = x, element by element, each in its own strides (same sizes; y
  //! does not overlap x): cuDNN's layout conversion. A permutation of
  //! channels written as strides (the channel shuffle) is one such copy.
  virtual Status TransformTensor(DnnHandle handle, TensorDesc x_desc, const void* x,
                                 TensorDesc y_desc, void* y) = 0;
  //! For each of `batch` samples: `count` floats from src + n * src_stride to
  //! dst + n * dst_stride, added to what is there when `accumulate`. Our own
  //! kernel (cuda_kernels.cu): slice copies and sums of a term's slices.
  virtual Status CopyStrided(Stream stream, float* dst, int64_t dst_stride, const float* src,
                             int64_t src_stride, int64_t count, int batch, bool accumulate) = 0;
  //! Max pooling of `shape` by our kernel (cuda_kernels.cu).
  virtual Status MaxPool(Stream stream, const MaxPoolShape& shape, const float* src,
                         float* dst) = 0;
  //! CopyStrided's walk, dst = activation(src) (dst may be src): our kernel
  //! for what cuDNN has no mode for (OnlyOurKernelComputes), with `params`'
  //! coefficients where the mode reads them.
  virtual Status ActivateStrided(Stream stream, ActivationMode mode, ActivationParams params,
                                 float* dst, int64_t dst_stride, const float* src,
                                 int64_t src_stride, int64_t count, int batch) = 0;
  //! y = (x - mean) / sqrt(variance + eps) over the channels of each pixel
  //! of `shape`, the variance the mean of squared deviations, no affine
  //! (the layernorm kind, common/op_kinds.h). Our kernel (cuda_kernels.cu);
  //! cuDNN's legacy API has no layer norm. dst may be src.
  virtual Status LayerNormStrided(Stream stream, const LayerNormShape& shape, float eps,
                                  const float* src, float* dst) = 0;
  //! Multi-head scaled dot-product attention of every sample of `shape`
  //! (the attention kind, common/op_kinds_transformer.h): dst's token i on
  //! head h's channels is sum_t softmax_t(q_i . k_t / sqrt(d)) v_t. Our
  //! kernel; requires channels / heads <= kMaxAttentionHeadChannels and
  //! dst apart from src.
  virtual Status AttentionStrided(Stream stream, const AttentionShape& shape, const float* src,
                                  float* dst) = 0;
  //! dst = the tokens of src (the class token's `channels` values first,
  //! when shape.class_token) plus `position` (channels x tokens, channel c's
  //! token t at c * tokens + t): the embed_tokens kind. `class_token` is
  //! null without one. Our kernel.
  virtual Status EmbedTokensStrided(Stream stream, const EmbedTokensShape& shape, const float* src,
                                    const float* position, const float* class_token,
                                    float* dst) = 0;
  //! Shifted-window attention of every sample of `shape` (the
  //! window_attention kind, common/op_kinds_transformer.h): AttentionStrided
  //! within each window of the rolled map, each score plus `bias` (heads x
  //! window^2 x window^2: head h, query i, key j at (h * window^2 + i) *
  //! window^2 + j) and Swin's -100 between regions when shifted, each
  //! output at its pixel before the roll; with shape.grid, within each of
  //! MaxViT's grid windows instead. Our kernel; requires the window to
  //! divide the map, 0 <= shift < window (shift 0 with grid), channels /
  //! heads <= kMaxAttentionHeadChannels and dst apart from src.
  virtual Status WindowAttentionStrided(Stream stream, const WindowAttentionShape& shape,
                                        const float* src, const float* bias, float* dst) = 0;
  //! dst = src's block x block squares as pixels of block^2 x channels
  //! channels (the space_to_depth kind): channel (dx * block + dy) *
  //! channels + c of pixel (y, x) is channel c at (block * y + dy, block * x
  //! + dx). Our kernel; requires the block to divide the map, dst apart
  //! from src.
  virtual Status SpaceToDepthStrided(Stream stream, const SpaceToDepthShape& shape,
                                     const float* src, float* dst) = 0;
};

}  // namespace ios::cuda
