// A cuda::Api that computes nothing and checks how it is called: what the
// cuda device's tests drive it with on machines without a GPU. It records
// every call, keeps every object it handed out until it is destroyed, and
// notes each breach of the call protocol as a violation:
//   - no allocation, object creation, algorithm search or copy inside a
//     timed region (a timing event recorded .. the next one) or a capture;
//   - inside either, a stream other than the origin works only after it
//     waited on an event recorded on a stream already in the region (forked);
//   - when the region ends (the closing timing event, EndCapture), every
//     such stream has been joined: its last work is followed by an event the
//     origin waited on;
//   - an event is recorded before any stream waits on it;
//   - every object used is alive, destroyed once; every device pointer an op
//     uses (the whole extent of its tensor) lies inside one live allocation;
//   - work goes to a stream of the current GPU (cudaSetDevice), an event is
//     recorded on a stream of its own GPU, a peer copy's pointers lie in
//     allocations of the GPUs it names, peer access is enabled only where
//     the fake says the pair can.
// Joins are transitive, as on a GPU: a stream that waited on an event knows
// whatever the recording stream knew. Several fakes on one Journal are one
// machine (one GPU each, or several on one GPU), as the handles of one
// process are. Failures are injected by call number.
//
// It computes nothing either, unless a journal asks for it (`compute`):
// then every allocation holds host memory, copies move real bytes, and the
// few calls the fake can compute (cudnnTransformTensor, CopyStrided,
// ActivateStrided, LayerNormStrided, AttentionStrided, EmbedTokensStrided,
// WindowAttentionStrided, SpaceToDepthStrided, cudnnConvolutionForward) do
// so as they are enqueued; any other work is a violation, since what it
// wrote would be garbage a test might compare.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "devices/cuda/cuda_api.h"

