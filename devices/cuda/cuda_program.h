// A program prepared on the cuda device (docs/gpu.md). Its storage slots
// are device allocations in NCHW; a view is a strided cuDNN tensor (a
// pointer offset of `offset` planes; at batch > 1 the batch stride is the
// whole buffer's). Every stream the program uses has its own cuDNN handle
// and workspace, lent by the device's pool (cuda_pool.h): the origin stream
// runs single-lane stages, lane i of a stage with several runs on stream
// i + 1, forked from and joined to the origin with events. Everything is
// created at prepare or taken from the pool (the compilation of steps into
// calls is cuda_compile.cc); a run only enqueues work.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "devices/cuda/cuda_algorithms.h"
#include "devices/cuda/cuda_internal.h"
#include "devices/cuda/cuda_pool.h"
#include "exec/device.h"
#include "exec/program.h"

namespace ios::devices::cuda_detail {

//! What the device keeps for its whole life and its prepared programs use
//! (shared, so a program may outlive the device object without dangling).
struct DeviceState {
  std::unique_ptr<cuda::Api> api;
  CudaOptions options;
  AlgorithmCache algorithms;
  std::unique_ptr<DevicePool> pool;  // after `api`: destroyed before it
  bool lost = false;                 // a sticky error happened: refuse everything
};

//! The state of a device MakeCudaDevice opened; null for any other device.
std::shared_ptr<DeviceState> StateOf(exec::Device& device);

//! One enqueued library call of a step; `label` names the step for errors.
struct Call {
  std::function<cuda::Status()> run;
  const std::string* label = nullptr;
};

//! A stream the program enqueues on, with its own cuDNN handle and
//! workspace: the pool's (PooledStream), as the program uses them.
struct StreamContext {
  cuda::Stream stream;
  cuda::DnnHandle dnn;
  cuda::Event joined;                   // recorded on this stream when a lane of it ends
  std::shared_ptr<Workspace> borrowed;  // keeps `workspace` alive
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  size_t workspace_needed = 0;
};

//! A convolution with bias and relu that cuDNN may run as one fused call.
struct FusedConv {
  std::string key;  // the fusion cache's: the problem and its algorithm
  std::string where;
  std::function<cuda::Status()> run;  // the fused call
  bool runs = false;                  // decided before the first run
};

struct CompiledStage {
  std::vector<std::vector<Call>> lanes;  // one lane: on the origin stream
};

//! The largest extent (elements from a tensor's first to its last, plus
//! one) and stride cuDNN's 4-D tensor descriptors take: they are ints.
constexpr int64_t kMaxTensorExtent = 2147483647;  // 2^31 - 1

//! The floats of the zeroed copy of a convolution's input, padded on every
//! side, that `step` runs on at `batch` (ConvParams::padding_end_extra:
//! cuDNN pads both sides equally); 0 when it reads its input as it is.
//! `input` is the buffer of the step's first input view.
double PaddedInputElements(const exec::Step& step, const exec::BufferDesc& input, int batch);

class CudaPreparedProgram : public exec::PreparedProgram {
 public:
  //! Throws ExecError (typed as the failure that stopped it), having given
  //! back whatever it had created.
  CudaPreparedProgram(std::shared_ptr<DeviceState> state, const exec::Program& program, int batch);
  ~CudaPreparedProgram() override;

  void Write(int buffer, std::span<const float> values) override;
  std::vector<float> Read(const exec::View& view) override;
  double TimedRuns(int runs) override;
  //! Records kExecutedCopies runs back to back into one graph (once per
  //! program) and times ceil(runs / copies) replays of it, scaled to `runs`
  //! runs: each copy pays what a stage pays inside a network graph, no
  //! launch or synchronisation of its own. `warm_weights` means nothing
  //! here: a GPU's L2 keeps no weights across a network (docs/gpu.md).
  double TimedRunsAsExecuted(int runs, bool warm_weights) override;
  bool CanReplay() const override { return true; }
  //! "cudnn conv algo 1/fma,0/fma": each convolution's algorithm (cuDNN's
  //! cudnnConvolutionFwdAlgo_t number) and math, in program order.
  std::string Detail() const override;
  double TimedReplays(int runs) override;

