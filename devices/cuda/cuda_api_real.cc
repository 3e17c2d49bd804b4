// cuda::Api on the CUDA runtime and cuDNN's legacy API: with
// cuda_real_support.cc and cuda_kernel_api.cc (our kernels' launches), the
// only translation units of ours that include their headers and call them. Kept to calls that exist
// in CUDA 11.4+ and cuDNN 8+ (docs/gpu.md, "Support matrix"); anything newer sits behind a version
// check.
//
// cuDNN 9 deprecates the legacy API this file is written against (filter,
// convolution, activation, pooling and op-tensor descriptors and the calls
// that take them; docs/gpu.md, "Moving to the graph API", says what would
// replace them). Its deprecation warnings are on for this file, so a new
// use of a deprecated call warns (an error in CI), and silenced only around
// the two places below that use the legacy API on purpose.
#define CUDNN_WARN_DEPRECATED

#include "devices/cuda/cuda_api_real.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <climits>
#include <string>
#include <vector>

#include "devices/cuda/cuda_kernel_api.h"
#include "devices/cuda/cuda_real_support.h"

// Silences cuDNN 9's deprecation of its legacy API where we use it on
// purpose (see the top of this file).
#define IOS_LEGACY_CUDNN_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
#define IOS_LEGACY_CUDNN_END _Pragma("GCC diagnostic pop")

namespace ios::cuda {
namespace {

// The legacy API's algorithm search result.
IOS_LEGACY_CUDNN_BEGIN
AlgoResult ResultFromDnn(const cudnnConvolutionFwdAlgoPerf_t& perf) {
  AlgoResult result;
  result.algo = static_cast<int>(perf.algo);
  result.status = perf.status == CUDNN_STATUS_SUCCESS ? Code::kOk : Code::kUnsupported;
  result.ms = perf.time;
  result.workspace_bytes = perf.memory;
  result.math = MathFromDnn(perf.mathType);
  return result;
}
IOS_LEGACY_CUDNN_END

class RealApi final : public KernelApi {
 public:
  ~RealApi() override {
    if (nvml_ != nullptr) dlclose(nvml_);
  }

  Status DeviceCount(int& count) override {
    count = 0;
    return FromCuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  }

  Status Properties(int device, DeviceProperties& out) override {
    cudaDeviceProp prop{};
    if (Status s = FromCuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
        !s.ok()) {
      return s;
    }
    out.name = prop.name;
    out.major = prop.major;
    out.minor = prop.minor;
    out.sm_count = prop.multiProcessorCount;
    out.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    // Attributes, not cudaDeviceProp fields: CUDA 13 dropped the latter.
    if (cudaDeviceGetAttribute(&out.clock_khz, cudaDevAttrClockRate, device) != cudaSuccess) {
      out.clock_khz = 0;
    }
    if (cudaDeviceGetAttribute(&out.memory_clock_khz, cudaDevAttrMemoryClockRate, device) !=
        cudaSuccess) {
      out.memory_clock_khz = 0;
    }
    (void)cudaGetLastError();
    return Ok();
  }

  Status GetVersions(Versions& out) override {
    if (Status s = FromCuda(cudaDriverGetVersion(&out.driver), "cudaDriverGetVersion"); !s.ok()) {
      return s;
    }
    if (Status s = FromCuda(cudaRuntimeGetVersion(&out.runtime), "cudaRuntimeGetVersion");
        !s.ok()) {
      return s;
    }
    out.cudnn = static_cast<int64_t>(cudnnGetVersion());
    return Ok();
  }

  Status SetDevice(int device) override { return FromCuda(cudaSetDevice(device), "cudaSetDevice"); }

  Status MemoryInfo(size_t& free_bytes, size_t& total_bytes) override {
    return FromCuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  }

  bool ClocksLocked(int device) override { return ApplicationClocksSet(device, nvml_); }

  Status Malloc(size_t bytes, void*& pointer) override {
    pointer = nullptr;
    return FromCuda(cudaMalloc(&pointer, bytes), "cudaMalloc");
  }
  Status Free(void* pointer) override { return FromCuda(cudaFree(pointer), "cudaFree"); }