namespace ios::cuda::testing {

//! One enqueued operation: which library call, on which handle and stream.
struct OpRecord {
  std::string call;
  void* handle = nullptr;  // cuDNN handle (nullptr for our kernels)
  void* stream = nullptr;
  int algo = -1;  // convolutions
};

//! A call that touches a stream, in enqueue order across every fake of a
//! journal: work, event records and waits, peer copies.
struct StreamRecord {
  std::string call;
  void* stream = nullptr;
  void* event = nullptr;  // cudaEventRecord, cudaStreamWaitEvent
  int device = 0;         // the current GPU when it was made
  //! The first input and the output, where the call has them (convolutions,
  //! same-shape cuDNN ops, our kernels, peer copies): who writes what.
  const void* reads = nullptr;
  const void* writes = nullptr;
};

//! One cudaMemcpyPeerAsync as it was asked for.
struct PeerCopy {
  void* dst = nullptr;
  int dst_device = -1;
  const void* src = nullptr;
  int src_device = -1;
  size_t bytes = 0;
  void* stream = nullptr;
};

//! One LayerNormStrided (our kernel) as it was asked for.
struct LayerNormCall {
  LayerNormShape shape;
  float eps = 0;
  friend bool operator==(const LayerNormCall&, const LayerNormCall&) = default;
  //! For gtest's messages.
  friend void PrintTo(const LayerNormCall& c, std::ostream* os) {
    *os << "batch " << c.shape.batch << ", " << c.shape.channels << " channels of "
        << c.shape.pixels << " pixels, batch strides " << c.shape.src_batch_stride << " -> "
        << c.shape.dst_batch_stride << ", eps " << c.eps;
  }
};

//! One AttentionStrided (our kernel) as it was asked for.
struct AttentionCall {
  AttentionShape shape;
  friend bool operator==(const AttentionCall&, const AttentionCall&) = default;
  //! For gtest's messages.
  friend void PrintTo(const AttentionCall& c, std::ostream* os) {
    *os << "batch " << c.shape.batch << ", " << c.shape.channels << " channels in " << c.shape.heads
        << " heads, " << c.shape.tokens << " tokens, batch strides " << c.shape.src_batch_stride
        << " -> " << c.shape.dst_batch_stride;
  }
};

//! One EmbedTokensStrided (our kernel) as it was asked for: the shape and
//! where the weights it read were.
struct EmbedTokensCall {
  EmbedTokensShape shape;
  const void* position = nullptr;
  const void* class_token = nullptr;
  friend bool operator==(const EmbedTokensCall&, const EmbedTokensCall&) = default;
  //! For gtest's messages.
  friend void PrintTo(const EmbedTokensCall& c, std::ostream* os) {
    *os << "batch " << c.shape.batch << ", " << c.shape.channels << " channels of "
        << c.shape.pixels << " pixels" << (c.shape.class_token ? " and a class token" : "")
        << ", batch strides " << c.shape.src_batch_stride << " -> " << c.shape.dst_batch_stride
        << ", position at " << c.position << ", class token at " << c.class_token;
  }
};

//! One WindowAttentionStrided (our kernel) as it was asked for: the shape
//! and where the bias it read was.
struct WindowAttentionCall {
  WindowAttentionShape shape;
  const void* bias = nullptr;
  friend bool operator==(const WindowAttentionCall&, const WindowAttentionCall&) = default;
  //! For gtest's messages.
  friend void PrintTo(const WindowAttentionCall& c, std::ostream* os) {
    *os << "batch " << c.shape.batch << ", " << c.shape.channels << " channels in " << c.shape.heads
        << " heads, " << c.shape.height << "x" << c.shape.width << " in " << c.shape.window << "x"
        << c.shape.window << (c.shape.grid ? " grid windows" : " windows") << " shifted by "
        << c.shape.shift << ", batch strides " << c.shape.src_batch_stride << " -> "
        << c.shape.dst_batch_stride << ", bias at " << c.bias;
  }
};

//! One SpaceToDepthStrided (our kernel) as it was asked for.
struct SpaceToDepthCall {
  SpaceToDepthShape shape;
  friend bool operator==(const SpaceToDepthCall&, const SpaceToDepthCall&) = default;
  //! For gtest's messages.
  friend void PrintTo(const SpaceToDepthCall& c, std::ostream* os) {
    *os << "batch " << c.shape.batch << ", " << c.shape.channels << " channels of "
        << c.shape.height << "x" << c.shape.width << " by " << c.shape.block << ", batch strides "
        << c.shape.src_batch_stride << " -> " << c.shape.dst_batch_stride;
  }
};

struct FakeMachine;  // the objects the fakes of one journal share

//! Everything the fake saw; shared with the test, so it outlives the device.
struct Journal {
  std::vector<std::string> calls;          // every call, in order, by name
  std::vector<std::string> violations;     // protocol breaches, described
  std::vector<OpRecord> ops;               // enqueued work, in order
  std::map<void*, std::string> live;       // objects and allocations alive now
  int finds = 0;                           // algorithm searches run
  int64_t live_bytes = 0;                  // device memory allocated now
  int launches = 0;                        // graph launches
  std::vector<PoolingMode> pooling_modes;  // of every pooling descriptor created
  std::vector<StreamRecord> timeline;      // stream calls of every fake, in order
  std::vector<PeerCopy> peer_copies;
  std::vector<std::pair<int, int>> peer_enabled;  // (current GPU, peer), per call
  //! The (x, y) tensors of every cudnnTransformTensor enqueued.
  std::vector<std::pair<TensorLayout, TensorLayout>> transforms;
  //! The function of every ActivateStrided enqueued (our kernel), and its
  //! coefficients.
  std::vector<ActivationMode> kernel_activations;
  std::vector<ActivationParams> kernel_activation_params;
  std::vector<LayerNormCall> layer_norms;              // every LayerNormStrided enqueued
  std::vector<AttentionCall> attentions;               // every AttentionStrided enqueued
  std::vector<EmbedTokensCall> embeds;                 // every EmbedTokensStrided enqueued
  std::vector<WindowAttentionCall> window_attentions;  // every WindowAttentionStrided enqueued
  std::vector<SpaceToDepthCall> space_to_depths;       // every SpaceToDepthStrided enqueued

  // ---- What the fake answers --------------------------------------------
  //! Compute what can be computed (above); set before anything is allocated.
  bool compute = false;
  int devices = 1;
  Code device_count_error = Code::kOk;  // kNoDevice: no driver
  size_t free_bytes = size_t{8} << 30, total_bytes = size_t{16} << 30;
  bool clocks_locked = true;
  float elapsed_ms = 1.5f;
  //! What FindConvolutionAlgorithms (and the heuristic) report, in order.
  std::vector<AlgoResult> algorithms{{7, Code::kUnsupported, 0.1f, 0, MathType::kFma},
                                     {1, Code::kOk, 0.2f, size_t{1} << 20, MathType::kFma},
                                     {0, Code::kOk, 0.3f, 0, MathType::kFma}};