  // ---- For the multi-device player (cuda_multi.cc), which enqueues several
  // programs' stages and the copies between them from one host thread; the
  // caller has made this program's GPU current. -----------------------------
  //! Enqueues stages [begin, end) once; nothing waits for the GPU.
  void EnqueueStages(int begin, int end);
  //! The stream every stage starts and ends on (lanes fork and join there).
  cuda::Stream OriginStream() const { return Origin(); }
  //! The device address of a view's first channel of sample 0.
  float* DeviceAddress(const exec::View& view) const { return ViewAddress(view); }
  //! A buffer's channel count and plane size (h x w), for copies of views.
  const Shape& BufferShape(int buffer) const { return buffers_.at(buffer).shape; }
  int batch() const { return batch_; }

 private:
  struct Weights {
    DeviceMemory kernel, bias;
  };

  // ---- Preparing and running (cuda_program.cc) ---------------------------
  cuda::Stream Origin() const { return contexts_.front().stream; }
  //! Waits for whatever is still in flight on any of the program's streams
  //! (a run that failed half-way leaves work on the side streams).
  void SynchronizeAll();
  //! Check() that also remembers a lost device.
  void Checked(const cuda::Status& status, const std::string& where);
  size_t Elements(int buffer) const;
  float* BufferAddress(int buffer) const;
  float* ViewAddress(const exec::View& view) const;
  //! Refuses, before allocating anything, a program whose storage and
  //! weights exceed the GPU's free memory.
  void CheckMemory(const exec::Program& program);
  void UploadWeights(const exec::Program& program);
  DeviceMemory Upload(const std::vector<float>& values, const std::string& what);
  //! The origin stream, and one more per lane of the widest stage, from
  //! the pool.
  void BorrowStreams(const exec::Program& program);
  //! Whether each fused convolution+bias+relu runs (FusionRuns).
  void DecideFusion();
  void RunCalls(const std::vector<Call>& calls);
  //! One run of every stage, enqueued; nothing waits for the GPU.
  void Enqueue();
  //! Milliseconds between events recorded on the origin stream before and
  //! after what `enqueue` puts on it.
  double Timed(const std::function<void()>& enqueue);
  //! A recorded graph, instantiated.
  struct Recorded {
    OwnedGraph graph;
    OwnedGraphExec exec;
  };
  //! Records `copies` runs, as Enqueue issues them, into one graph. A
  //! failure ends the capture before it is reported, so the stream stays
  //! usable.
  Recorded Capture(int copies);