  Status CopyToDevice(void* device, const void* host, size_t bytes) override {
    if (Status s = FromCuda(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice),
                            "cudaMemcpy(host to device)");
        !s.ok()) {
      return s;
    }
    // Pageable copies may return before the data has landed, and our
    // streams do not wait for the legacy stream: wait here.
    return FromCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  Status CopyToHost(void* host, const void* device, size_t bytes) override {
    if (Status s = FromCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); !s.ok()) return s;
    return FromCuda(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost),
                    "cudaMemcpy(device to host)");
  }

  Status CanAccessPeer(int device, int peer, bool& can) override {
    int answer = 0;
    const Status status =
        FromCuda(cudaDeviceCanAccessPeer(&answer, device, peer), "cudaDeviceCanAccessPeer");
    can = status.ok() && answer != 0;
    return status;
  }
  Status EnablePeerAccess(int peer) override {
    const cudaError_t error = cudaDeviceEnablePeerAccess(peer, 0);
    if (error == cudaErrorPeerAccessAlreadyEnabled) {
      // Not sticky, but it stays as the thread's last error: cleared, so a
      // later cudaGetLastError does not report it against another call.
      (void)cudaGetLastError();
      return Ok();
    }
    return FromCuda(error, "cudaDeviceEnablePeerAccess");
  }
  Status CopyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                       Stream stream) override {
    return FromCuda(
        cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, As<CUstream_st>(stream.value)),
        "cudaMemcpyPeerAsync");
  }

  Status CreateStream(Stream& stream) override {
    cudaStream_t s = nullptr;
    Status status = FromCuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags(non-blocking)");
    stream.value = s;
    return status;
  }
  Status DestroyStream(Stream stream) override {
    return FromCuda(cudaStreamDestroy(As<CUstream_st>(stream.value)), "cudaStreamDestroy");
  }

  Status CreateEvent(Event& event, bool timing) override {
    cudaEvent_t e = nullptr;
    Status status =
        FromCuda(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
                 "cudaEventCreateWithFlags");
    event.value = e;
    return status;
  }
  Status DestroyEvent(Event event) override {
    return FromCuda(cudaEventDestroy(As<CUevent_st>(event.value)), "cudaEventDestroy");
  }
  Status RecordEvent(Event event, Stream stream) override {
    return FromCuda(cudaEventRecord(As<CUevent_st>(event.value), As<CUstream_st>(stream.value)),
                    "cudaEventRecord");
  }
  Status WaitEvent(Stream stream, Event event) override {
    return FromCuda(
        cudaStreamWaitEvent(As<CUstream_st>(stream.value), As<CUevent_st>(event.value), 0),
        "cudaStreamWaitEvent");
  }
  Status SynchronizeEvent(Event event) override {
    return FromCuda(cudaEventSynchronize(As<CUevent_st>(event.value)), "cudaEventSynchronize");
  }
  Status SynchronizeStream(Stream stream) override {
    return FromCuda(cudaStreamSynchronize(As<CUstream_st>(stream.value)), "cudaStreamSynchronize");
  }
  Status ElapsedMs(Event start, Event end, float& ms) override {
    return FromCuda(
        cudaEventElapsedTime(&ms, As<CUevent_st>(start.value), As<CUevent_st>(end.value)),
        "cudaEventElapsedTime");
  }

  Status BeginCapture(Stream stream) override {
    return FromCuda(
        cudaStreamBeginCapture(As<CUstream_st>(stream.value), cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture(thread-local)");
  }
  Status EndCapture(Stream stream, Graph& graph) override {
    cudaGraph_t g = nullptr;
    Status status =
        FromCuda(cudaStreamEndCapture(As<CUstream_st>(stream.value), &g), "cudaStreamEndCapture");
    graph.value = g;
    return status;
  }
  Status InstantiateGraph(Graph graph, GraphExec& exec) override {
    cudaGraphExec_t e = nullptr;
    Status status = FromCuda(cudaGraphInstantiateWithFlags(&e, As<CUgraph_st>(graph.value), 0),
                             "cudaGraphInstantiateWithFlags");
    exec.value = e;
    return status;
  }
  Status LaunchGraph(GraphExec exec, Stream stream) override {
    return FromCuda(cudaGraphLaunch(As<CUgraphExec_st>(exec.value), As<CUstream_st>(stream.value)),
                    "cudaGraphLaunch");
  }
  Status DestroyGraph(Graph graph) override {
    return FromCuda(cudaGraphDestroy(As<CUgraph_st>(graph.value)), "cudaGraphDestroy");
  }
  Status DestroyGraphExec(GraphExec exec) override {
    return FromCuda(cudaGraphExecDestroy(As<CUgraphExec_st>(exec.value)), "cudaGraphExecDestroy");
  }

  Status CreateDnn(DnnHandle& handle) override {
    cudnnHandle_t h = nullptr;
    Status status = FromDnn(cudnnCreate(&h), "cudnnCreate");
    handle.value = h;
    return status;
  }
  Status DestroyDnn(DnnHandle handle) override {
    return FromDnn(cudnnDestroy(Dnn(handle)), "cudnnDestroy");
  }
  Status SetDnnStream(DnnHandle handle, Stream stream) override {
    return FromDnn(cudnnSetStream(Dnn(handle), As<CUstream_st>(stream.value)), "cudnnSetStream");
  }

  Status CreateTensor(const TensorLayout& t, TensorDesc& desc) override {
    for (int64_t stride : {t.stride_n, t.stride_c, t.stride_h, t.stride_w}) {
      if (stride > INT_MAX) {
        return {Code::kUnsupported, "cudnnSetTensor4dDescriptorEx",
                "a stride of " + std::to_string(stride) + " elements does not fit cuDNN's int"};
      }
    }
    return MakeDescriptor(
        cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor", cudnnDestroyTensorDescriptor,
        [&](cudnnTensorDescriptor_t d) {
          return FromDnn(cudnnSetTensor4dDescriptorEx(
                             d, CUDNN_DATA_FLOAT, t.n, t.c, t.h, t.w, static_cast<int>(t.stride_n),
                             static_cast<int>(t.stride_c), static_cast<int>(t.stride_h),
                             static_cast<int>(t.stride_w)),
                         "cudnnSetTensor4dDescriptorEx");
        },
        desc.value);
  }
  Status DestroyTensor(TensorDesc desc) override {
    return FromDnn(cudnnDestroyTensorDescriptor(Tensor(desc)), "cudnnDestroyTensorDescriptor");
  }

  // From here to the end of the class: the legacy descriptors (filter,
  // convolution, activation, pooling, op-tensor) and the calls that take
  // them, deprecated in cuDNN 9 and used on purpose.
  IOS_LEGACY_CUDNN_BEGIN
  Status CreateFilter(int k, int c, int r, int s, FilterDesc& desc) override {
    return MakeDescriptor(
        cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor", cudnnDestroyFilterDescriptor,
        [&](cudnnFilterDescriptor_t d) {
          return FromDnn(
              cudnnSetFilter4dDescriptor(d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, s),
              "cudnnSetFilter4dDescriptor");
        },
        desc.value);
  }
  Status DestroyFilter(FilterDesc desc) override {
    return FromDnn(cudnnDestroyFilterDescriptor(Filter(desc)), "cudnnDestroyFilterDescriptor");
  }

  Status CreateConvolution(const ConvGeometry& g, ConvDesc& desc) override {
    return MakeDescriptor(
        cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor",
        cudnnDestroyConvolutionDescriptor,
        [&](cudnnConvolutionDescriptor_t d) {
          Status status = FromDnn(cudnnSetConvolution2dDescriptor(
                                      d, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dilation_h,
                                      g.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                                  "cudnnSetConvolution2dDescriptor");
          if (status.ok()) {
            status = FromDnn(cudnnSetConvolutionGroupCount(d, g.groups),
                             "cudnnSetConvolutionGroupCount");
          }
          if (status.ok()) {
            status = FromDnn(cudnnSetConvolutionMathType(d, ToDnn(g.math)),
                             "cudnnSetConvolutionMathType");
          }
          return status;
        },
        desc.value);
  }
  Status SetConvolutionMath(ConvDesc desc, MathType math) override {
    return FromDnn(cudnnSetConvolutionMathType(Conv(desc), ToDnn(math)),
                   "cudnnSetConvolutionMathType");
  }
  Status DestroyConvolution(ConvDesc desc) override {
    return FromDnn(cudnnDestroyConvolutionDescriptor(Conv(desc)),
                   "cudnnDestroyConvolutionDescriptor");
  }

  Status CreateActivation(ActivationMode mode, ActivationDesc& desc) override {
    cudnnActivationMode_t dnn_mode = CUDNN_ACTIVATION_RELU;
    double coef = 0.0;  // the clipping threshold of CLIPPED_RELU
    switch (mode) {
      case ActivationMode::kRelu:
        break;
      case ActivationMode::kSigmoid:
        dnn_mode = CUDNN_ACTIVATION_SIGMOID;
        break;
      case ActivationMode::kTanh:
        dnn_mode = CUDNN_ACTIVATION_TANH;
        break;
      case ActivationMode::kRelu6:
        dnn_mode = CUDNN_ACTIVATION_CLIPPED_RELU;
        coef = 6.0;
        break;
      case ActivationMode::kSwish:
#if CUDNN_VERSION >= 8200
        dnn_mode = CUDNN_ACTIVATION_SWISH;
        break;
#else
        return {Code::kUnsupported, "cudnnSetActivationDescriptor(SWISH)",
                "swish needs cuDNN 8.2 or newer"};
#endif
      case ActivationMode::kHardSwish:
      case ActivationMode::kHardSigmoid:
      case ActivationMode::kLeakyRelu:
      case ActivationMode::kGelu:
      case ActivationMode::kGeluTanh:
      case ActivationMode::kHardSigmoidAlphaBeta:
        return {Code::kUnsupported, "cudnnSetActivationDescriptor",
                "cuDNN has no such mode (hardswish, hardsigmoid, leaky relu, gelu, gelu_tanh); "
                "ActivateStrided computes it"};
    }
    return MakeDescriptor(
        cudnnCreateActivationDescriptor, "cudnnCreateActivationDescriptor",
        cudnnDestroyActivationDescriptor,
        [&](cudnnActivationDescriptor_t d) {
          Status set =
              FromDnn(cudnnSetActivationDescriptor(d, dnn_mode, CUDNN_NOT_PROPAGATE_NAN, coef),
                      "cudnnSetActivationDescriptor");
#if CUDNN_VERSION >= 8200
          if (set.ok() && mode == ActivationMode::kSwish) {
            set = FromDnn(cudnnSetActivationDescriptorSwishBeta(d, 1.0),
                          "cudnnSetActivationDescriptorSwishBeta");
          }
#endif
          return set;
        },
        desc.value);
  }
  Status DestroyActivation(ActivationDesc desc) override {
    return FromDnn(cudnnDestroyActivationDescriptor(Activation(desc)),
                   "cudnnDestroyActivationDescriptor");
  }

  Status CreatePooling(PoolingMode mode, int window_h, int window_w, int pad_h, int pad_w,
                       int stride_h, int stride_w, PoolingDesc& desc) override {
    const cudnnPoolingMode_t dnn_mode = mode == PoolingMode::kMax ? CUDNN_POOLING_MAX
                                        : mode == PoolingMode::kAverageExcludingPadding
                                            ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                            : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    return MakeDescriptor(
        cudnnCreatePoolingDescriptor, "cudnnCreatePoolingDescriptor", cudnnDestroyPoolingDescriptor,
        [&](cudnnPoolingDescriptor_t d) {
          return FromDnn(cudnnSetPooling2dDescriptor(d, dnn_mode, CUDNN_NOT_PROPAGATE_NAN, window_h,
                                                     window_w, pad_h, pad_w, stride_h, stride_w),
                         "cudnnSetPooling2dDescriptor");
        },
        desc.value);
  }
  Status DestroyPooling(PoolingDesc desc) override {
    return FromDnn(cudnnDestroyPoolingDescriptor(Pooling(desc)), "cudnnDestroyPoolingDescriptor");
  }

  Status CreateOpTensor(OpTensorOp op, OpTensorDesc& desc) override {
    return MakeDescriptor(
        cudnnCreateOpTensorDescriptor, "cudnnCreateOpTensorDescriptor",
        cudnnDestroyOpTensorDescriptor,
        [&](cudnnOpTensorDescriptor_t d) {
          return FromDnn(cudnnSetOpTensorDescriptor(
                             d, op == OpTensorOp::kMul ? CUDNN_OP_TENSOR_MUL : CUDNN_OP_TENSOR_ADD,
                             CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN),
                         "cudnnSetOpTensorDescriptor");
        },
        desc.value);
  }
  Status DestroyOpTensor(OpTensorDesc desc) override {
    return FromDnn(cudnnDestroyOpTensorDescriptor(OpDesc(desc)), "cudnnDestroyOpTensorDescriptor");
  }

  Status FindConvolutionAlgorithms(DnnHandle handle, TensorDesc x_desc, const void* x,
                                   FilterDesc w_desc, const void* w, ConvDesc conv,
                                   TensorDesc y_desc, void* y, void* workspace,
                                   size_t workspace_bytes,
                                   std::vector<AlgoResult>& results) override {
    return CollectAlgorithms(
        handle, "cudnnFindConvolutionForwardAlgorithmEx",
        [&](int count, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
          return cudnnFindConvolutionForwardAlgorithmEx(
              Dnn(handle), Tensor(x_desc), x, Filter(w_desc), w, Conv(conv), Tensor(y_desc), y,
              count, returned, perf, workspace, workspace_bytes);
        },
        results);
  }

  Status HeuristicConvolutionAlgorithms(DnnHandle handle, TensorDesc x_desc, FilterDesc w_desc,
                                        ConvDesc conv, TensorDesc y_desc,
                                        std::vector<AlgoResult>& results) override {
    return CollectAlgorithms(
        handle, "cudnnGetConvolutionForwardAlgorithm_v7",
        [&](int count, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
          return cudnnGetConvolutionForwardAlgorithm_v7(Dnn(handle), Tensor(x_desc), Filter(w_desc),
                                                        Conv(conv), Tensor(y_desc), count, returned,
                                                        perf);
        },
        results);
  }

  Status ConvolutionForward(DnnHandle handle, TensorDesc x_desc, const void* x, FilterDesc w_desc,
                            const void* w, ConvDesc conv, int algo, void* workspace,
                            size_t workspace_bytes, TensorDesc y_desc, void* y) override {
    const float one = 1, zero = 0;
    return FromDnn(cudnnConvolutionForward(Dnn(handle), &one, Tensor(x_desc), x, Filter(w_desc), w,
                                           Conv(conv), static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                           workspace, workspace_bytes, &zero, Tensor(y_desc), y),
                   "cudnnConvolutionForward");
  }

  Status ConvolutionBiasRelu(DnnHandle handle, TensorDesc x_desc, const void* x, FilterDesc w_desc,
                             const void* w, ConvDesc conv, int algo, void* workspace,
                             size_t workspace_bytes, TensorDesc bias_desc, const void* bias,
                             ActivationDesc relu, TensorDesc y_desc, void* y) override {
    // z = y with alpha2 = 0: no residual input.
    const float one = 1, zero = 0;
    return FromDnn(
        cudnnConvolutionBiasActivationForward(
            Dnn(handle), &one, Tensor(x_desc), x, Filter(w_desc), w, Conv(conv),
            static_cast<cudnnConvolutionFwdAlgo_t>(algo), workspace, workspace_bytes, &zero,
            Tensor(y_desc), y, Tensor(bias_desc), bias, Activation(relu), Tensor(y_desc), y),
        "cudnnConvolutionBiasActivationForward");
  }

  Status AddTensor(DnnHandle handle, TensorDesc a_desc, const void* a, TensorDesc c_desc,
                   void* c) override {
    // beta = 1: c is read, then written (cuDNN's scaling parameters).
    const float one = 1;
    return FromDnn(cudnnAddTensor(Dnn(handle), &one, Tensor(a_desc), a, &one, Tensor(c_desc), c),
                   "cudnnAddTensor");
  }

  Status TransformTensor(DnnHandle handle, TensorDesc x_desc, const void* x, TensorDesc y_desc,
                         void* y) override {
    const float one = 1, zero = 0;
    return FromDnn(
        cudnnTransformTensor(Dnn(handle), &one, Tensor(x_desc), x, &zero, Tensor(y_desc), y),
        "cudnnTransformTensor");
  }

  Status ActivationForward(DnnHandle handle, ActivationDesc act, TensorDesc x_desc, const void* x,
                           TensorDesc y_desc, void* y) override {
    const float one = 1, zero = 0;
    return FromDnn(cudnnActivationForward(Dnn(handle), Activation(act), &one, Tensor(x_desc), x,
                                          &zero, Tensor(y_desc), y),
                   "cudnnActivationForward");
  }

  Status PoolingForward(DnnHandle handle, PoolingDesc pool, TensorDesc x_desc, const void* x,
                        TensorDesc y_desc, void* y) override {
    const float one = 1, zero = 0;
    return FromDnn(cudnnPoolingForward(Dnn(handle), Pooling(pool), &one, Tensor(x_desc), x, &zero,
                                       Tensor(y_desc), y),
                   "cudnnPoolingForward");
  }

  Status SoftmaxForward(DnnHandle handle, bool log, TensorDesc x_desc, const void* x,
                        TensorDesc y_desc, void* y) override {
    const float one = 1, zero = 0;
    return FromDnn(
        cudnnSoftmaxForward(Dnn(handle), log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                            CUDNN_SOFTMAX_MODE_CHANNEL, &one, Tensor(x_desc), x, &zero,
                            Tensor(y_desc), y),
        "cudnnSoftmaxForward");
  }

  Status OpTensor(DnnHandle handle, OpTensorDesc op, TensorDesc a_desc, const void* a,
                  TensorDesc b_desc, const void* b, TensorDesc c_desc, void* c) override {
    const float one = 1, zero = 0;
    return FromDnn(cudnnOpTensor(Dnn(handle), OpDesc(op), &one, Tensor(a_desc), a, &one,
                                 Tensor(b_desc), b, &zero, Tensor(c_desc), c),
                   "cudnnOpTensor");
  }

 private:
  //! Room for every algorithm cuDNN knows, `search(count, &returned, perf)`
  //! into it, and the results in cuDNN's order (fastest or best first).
  template <class Search>
  static Status CollectAlgorithms(DnnHandle handle, const char* call, const Search& search,
                                  std::vector<AlgoResult>& results) {
    results.clear();
    int count = 0;
    if (Status s = FromDnn(cudnnGetConvolutionForwardAlgorithmMaxCount(Dnn(handle), &count),
                           "cudnnGetConvolutionForwardAlgorithmMaxCount");
        !s.ok()) {
      return s;
    }
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(count));
    int returned = 0;
    if (Status s = FromDnn(search(count, &returned, perf.data()), call); !s.ok()) return s;
    for (int i = 0; i < returned; ++i)
      results.push_back(ResultFromDnn(perf[static_cast<size_t>(i)]));
    return Ok();
  }

  static cudnnHandle_t Dnn(DnnHandle h) { return static_cast<cudnnHandle_t>(h.value); }
  static cudnnTensorDescriptor_t Tensor(TensorDesc d) {
    return static_cast<cudnnTensorDescriptor_t>(d.value);
  }
  static cudnnFilterDescriptor_t Filter(FilterDesc d) {
    return static_cast<cudnnFilterDescriptor_t>(d.value);
  }
  static cudnnConvolutionDescriptor_t Conv(ConvDesc d) {
    return static_cast<cudnnConvolutionDescriptor_t>(d.value);
  }
  static cudnnActivationDescriptor_t Activation(ActivationDesc d) {
    return static_cast<cudnnActivationDescriptor_t>(d.value);
  }
  static cudnnPoolingDescriptor_t Pooling(PoolingDesc d) {
    return static_cast<cudnnPoolingDescriptor_t>(d.value);
  }
  static cudnnOpTensorDescriptor_t OpDesc(OpTensorDesc d) {
    return static_cast<cudnnOpTensorDescriptor_t>(d.value);
  }

  IOS_LEGACY_CUDNN_END

  void* nvml_ = nullptr;  // dlopen handle, when NVML was asked for
};

}  // namespace

std::unique_ptr<Api> MakeRealApi() { return std::make_unique<RealApi>(); }

}  // namespace ios::cuda