  //! Calls (by the name they are recorded under) that answer this status
  //! every time they are made, as cuDNN answers a refusal.
  std::map<std::string, Code> answers;
  //! Algorithms cuDNN will not fuse with bias and relu (NOT_SUPPORTED).
  std::set<int> unfusable_algorithms;
  int fusion_refusals = 0;
  //! cudaMalloc of more than this fails with out-of-memory (0: no limit).
  size_t largest_allocation = 0;
  //! Ordered pairs (device, peer) cudaDeviceCanAccessPeer says no to; any
  //! other pair of distinct GPUs can.
  std::set<std::pair<int, int>> no_peer_access;

  // ---- Failure injection -------------------------------------------------
  //! The call (1-based, counted over every call but destroys and frees)
  //! that fails with `fail_code`; 0: none.
  int fail_at = 0;
  Code fail_code = Code::kFailure;
  int counted_calls = 0;
  std::string injected;  // the call that was failed last

  //! Objects of `kind` ("stream", "event", "memory", ...) alive now.
  int Live(const std::string& kind) const;

  std::shared_ptr<FakeMachine> machine;  // created by the first fake
};

// ---- The fake machine's state ---------------------------------------------------

struct StreamState {
  int64_t work = 0;        // operations enqueued so far
  bool in_region = false;  // forked into the open region (or its origin)
  int64_t joined_at = 0;   // `work` when the origin last waited on it
  int device = 0;          // the GPU it was created on
  //! What this stream has waited for, directly or through other streams:
  //! stream -> its `work` then.
  std::map<void*, int64_t> knows;
};
struct EventState {
  bool timing = false;
  bool recorded = false;
  void* stream = nullptr;
  int64_t work = 0;  // the stream's `work` when recorded
  int device = 0;
  std::map<void*, int64_t> knows;  // the stream's, when recorded
};
struct Allocation {
  size_t bytes = 0;
  int device = 0;
  std::vector<unsigned char> held;  // its contents, when the journal computes
};
struct FilterDims {
  int k = 0, c = 0, r = 0, s = 0;
};
struct PoolWindow {
  int window_h = 1, window_w = 1, pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
};

//! The objects, memory and regions of one fake machine.
struct FakeMachine {
  uintptr_t next_object = 0x1000;
  uintptr_t next_address = uintptr_t{1} << 40;
  std::map<uintptr_t, Allocation> memory;  // by start address
  std::map<void*, StreamState> streams;
  std::map<void*, EventState> events;
  std::map<void*, void*> dnn_stream;  // handle -> stream
  std::map<void*, TensorLayout> tensors;
  std::map<void*, FilterDims> filters;
  std::map<void*, ConvGeometry> convs;
  std::map<void*, PoolWindow> pools;
  bool timed = false, capturing = false;
  bool capture_failed = false;  // a call inside the capture failed: it may end unjoined
  void* region_origin = nullptr;
  std::string region;      // "timed region" or "capture"
  int current_device = 0;  // cudaSetDevice's
};

class RecordingApi final : public Api {
 public:
  explicit RecordingApi(std::shared_ptr<Journal> journal);