  // ---- Compiling steps into calls (cuda_compile.cc) ----------------------
  //! Refuses, before any cuDNN call, a program with a tensor cuDNN's int
  //! descriptors cannot hold (kMaxTensorExtent), naming it and the limit.
  void CheckTensorLimits(const exec::Program& program) const;
  void Compile(const exec::Program& program, AlgorithmSearch& search);
  void CompileStep(const exec::Program& program, const exec::Step& step, StreamContext& context,
                   const std::string& where, AlgorithmSearch& search, std::vector<Call>& calls);
  void CompileConv(const exec::Program& program, const exec::Step& step, StreamContext& context,
                   const std::string& where, AlgorithmSearch& search, std::vector<Call>& calls);
  //! For a convolution with extra end padding (cuda_padded_input.cc):
  //! allocates and zeroes its padded input, points `x_layout` and `input`
  //! at it, and returns the call that copies the input view into its
  //! interior.
  std::function<cuda::Status()> PadInput(const exec::Step& step, StreamContext& context,
                                         const std::string& where, cuda::TensorLayout& x_layout,
                                         const float*& input);
  void CompilePool(const exec::Step& step, StreamContext& context, const std::string& where,
                   std::vector<Call>& calls);
  void CompileCeilMaxPool(const exec::Step& step, StreamContext& context, std::vector<Call>& calls);
  void CompileActivation(const exec::Step& step, StreamContext& context, const std::string& where,
                         std::vector<Call>& calls);
  void CompileRegistered(const exec::Step& step, StreamContext& context, const std::string& where,
                         std::vector<Call>& calls);
  void CompileFlatten(const exec::Step& step, StreamContext& context, const std::string& where,
                      std::vector<Call>& calls);
  void AddTransformCall(const exec::Step& step, StreamContext& context, cuda::TensorDesc x,
                        cuda::TensorDesc y, std::vector<Call>& calls);
  void CompileChannelShuffle(const exec::Step& step, StreamContext& context,
                             const std::string& where, std::vector<Call>& calls);
  void CompileLayerNorm(const exec::Step& step, StreamContext& context, const std::string& where,
                        std::vector<Call>& calls);
  //! The transformer kinds (cuda_compile_transformer.cc): our kernels.
  void CompileAttention(const exec::Step& step, StreamContext& context, const std::string& where,
                        std::vector<Call>& calls);
  void CompileEmbedTokens(const exec::Step& step, StreamContext& context, const std::string& where,
                          std::vector<Call>& calls);
  void CompileWindowAttention(const exec::Step& step, StreamContext& context,
                              const std::string& where, std::vector<Call>& calls);
  void CompileSpaceToDepth(const exec::Step& step, StreamContext& context, const std::string& where,
                           std::vector<Call>& calls);
  void CompileCoefficientActivation(const exec::Step& step, StreamContext& context,
                                    const std::string& where, std::vector<Call>& calls);
  void CompileEltwise(const exec::Step& step, StreamContext& context, const std::string& where,
                      std::vector<Call>& calls);
  void CompileIdentity(const exec::Step& step, StreamContext& context, std::vector<Call>& calls);
  //! `act` from view `from` into view `to` (the same view: in place).
  std::function<cuda::Status()> ActivationCall(Activation act, StreamContext& context,
                                               const exec::View& from, const exec::View& to,
                                               const std::string& where);
  //! Our activation kernel (cuda::Api::ActivateStrided) from `from` into `to`.
  std::function<cuda::Status()> KernelActivationCall(cuda::ActivationMode mode,
                                                     cuda::ActivationParams params,
                                                     StreamContext& context, const exec::View& from,
                                                     const exec::View& to);
  //! A call that reads the step's one input view and writes its output
  //! view: `run(api, handle, x, input, y, output)`.
  void AddUnaryCall(const exec::Step& step, StreamContext& context, const std::string& where,
                    std::vector<Call>& calls,
                    std::function<cuda::Status(cuda::Api&, cuda::DnnHandle, cuda::TensorDesc,
                                               const float*, cuda::TensorDesc, float*)>
                        run);
  cuda::TensorDesc KeepTensor(const cuda::TensorLayout& layout, const std::string& where);
  cuda::TensorDesc KeepTensor(const exec::View& view, const std::string& where);
  cuda::ActivationDesc KeepActivation(Activation act, const std::string& where);

  // Declared in the order they may be destroyed last to first: descriptors
  // and graphs before the streams and memory they refer to.
  std::shared_ptr<DeviceState> state_;
  cuda::Api& api_;
  const int batch_;
  std::vector<exec::BufferDesc> buffers_;
  std::deque<std::string> labels_;  // one per step, in program order
  std::vector<DeviceMemory> slots_;
  std::deque<DeviceMemory> padded_;  // convolutions' padded inputs (PadInput)
  std::deque<Weights> weights_;
  std::deque<StreamContext> contexts_;  // [0]: the origin stream
  cuda::Event fork_, start_, end_;      // the pool's
  std::deque<OwnedTensor> tensors_;
  std::deque<OwnedFilter> filters_;
  std::deque<OwnedConv> convs_;
  std::deque<OwnedActivation> activations_;
  std::deque<OwnedPooling> pools_;
  std::deque<OwnedOpTensor> ops_;
  std::deque<FusedConv> fused_;
  std::vector<CompiledStage> stages_;
  std::vector<cuda::AlgoResult> chosen_;  // per convolution step, in program order
  Recorded replay_;                       // one run (TimedReplays)
  Recorded executed_;                     // kExecutedCopies runs (TimedRunsAsExecuted)
};

}  // namespace ios::devices::cuda_detail