  Status DeviceCount(int& count) override;
  Status Properties(int device, DeviceProperties& out) override;
  Status GetVersions(Versions& out) override;
  Status SetDevice(int device) override;
  Status MemoryInfo(size_t& free_bytes, size_t& total_bytes) override;
  bool ClocksLocked(int device) override;
  Status Malloc(size_t bytes, void*& pointer) override;
  Status Free(void* pointer) override;
  Status CopyToDevice(void* device, const void* host, size_t bytes) override;
  Status CopyToHost(void* host, const void* device, size_t bytes) override;
  Status CanAccessPeer(int device, int peer, bool& can) override;
  Status EnablePeerAccess(int peer) override;
  Status CopyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                       Stream stream) override;
  Status CreateStream(Stream& stream) override;
  Status DestroyStream(Stream stream) override;
  Status CreateEvent(Event& event, bool timing) override;
  Status DestroyEvent(Event event) override;
  Status RecordEvent(Event event, Stream stream) override;
  Status WaitEvent(Stream stream, Event event) override;
  Status SynchronizeEvent(Event event) override;
  Status SynchronizeStream(Stream stream) override;
  Status ElapsedMs(Event start, Event end, float& ms) override;
  Status BeginCapture(Stream stream) override;
  Status EndCapture(Stream stream, Graph& graph) override;
  Status InstantiateGraph(Graph graph, GraphExec& exec) override;
  Status LaunchGraph(GraphExec exec, Stream stream) override;
  Status DestroyGraph(Graph graph) override;
  Status DestroyGraphExec(GraphExec exec) override;
  Status CreateDnn(DnnHandle& handle) override;
  Status DestroyDnn(DnnHandle handle) override;
  Status SetDnnStream(DnnHandle handle, Stream stream) override;
  Status CreateTensor(const TensorLayout& layout, TensorDesc& desc) override;
  Status DestroyTensor(TensorDesc desc) override;
  Status CreateFilter(int k, int c, int r, int s, FilterDesc& desc) override;
  Status DestroyFilter(FilterDesc desc) override;
  Status CreateConvolution(const ConvGeometry& geometry, ConvDesc& desc) override;
  Status SetConvolutionMath(ConvDesc desc, MathType math) override;
  Status DestroyConvolution(ConvDesc desc) override;
  Status CreateActivation(ActivationMode mode, ActivationDesc& desc) override;
  Status DestroyActivation(ActivationDesc desc) override;
  Status CreatePooling(PoolingMode mode, int window_h, int window_w, int pad_h, int pad_w,
                       int stride_h, int stride_w, PoolingDesc& desc) override;
  Status DestroyPooling(PoolingDesc desc) override;
  Status CreateOpTensor(OpTensorOp op, OpTensorDesc& desc) override;
  Status DestroyOpTensor(OpTensorDesc desc) override;
  Status FindConvolutionAlgorithms(DnnHandle handle, TensorDesc x_desc, const void* x,
                                   FilterDesc w_desc, const void* w, ConvDesc conv,
                                   TensorDesc y_desc, void* y, void* workspace,
                                   size_t workspace_bytes,
                                   std::vector<AlgoResult>& results) override;
  Status HeuristicConvolutionAlgorithms(DnnHandle handle, TensorDesc x_desc, FilterDesc w_desc,
                                        ConvDesc conv, TensorDesc y_desc,
                                        std::vector<AlgoResult>& results) override;
  Status ConvolutionForward(DnnHandle handle, TensorDesc x_desc, const void* x, FilterDesc w_desc,
                            const void* w, ConvDesc conv, int algo, void* workspace,
                            size_t workspace_bytes, TensorDesc y_desc, void* y) override;
  Status ConvolutionBiasRelu(DnnHandle handle, TensorDesc x_desc, const void* x, FilterDesc w_desc,
                             const void* w, ConvDesc conv, int algo, void* workspace,
                             size_t workspace_bytes, TensorDesc bias_desc, const void* bias,
                             ActivationDesc relu, TensorDesc y_desc, void* y) override;
  Status AddTensor(DnnHandle handle, TensorDesc a_desc, const void* a, TensorDesc c_desc,
                   void* c) override;
  Status ActivationForward(DnnHandle handle, ActivationDesc act, TensorDesc x_desc, const void* x,
                           TensorDesc y_desc, void* y) override;
  Status PoolingForward(DnnHandle handle, PoolingDesc pool, TensorDesc x_desc, const void* x,
                        TensorDesc y_desc, void* y) override;
  Status SoftmaxForward(DnnHandle handle, bool log, TensorDesc x_desc, const void* x,
                        TensorDesc y_desc, void* y) override;
  Status OpTensor(DnnHandle handle, OpTensorDesc op, TensorDesc a_desc, const void* a,
                  TensorDesc b_desc, const void* b, TensorDesc c_desc, void* c) override;
  Status TransformTensor(DnnHandle handle, TensorDesc x_desc, const void* x, TensorDesc y_desc,
                         void* y) override;
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

 private:
  //! Counts a call, and fails it when its number is the injected one or
  //! when `answers` names it.
  Status Enter(const std::string& call, bool countable = true);
  void Violation(const std::string& text);
  void* NewObject(const std::string& kind);
  Status Destroy(void* object, const std::string& kind, const std::string& call);
  void Use(void* object, const std::string& kind, const std::string& call);
  //! The call is not allowed inside a timed region or a capture.
  void OutsideRegions(const std::string& call);
  //! Work enqueued on `stream`: it must be in the open region, if any.
  void Work(void* stream, const std::string& call);
  void* StreamOf(DnnHandle handle, const std::string& call);
  //! `pointer` .. the tensor's last element inside one live allocation.
  void Extent(const void* pointer, TensorDesc desc, const std::string& call);
  void Span(const void* pointer, size_t bytes, const std::string& call);
  void OpenRegion(void* origin, const std::string& what);
  void CloseRegion(const std::string& what);
  Status Op(const std::string& call, DnnHandle handle, int algo = -1, const void* reads = nullptr,
            const void* writes = nullptr);
  //! One of our strided kernels: `count` floats per sample of `batch`.
  Status StridedKernel(const std::string& call, Stream stream, const float* dst, int64_t dst_stride,
                       const float* src, int64_t src_stride, int64_t count, int batch);
  //! Shapes and extents of a convolution's operands.
  void CheckConvolution(const std::string& call, TensorDesc x_desc, const void* x,
                        FilterDesc w_desc, const void* w, ConvDesc conv, TensorDesc y_desc,
                        const void* y);
  //! y = conv(x, w) on the host, as cuDNN's cross-correlation computes it,
  //! when the journal computes (CheckConvolution found the shapes agree).
  void ComputeConvolution(TensorDesc x_desc, const void* x, FilterDesc w_desc, const void* w,
                          ConvDesc conv, TensorDesc y_desc, void* y);
  //! `algo` was reported with success and fits the workspace given.
  void CheckAlgorithm(const std::string& call, int algo, size_t workspace_bytes);
  void SameShape(const std::string& call, TensorDesc a, TensorDesc b);
  //! A cuDNN op mapping x to y of its shape: both in bounds, then enqueued.
  Status SameShapeOp(const std::string& call, DnnHandle handle, TensorDesc x_desc, const void* x,
                     TensorDesc y_desc, const void* y);

  //! A stream call, in the journal's timeline.
  void Trace(const std::string& call, void* stream, void* event = nullptr,
             const void* reads = nullptr, const void* writes = nullptr);
  //! The live allocation `pointer` lies in, or null.
  const Allocation* AllocationOf(const void* pointer) const;
  //! Where the `bytes` at `pointer` are held on the host: null unless the
  //! journal computes, and when they are not all inside one allocation
  //! (Span notes that).
  unsigned char* Held(const void* pointer, size_t bytes);
  //! A violation when the journal computes and `call`, which is work, is
  //! not one the fake computes.
  void NotComputed(const std::string& call);

  std::shared_ptr<Journal> journal_;
  // The machine, shared by every fake on the journal; the references keep
  // the names of when each fake had its own.
  std::shared_ptr<FakeMachine> machine_;
  uintptr_t& next_object_ = machine_->next_object;
  uintptr_t& next_address_ = machine_->next_address;
  std::map<uintptr_t, Allocation>& memory_ = machine_->memory;
  std::map<void*, StreamState>& streams_ = machine_->streams;
  std::map<void*, EventState>& events_ = machine_->events;
  std::map<void*, void*>& dnn_stream_ = machine_->dnn_stream;
  std::map<void*, TensorLayout>& tensors_ = machine_->tensors;
  std::map<void*, FilterDims>& filters_ = machine_->filters;
  std::map<void*, ConvGeometry>& convs_ = machine_->convs;
  std::map<void*, PoolWindow>& pools_ = machine_->pools;
  bool& timed_ = machine_->timed;
  bool& capturing_ = machine_->capturing;
  bool& capture_failed_ = machine_->capture_failed;
  void*& region_origin_ = machine_->region_origin;
  std::string& region_ = machine_->region;
  int& current_device_ = machine_->current_device;
};

}  // namespace ios::cuda::testing
