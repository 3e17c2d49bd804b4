// The cuda device (docs/gpu.md). A program's storage slots are device
// allocations in NCHW; a view is a strided cuDNN tensor (a pointer offset of
// `offset` planes; at batch > 1 the batch stride is the whole buffer's).
// Every stream the program uses has its own cuDNN handle and workspace: the
// origin stream runs single-lane stages, lane i of a stage with several runs
// on stream i + 1, forked from and joined to the origin with events. All
// objects are created at prepare; a run only enqueues work.
#include "worker/cuda/cuda_device.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <sstream>
#include <utility>

#include "common/op_kinds.h"
#include "exec/program.h"

namespace ios::worker {
namespace {

using cuda::Code;
using exec::ExecError;

//! The ExecError a failed call means; `where` says what we were doing.
[[noreturn]] void Fail(const cuda::Status& status, const std::string& where) {
  const std::string text = "cuda: " + where + ": " + status.call + " failed: " + status.message;
  switch (status.code) {
    case Code::kOutOfMemory:
      throw ExecError(MeasureError::kOutOfMemory, text);
    case Code::kUnsupported:
      throw ExecError(MeasureError::kUnsupported, text);
    case Code::kDeviceLost:
      throw exec::DeviceLostError(text + " (the GPU context is lost until the process exits)");
    case Code::kOk:
    case Code::kRefused:
    case Code::kFailure:
    case Code::kNoDevice:
      break;
  }
  throw ExecError(MeasureError::kBackendFailure, text);
}

void Check(const cuda::Status& status, const std::string& where) {
  if (!status.ok()) Fail(status, where);
}

//! Owns one library object and gives it back through `Destroy` (errors of a
//! destroy are ignored: there is nothing left to do about them).
template <class H, cuda::Status (cuda::Api::*Destroy)(H)>
class Owned {
 public:
  Owned() = default;
  Owned(cuda::Api& api, H handle) : api_(&api), handle_(handle) {}
  Owned(Owned&& other) noexcept : api_(other.api_), handle_(std::exchange(other.handle_, H{})) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      Reset();
      api_ = other.api_;
      handle_ = std::exchange(other.handle_, H{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { Reset(); }
  H get() const { return handle_; }

 private:
  void Reset() {
    if (handle_) (void)(api_->*Destroy)(handle_);
    handle_ = H{};
  }
  cuda::Api* api_ = nullptr;
  H handle_{};
};

using DeviceMemory = Owned<void*, &cuda::Api::Free>;
using OwnedStream = Owned<cuda::Stream, &cuda::Api::DestroyStream>;
using OwnedEvent = Owned<cuda::Event, &cuda::Api::DestroyEvent>;
using OwnedGraph = Owned<cuda::Graph, &cuda::Api::DestroyGraph>;
using OwnedGraphExec = Owned<cuda::GraphExec, &cuda::Api::DestroyGraphExec>;
using OwnedDnn = Owned<cuda::DnnHandle, &cuda::Api::DestroyDnn>;
using OwnedTensor = Owned<cuda::TensorDesc, &cuda::Api::DestroyTensor>;
using OwnedFilter = Owned<cuda::FilterDesc, &cuda::Api::DestroyFilter>;
using OwnedConv = Owned<cuda::ConvDesc, &cuda::Api::DestroyConvolution>;
using OwnedActivation = Owned<cuda::ActivationDesc, &cuda::Api::DestroyActivation>;
using OwnedPooling = Owned<cuda::PoolingDesc, &cuda::Api::DestroyPooling>;
using OwnedOpTensor = Owned<cuda::OpTensorDesc, &cuda::Api::DestroyOpTensor>;

DeviceMemory Allocate(cuda::Api& api, size_t bytes, const std::string& what) {
  void* pointer = nullptr;
  Check(api.Malloc(bytes, pointer), "allocating " + what);
  return {api, pointer};
}

std::string MiB(double bytes) {
  std::ostringstream text;
  text.precision(bytes < 10 * 1024 * 1024 ? 2 : 0);
  text << std::fixed << bytes / (1024 * 1024) << " MiB";
  return text.str();
}

cuda::MathType MathOf(const CudaOptions& options) {
  return options.math == CudaOptions::Math::kTf32 ? cuda::MathType::kTensorOp
                                                  : cuda::MathType::kFma;
}

//! What the device keeps for its whole life and its prepared programs use
//! (shared, so a program may outlive the device object without dangling).
struct DeviceState {
  std::unique_ptr<cuda::Api> api;
  CudaOptions options;
  //! The chosen algorithm per convolution problem, for the worker's life.
  std::map<std::string, cuda::AlgoResult> algorithms;
  //! Per problem and algorithm: whether cuDNN runs it fused with bias+relu.
  std::map<std::string, bool> fused_relu_runs;
  bool lost = false;  // a sticky error happened: refuse everything
};

//! The cuDNN tensor of `view` at `batch`.
cuda::TensorLayout LayoutOf(const exec::BufferDesc& buffer, const exec::View& view, int batch) {
  const Shape& s = buffer.shape;
  const int64_t plane = int64_t{s.h} * s.w;
  return {batch, view.channels, s.h, s.w, int64_t{s.c} * plane, plane, s.w, 1};
}

std::string Describe(const cuda::TensorLayout& t) {
  return std::to_string(t.n) + "x" + std::to_string(t.c) + "x" + std::to_string(t.h) + "x" +
         std::to_string(t.w) + "/" + std::to_string(t.stride_n) + "," + std::to_string(t.stride_c) +
         "," + std::to_string(t.stride_h) + "," + std::to_string(t.stride_w);
}

//! One enqueued library call of a step; `label` names the step for errors.
struct Call {
  std::function<cuda::Status()> run;
  const std::string* label = nullptr;
};

//! A stream the program enqueues on, with its own cuDNN handle and workspace.
struct StreamContext {
  OwnedStream stream;
  OwnedDnn dnn;
  OwnedEvent joined;  // recorded on this stream when a lane of it ends
  DeviceMemory workspace;
  size_t workspace_bytes = 0;
  size_t workspace_needed = 0;
};

//! A convolution with bias and relu that cuDNN may run as one fused call.
struct FusedConv {
  std::string problem;  // with the algorithm: the fusion cache's key
  std::string where;
  std::function<cuda::Status()> run;  // the fused call
  bool runs = false;                  // decided before the first run
};

struct CompiledStage {
  std::vector<std::vector<Call>> lanes;  // one lane: on the origin stream
};

class CudaPreparedProgram : public exec::PreparedProgram {
 public:
  CudaPreparedProgram(std::shared_ptr<DeviceState> state, const exec::Program& program, int batch)
      : state_(std::move(state)), api_(*state_->api), batch_(batch), buffers_(program.buffers) {
    for (const exec::ProgramStage& stage : program.stages) {
      for (const exec::Lane& lane : stage.lanes) {
        for (const exec::Step& step : lane.steps) labels_.push_back(step.label);
      }
    }
    CheckMemory(program);
    for (size_t slot = 0; slot < program.slot_elements.size(); ++slot) {
      slots_.push_back(Allocate(api_, Bytes(program.slot_elements[slot] * batch),
                                "storage slot " + std::to_string(slot)));
    }
    UploadWeights(program);
    CreateStreams(program);
    Compile(program);
    // The search's scratch is not needed to run: give it back before the
    // workspaces the chosen algorithms need are allocated.
    find_workspace_ = DeviceMemory();
    find_workspace_bytes_ = 0;
    for (StreamContext& context : contexts_) {
      if (context.workspace_needed == 0) continue;
      context.workspace = Allocate(api_, context.workspace_needed, "a convolution workspace");
      context.workspace_bytes = context.workspace_needed;
    }
    DecideFusion();
    fork_ = NewEvent(false);
    start_ = NewEvent(true);
    end_ = NewEvent(true);
  }

  ~CudaPreparedProgram() override {
    // Work still in flight (a run that failed half-way) ends before its
    // memory goes.
    for (StreamContext& context : contexts_) (void)api_.SynchronizeStream(context.stream.get());
  }

  void Write(int buffer, std::span<const float> values) override {
    const size_t count = Elements(buffer);
    if (values.size() != count) {
      throw Error("cuda: Write of buffer " + std::to_string(buffer) + " ('" +
                  buffers_[buffer].label + "'): " + std::to_string(values.size()) +
                  " values given, " + std::to_string(count) + " expected");
    }
    // The copy is on the legacy stream, which does not wait for ours.
    SynchronizeAll();
    Checked(api_.CopyToDevice(BufferAddress(buffer), values.data(), count * sizeof(float)),
            "writing buffer '" + buffers_[buffer].label + "'");
  }

  std::vector<float> Read(const exec::View& view) override {
    const size_t count = Elements(view.buffer);
    const Shape& s = buffers_[view.buffer].shape;
    if (view.offset < 0 || view.channels < 1 || view.offset + view.channels > s.c) {
      throw Error("cuda: Read of channels [" + std::to_string(view.offset) + ", " +
                  std::to_string(view.offset + view.channels) + ") of buffer '" +
                  buffers_[view.buffer].label + "' with " + std::to_string(s.c) + " channels");
    }
    std::vector<float> whole(count);
    SynchronizeAll();
    Checked(api_.CopyToHost(whole.data(), BufferAddress(view.buffer), count * sizeof(float)),
            "reading buffer '" + buffers_[view.buffer].label + "'");
    const size_t plane = static_cast<size_t>(s.h) * s.w;
    const size_t per_sample = plane * view.channels;
    std::vector<float> values(per_sample * batch_);
    for (int n = 0; n < batch_; ++n) {
      std::memcpy(values.data() + n * per_sample,
                  whole.data() + (static_cast<size_t>(n) * s.c + view.offset) * plane,
                  per_sample * sizeof(float));
    }
    return values;
  }

  double TimedRuns(int runs) override {
    return Timed([&] {
      for (int run = 0; run < runs; ++run) Enqueue();
    });
  }

  bool CanReplay() const override { return true; }

  //! "cudnn conv algo 1/fma,0/fma": each convolution's algorithm (cuDNN's
  //! cudnnConvolutionFwdAlgo_t number) and math, in program order.
  std::string Detail() const override {
    if (chosen_.empty()) return {};
    std::string text = "cudnn conv algo ";
    for (size_t i = 0; i < chosen_.size(); ++i) {
      text += i ? "," : "";
      text += std::to_string(chosen_[i].algo);
      text += chosen_[i].math == cuda::MathType::kFma       ? "/fma"
              : chosen_[i].math == cuda::MathType::kDefault ? "/default"
                                                            : "/tensor_op";
    }
    return text;
  }

  double TimedReplays(int runs) override {
    if (!graph_exec_.get()) Capture();
    return Timed([&] {
      for (int run = 0; run < runs; ++run) {
        Checked(api_.LaunchGraph(graph_exec_.get(), Origin()), "replaying the program");
      }
    });
  }

 private:
  cuda::Stream Origin() const { return contexts_.front().stream.get(); }

  //! Waits for whatever is still in flight on any of the program's streams
  //! (a run that failed half-way leaves work on the side streams).
  void SynchronizeAll() {
    for (StreamContext& context : contexts_) {
      Checked(api_.SynchronizeStream(context.stream.get()), "waiting for the program's streams");
    }
  }

  //! Check() that also remembers a lost device.
  void Checked(const cuda::Status& status, const std::string& where) {
    if (status.code == Code::kDeviceLost) state_->lost = true;
    Check(status, where);
  }

  static size_t Bytes(int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); }

  size_t Elements(int buffer) const {
    if (buffer < 0 || buffer >= static_cast<int>(buffers_.size())) {
      throw Error("cuda: no buffer " + std::to_string(buffer) + " (the program has " +
                  std::to_string(buffers_.size()) + ")");
    }
    const Shape& s = buffers_[buffer].shape;
    return static_cast<size_t>(batch_) * s.c * s.h * s.w;
  }

  float* BufferAddress(int buffer) const {
    return static_cast<float*>(slots_.at(buffers_.at(buffer).slot).get());
  }

  float* ViewAddress(const exec::View& view) const {
    const Shape& s = buffers_.at(view.buffer).shape;
    return BufferAddress(view.buffer) + int64_t{view.offset} * s.h * s.w;
  }

  //! Refuses, before allocating anything, a program whose storage and
  //! weights exceed the GPU's free memory.
  void CheckMemory(const exec::Program& program) {
    double needed = 0;
    for (int64_t elements : program.slot_elements) needed += 4.0 * elements * batch_;
    for (const exec::ConvWeights& w : program.weights) {
      needed += 4.0 * static_cast<double>(w.kernel.size() + w.bias.size());
    }
    size_t free_bytes = 0, total_bytes = 0;
    Checked(api_.MemoryInfo(free_bytes, total_bytes), "reading free memory");
    if (needed > static_cast<double>(free_bytes)) {
      throw ExecError(MeasureError::kOutOfMemory, "cuda: the program needs " + MiB(needed) +
                                                      " of storage and weights at batch " +
                                                      std::to_string(batch_) + ", the GPU has " +
                                                      MiB(double(free_bytes)) + " free of " +
                                                      MiB(double(total_bytes)));
    }
  }

  void UploadWeights(const exec::Program& program) {
    for (size_t i = 0; i < program.weights.size(); ++i) {
      const exec::ConvWeights& w = program.weights[i];
      Weights& uploaded = weights_.emplace_back();
      uploaded.kernel = Upload(w.kernel, "weights " + std::to_string(i));
      if (!w.bias.empty()) uploaded.bias = Upload(w.bias, "bias " + std::to_string(i));
    }
  }

  DeviceMemory Upload(const std::vector<float>& values, const std::string& what) {
    DeviceMemory memory = Allocate(api_, Bytes(static_cast<int64_t>(values.size())), what);
    Checked(api_.CopyToDevice(memory.get(), values.data(), Bytes(int64_t(values.size()))),
            "uploading " + what);
    return memory;
  }

  OwnedEvent NewEvent(bool timing) {
    cuda::Event event;
    Checked(api_.CreateEvent(event, timing), "creating an event");
    return {api_, event};
  }

  //! The origin stream, and one more per lane of the widest stage.
  void CreateStreams(const exec::Program& program) {
    size_t lanes = 0;
    for (const exec::ProgramStage& stage : program.stages) {
      if (stage.lanes.size() > 1) lanes = std::max(lanes, stage.lanes.size());
    }
    for (size_t i = 0; i <= lanes; ++i) {
      StreamContext& context = contexts_.emplace_back();
      cuda::Stream stream;
      Checked(api_.CreateStream(stream), "creating stream " + std::to_string(i));
      context.stream = {api_, stream};
      cuda::DnnHandle dnn;
      Checked(api_.CreateDnn(dnn), "creating the cuDNN handle of stream " + std::to_string(i));
      context.dnn = {api_, dnn};
      Checked(api_.SetDnnStream(dnn, stream), "binding a cuDNN handle to its stream");
      if (i > 0) context.joined = NewEvent(false);
    }
  }

  void Compile(const exec::Program& program) {
    size_t label = 0;
    for (size_t s = 0; s < program.stages.size(); ++s) {
      const exec::ProgramStage& stage = program.stages[s];
      CompiledStage& compiled = stages_.emplace_back();
      for (size_t l = 0; l < stage.lanes.size(); ++l) {
        StreamContext& context = contexts_[stage.lanes.size() > 1 ? l + 1 : 0];
        std::vector<Call>& calls = compiled.lanes.emplace_back();
        for (const exec::Step& step : stage.lanes[l].steps) {
          const std::string where = "stage " + std::to_string(s) + " lane " + std::to_string(l) +
                                    " step '" + step.label + "'";
          const size_t first = calls.size();
          CompileStep(program, step, context, where, calls);
          for (size_t c = first; c < calls.size(); ++c) calls[c].label = &labels_[label];
          ++label;
        }
      }
    }
  }

  OwnedTensor Tensor(const cuda::TensorLayout& layout, const std::string& where) {
    cuda::TensorDesc desc;
    Checked(api_.CreateTensor(layout, desc), where + ": a tensor " + Describe(layout));
    return {api_, desc};
  }

  cuda::TensorDesc KeepTensor(const exec::View& view, const std::string& where) {
    return tensors_.emplace_back(Tensor(LayoutOf(buffers_.at(view.buffer), view, batch_), where))
        .get();
  }

  static cuda::ActivationMode ModeOf(Activation act, const std::string& where) {
    switch (act) {
      case Activation::kRelu:
        return cuda::ActivationMode::kRelu;
      case Activation::kSigmoid:
        return cuda::ActivationMode::kSigmoid;
      case Activation::kTanh:
        return cuda::ActivationMode::kTanh;
      case Activation::kRelu6:
        return cuda::ActivationMode::kRelu6;
      case Activation::kSilu:
        return cuda::ActivationMode::kSwish;
      case Activation::kHardSwish:
        return cuda::ActivationMode::kHardSwish;
      case Activation::kHardSigmoid:
        return cuda::ActivationMode::kHardSigmoid;
      case Activation::kLeakyRelu:
        return cuda::ActivationMode::kLeakyRelu;
      case Activation::kNone:
        break;
    }
    throw ExecError(MeasureError::kBackendFailure, "cuda: " + where + ": no activation");
  }

  //! A cuDNN descriptor for `act`, which cuDNN has a mode for.
  cuda::ActivationDesc KeepActivation(Activation act, const std::string& where) {
    const cuda::ActivationMode mode = ModeOf(act, where);
    cuda::ActivationDesc desc;
    Checked(api_.CreateActivation(mode, desc), where + ": an activation");
    return activations_.emplace_back(api_, desc).get();
  }

  void CompileStep(const exec::Program& program, const exec::Step& step, StreamContext& context,
                   const std::string& where, std::vector<Call>& calls) {
    switch (step.op.kind) {
      case OpKind::kConv:
        return CompileConv(program, step, context, where, calls);
      case OpKind::kPool:
        return CompilePool(step, context, where, calls);
      case OpKind::kActivation:
        return CompileActivation(step, context, where, calls);
      case OpKind::kEltwise:
        return CompileEltwise(step, context, where, calls);
      case OpKind::kIdentity:
        return CompileIdentity(step, context, calls);
      case OpKind::kRegistered:
        return CompileRegistered(step, context, where, calls);
      case OpKind::kInput:
      case OpKind::kSequential:
        break;
    }
    throw ExecError(MeasureError::kUnsupported, "cuda: " + where + ": not an operation");
  }

  void CompileConv(const exec::Program& program, const exec::Step& step, StreamContext& context,
                   const std::string& where, std::vector<Call>& calls) {
    const ConvParams& c = step.op.conv;
    const exec::ConvWeights& w = program.weights.at(step.weights);
    const cuda::TensorLayout x_layout =
        LayoutOf(buffers_.at(step.inputs[0].buffer), step.inputs[0], batch_);
    const cuda::TensorLayout y_layout =
        LayoutOf(buffers_.at(step.output.buffer), step.output, batch_);
    const cuda::TensorDesc x = tensors_.emplace_back(Tensor(x_layout, where)).get();
    const cuda::TensorDesc y = tensors_.emplace_back(Tensor(y_layout, where)).get();
    cuda::FilterDesc filter;
    Checked(api_.CreateFilter(w.out_channels, w.in_per_group, w.kernel_h, w.kernel_w, filter),
            where + ": its filter");
    filters_.emplace_back(api_, filter);
    const cuda::ConvGeometry geometry{
        c.padding.h,  c.padding.w,  c.stride.h, c.stride.w,
        c.dilation.h, c.dilation.w, c.groups,   MathOf(state_->options)};
    cuda::ConvDesc conv;
    Checked(api_.CreateConvolution(geometry, conv), where + ": its convolution");
    convs_.emplace_back(api_, conv);
    const float* input = ViewAddress(step.inputs[0]);
    float* output = ViewAddress(step.output);
    const void* kernel = weights_.at(step.weights).kernel.get();
    const std::string problem = ProblemText(x_layout, w, geometry, y_layout);
    const cuda::AlgoResult algo =
        ChooseAlgorithm(context, problem, x, input, filter, kernel, conv, y, output, where);
    Checked(api_.SetConvolutionMath(conv, algo.math), where + ": the chosen algorithm's math");
    chosen_.push_back(algo);
    context.workspace_needed = std::max(context.workspace_needed, algo.workspace_bytes);
    const cuda::DnnHandle dnn = context.dnn.get();
    StreamContext* ctx = &context;  // contexts_ is a deque: the address stays
    const void* bias = weights_.at(step.weights).bias.get();
    cuda::TensorDesc bias_desc;
    if (bias != nullptr) {
      const int k = w.out_channels;
      bias_desc =
          tensors_.emplace_back(Tensor({1, k, 1, 1, k, 1, 1, 1}, where + ": its bias")).get();
    }
    const std::function<cuda::Status()> activate =
        c.act == Activation::kNone
            ? nullptr
            : ActivationCall(c.act, context, step.output, step.output, where);
    cuda::Api& api = api_;
    // Convolution, then the bias added, then the activation: three calls.
    std::function<cuda::Status()> separate = [=, &api] {
      cuda::Status status =
          api.ConvolutionForward(dnn, x, input, filter, kernel, conv, algo.algo,
                                 ctx->workspace.get(), ctx->workspace_bytes, y, output);
      if (status.ok() && bias != nullptr) status = api.AddBias(dnn, bias_desc, bias, y, output);
      if (status.ok() && activate) status = activate();
      return status;
    };
    if (c.act != Activation::kRelu || bias == nullptr) {
      calls.push_back({std::move(separate)});
      return;
    }
    // cuDNN fuses bias and relu into the convolution, but may refuse the
    // fusion for the algorithm found for the plain convolution: tried once
    // per problem when the program is prepared (DecideFusion), with the three
    // calls as the fallback.
    const cuda::ActivationDesc relu = KeepActivation(Activation::kRelu, where);
    FusedConv& fused = fused_.emplace_back();
    fused.problem = problem + " algo=" + std::to_string(algo.algo);
    fused.where = where;
    fused.run = [=, &api] {
      return api.ConvolutionBiasRelu(dnn, x, input, filter, kernel, conv, algo.algo,
                                     ctx->workspace.get(), ctx->workspace_bytes, bias_desc, bias,
                                     relu, y, output);
    };
    const FusedConv* decided = &fused;  // fused_ is a deque: the address stays
    calls.push_back({[decided, separate] { return decided->runs ? decided->run() : separate(); }});
  }

  //! A convolution problem as the algorithm cache knows it: shapes, strides
  //! and every setting that changes which algorithms run and how fast.
  std::string ProblemText(const cuda::TensorLayout& x_layout, const exec::ConvWeights& w,
                          const cuda::ConvGeometry& geometry,
                          const cuda::TensorLayout& y_layout) const {
    const CudaOptions& options = state_->options;
    std::ostringstream problem;
    problem << "x=" << Describe(x_layout) << " w=" << w.out_channels << "x" << w.in_per_group << "x"
            << w.kernel_h << "x" << w.kernel_w << " pad=" << geometry.pad_h << "," << geometry.pad_w
            << " stride=" << geometry.stride_h << "," << geometry.stride_w
            << " dil=" << geometry.dilation_h << "," << geometry.dilation_w
            << " groups=" << geometry.groups << " math=" << static_cast<int>(geometry.math)
            << " y=" << Describe(y_layout)
            << (options.algo == CudaOptions::Algo::kExhaustive ? " find" : " heuristic")
            << " cap_mb=" << options.workspace_mb;
    return problem.str();
  }

  //! The first algorithm cuDNN reports as running `problem` within the
  //! workspace cap, found once per problem for the device's life.
  cuda::AlgoResult ChooseAlgorithm(StreamContext& context, const std::string& problem,
                                   cuda::TensorDesc x, const float* input, cuda::FilterDesc filter,
                                   const void* kernel, cuda::ConvDesc conv, cuda::TensorDesc y,
                                   float* output, const std::string& where) {
    const CudaOptions& options = state_->options;
    const bool exhaustive = options.algo == CudaOptions::Algo::kExhaustive;
    const size_t cap = static_cast<size_t>(options.workspace_mb) * 1024 * 1024;
    const auto known = state_->algorithms.find(problem);
    if (known != state_->algorithms.end()) return known->second;
    std::vector<cuda::AlgoResult> results;
    if (exhaustive) {
      if (!find_workspace_tried_) AllocateFindWorkspace(cap);
      Checked(api_.FindConvolutionAlgorithms(context.dnn.get(), x, input, filter, kernel, conv, y,
                                             output, find_workspace_.get(), find_workspace_bytes_,
                                             results),
              where + ": finding its algorithm");
    } else {
      Checked(api_.HeuristicConvolutionAlgorithms(context.dnn.get(), x, filter, conv, y, results),
              where + ": ranking its algorithms");
    }
    const size_t usable = exhaustive ? find_workspace_bytes_ : cap;
    for (const cuda::AlgoResult& result : results) {
      if (result.status != Code::kOk || result.workspace_bytes > usable) continue;
      // Strict FP32 was asked for: a result whose math may use TF32 is not.
      if (options.math == CudaOptions::Math::kFp32 && result.math != cuda::MathType::kFma) {
        continue;
      }
      spdlog::debug("cuda: {}: algorithm {} ({} workspace, {:.3f} ms when found)", problem,
                    result.algo, MiB(double(result.workspace_bytes)), result.ms);
      // A choice made within less scratch than the cap (the GPU was short
      // of memory) is not kept: the next prepare may get the whole cap.
      if (usable == cap) state_->algorithms.emplace(problem, result);
      return result;
    }
    throw ExecError(
        MeasureError::kUnsupported,
        "cuda: " + where + ": none of the " + std::to_string(results.size()) +
            " convolution algorithms cuDNN reported runs " + problem +
            " within workspace_mb=" + std::to_string(options.workspace_mb) +
            (usable < cap ? " (only " + MiB(double(usable)) + " could be allocated)" : ""));
  }

  //! Whether each fused convolution+bias+relu runs: tried once per problem
  //! (outside any timed region), remembered for the device's life.
  void DecideFusion() {
    for (FusedConv& fused : fused_) {
      const auto known = state_->fused_relu_runs.find(fused.problem);
      if (known != state_->fused_relu_runs.end()) {
        fused.runs = known->second;
        continue;
      }
      const cuda::Status status = fused.run();
      if (status.code == Code::kUnsupported) {
        spdlog::debug(
            "cuda: {}: cuDNN does not fuse bias and relu into {} ({}); three calls instead",
            fused.where, fused.problem, status.message);
      } else {
        Checked(status, fused.where + ": trying the convolution fused with bias and relu");
      }
      fused.runs = status.ok();
      state_->fused_relu_runs.emplace(fused.problem, fused.runs);
    }
  }

  //! The scratch the algorithm search may use: the cap, or as much of it as
  //! the GPU gives (halving down to 1 MiB, then none). Freed after prepare.
  void AllocateFindWorkspace(size_t cap) {
    find_workspace_tried_ = true;
    for (size_t bytes = cap; bytes >= (size_t{1} << 20); bytes /= 2) {
      void* pointer = nullptr;
      const cuda::Status status = api_.Malloc(bytes, pointer);
      if (status.ok()) {
        find_workspace_ = DeviceMemory(api_, pointer);
        find_workspace_bytes_ = bytes;
        return;
      }
      if (status.code != Code::kOutOfMemory)
        Fail(status, "allocating the algorithm search's workspace");
    }
    find_workspace_bytes_ = 0;
  }

  void CompilePool(const exec::Step& step, StreamContext& context, const std::string& where,
                   std::vector<Call>& calls) {
    const PoolParams& p = step.op.pool;
    const Shape& in = buffers_.at(step.inputs[0].buffer).shape;
    const bool global = p.type == PoolType::kGlobalMax || p.type == PoolType::kGlobalAvg;
    const bool max = p.type == PoolType::kMax || p.type == PoolType::kGlobalMax;
    const Window window = global ? Window{in.h, in.w} : p.kernel;
    const Window stride = global ? Window{1, 1} : p.stride;
    const Window padding = global ? Window{0, 0} : p.padding;
    if (p.ceil) return CompileCeilMaxPool(step, context, calls);
    cuda::PoolingDesc pool;
    // IOS's average pooling counts padding: the divisor is the window size.
    const cuda::PoolingMode mode = max                 ? cuda::PoolingMode::kMax
                                   : p.exclude_padding ? cuda::PoolingMode::kAverageExcludingPadding
                                                       : cuda::PoolingMode::kAverageCountingPadding;
    Checked(api_.CreatePooling(mode, window.h, window.w, padding.h, padding.w, stride.h, stride.w,
                               pool),
            where + ": its pooling");
    pools_.emplace_back(api_, pool);
    AddUnaryCall(step, context, where, calls,
                 [pool](cuda::Api& api, cuda::DnnHandle dnn, cuda::TensorDesc x, const float* from,
                        cuda::TensorDesc y,
                        float* to) { return api.PoolingForward(dnn, pool, x, from, y, to); });
  }

  //! A max pool whose last window runs past the input (ceil_mode): cuDNN
  //! pads both sides equally, so our kernel computes it.
  void CompileCeilMaxPool(const exec::Step& step, StreamContext& context,
                          std::vector<Call>& calls) {
    const PoolParams& p = step.op.pool;
    const Shape& in = buffers_.at(step.inputs[0].buffer).shape;
    const Shape& out = buffers_.at(step.output.buffer).shape;
    cuda::MaxPoolShape g;
    g.batch = batch_;
    g.channels = step.output.channels;
    g.in_h = in.h;
    g.in_w = in.w;
    g.out_h = out.h;
    g.out_w = out.w;
    g.kernel_h = p.kernel.h;
    g.kernel_w = p.kernel.w;
    g.stride_h = p.stride.h;
    g.stride_w = p.stride.w;
    g.pad_h = p.padding.h;
    g.pad_w = p.padding.w;
    g.src_batch_stride = int64_t{in.c} * in.h * in.w;
    g.dst_batch_stride = int64_t{out.c} * out.h * out.w;
    const float* src = ViewAddress(step.inputs[0]);
    float* dst = ViewAddress(step.output);
    const cuda::Stream stream = context.stream.get();
    cuda::Api& api = api_;
    calls.push_back({[=, &api] { return api.MaxPool(stream, g, src, dst); }});
  }

  //! A call that reads the step's one input view and writes its output
  //! view: `run(api, handle, x, input, y, output)` on their descriptors and
  //! addresses.
  template <class Run>
  void AddUnaryCall(const exec::Step& step, StreamContext& context, const std::string& where,
                    std::vector<Call>& calls, const Run& run) {
    const cuda::TensorDesc x = KeepTensor(step.inputs[0], where);
    const cuda::TensorDesc y = KeepTensor(step.output, where);
    const float* input = ViewAddress(step.inputs[0]);
    float* output = ViewAddress(step.output);
    const cuda::DnnHandle dnn = context.dnn.get();
    cuda::Api& api = api_;
    calls.push_back({[=, &api] { return run(api, dnn, x, input, y, output); }});
  }

  void CompileActivation(const exec::Step& step, StreamContext& context, const std::string& where,
                         std::vector<Call>& calls) {
    if (step.op.act == Activation::kNone) return CompileIdentity(step, context, calls);
    calls.push_back({ActivationCall(step.op.act, context, step.inputs[0], step.output, where)});
  }

  //! `act` from view `from` into view `to` (the same view: in place):
  //! cuDNN's activation where it has the function, our kernel where it
  //! has not (hardswish, hardsigmoid, leaky relu).
  std::function<cuda::Status()> ActivationCall(Activation act, StreamContext& context,
                                               const exec::View& from, const exec::View& to,
                                               const std::string& where) {
    cuda::Api& api = api_;
    const float* src = ViewAddress(from);
    float* dst = ViewAddress(to);
    if (const cuda::ActivationMode mode = ModeOf(act, where); cuda::OnlyOurKernelComputes(mode)) {
      const Shape& in = buffers_.at(from.buffer).shape;
      const Shape& out = buffers_.at(to.buffer).shape;
      const int64_t src_stride = int64_t{in.c} * in.h * in.w;
      const int64_t dst_stride = int64_t{out.c} * out.h * out.w;
      const int64_t count = int64_t{to.channels} * out.h * out.w;
      const cuda::Stream stream = context.stream.get();
      const int batch = batch_;
      return [=, &api] {
        return api.ActivateStrided(stream, mode, dst, dst_stride, src, src_stride, count, batch);
      };
    }
    const cuda::ActivationDesc desc = KeepActivation(act, where);
    const cuda::TensorDesc x = KeepTensor(from, where);
    const cuda::TensorDesc y = KeepTensor(to, where);
    const cuda::DnnHandle dnn = context.dnn.get();
    return [=, &api] { return api.ActivationForward(dnn, desc, x, src, y, dst); };
  }

  //! A kind of common/op_kinds.h: cuDNN's own call for it.
  void CompileRegistered(const exec::Step& step, StreamContext& context, const std::string& where,
                         std::vector<Call>& calls) {
    switch (step.op.registered.kind) {
      case RegisteredKind::kSoftmax: {
        // cuDNN takes the strided views as they are (channel mode: over C
        // at each pixel, as the reference device computes it).
        const bool log = AttributeOf(step.op.registered, "log").value_or(0) != 0;
        return AddUnaryCall(step, context, where, calls,
                            [log](cuda::Api& api, cuda::DnnHandle dnn, cuda::TensorDesc x,
                                  const float* from, cuda::TensorDesc y, float* to) {
                              return api.SoftmaxForward(dnn, log, x, from, y, to);
                            });
      }
    }
    throw ExecError(MeasureError::kUnsupported,
                    "cuda: " + where + ": no call for " + KindName(step.op));
  }

  //! out = in0 op in1, then out = out op in_k for every further input.
  void CompileEltwise(const exec::Step& step, StreamContext& context, const std::string& where,
                      std::vector<Call>& calls) {
    if (step.inputs.size() < 2) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cuda: " + where + ": an element-wise op needs two inputs or more");
    }
    cuda::OpTensorDesc op;
    Checked(api_.CreateOpTensor(step.op.eltwise == EltwiseType::kMul ? cuda::OpTensorOp::kMul
                                                                     : cuda::OpTensorOp::kAdd,
                                op),
            where + ": its op-tensor");
    ops_.emplace_back(api_, op);
    const cuda::TensorDesc y = KeepTensor(step.output, where);
    float* output = ViewAddress(step.output);
    const cuda::DnnHandle dnn = context.dnn.get();
    cuda::Api& api = api_;
    // cuDNN broadcasts only B (a C x 1 x 1 input): one input of the
    // output's shape goes first as A; add and mul commute.
    std::vector<exec::View> inputs = step.inputs;
    const Shape& out = buffers_.at(step.output.buffer).shape;
    const auto full = std::find_if(inputs.begin(), inputs.end(), [&](const exec::View& v) {
      const Shape& s = buffers_.at(v.buffer).shape;
      return s.h == out.h && s.w == out.w;
    });
    if (full != inputs.end()) std::iter_swap(inputs.begin(), full);
    for (size_t k = 1; k < inputs.size(); ++k) {
      const cuda::TensorDesc b = KeepTensor(inputs[k], where);
      const float* second = ViewAddress(inputs[k]);
      const cuda::TensorDesc a = k == 1 ? KeepTensor(inputs[0], where) : y;
      const float* first = k == 1 ? ViewAddress(inputs[0]) : output;
      calls.push_back(
          {[=, &api] { return api.OpTensor(dnn, op, a, first, b, second, y, output); }});
    }
  }

  //! A copy of one view, or the sum of several, with our strided kernel.
  void CompileIdentity(const exec::Step& step, StreamContext& context, std::vector<Call>& calls) {
    const Shape& out = buffers_.at(step.output.buffer).shape;
    const int64_t plane = int64_t{out.h} * out.w;
    const int64_t count = plane * step.output.channels;
    float* output = ViewAddress(step.output);
    const int64_t out_stride = int64_t{out.c} * plane;
    const cuda::Stream stream = context.stream.get();
    const int batch = batch_;
    cuda::Api& api = api_;
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      const Shape& in = buffers_.at(step.inputs[k].buffer).shape;
      const float* input = ViewAddress(step.inputs[k]);
      const int64_t in_stride = int64_t{in.c} * in.h * in.w;
      const bool accumulate = k > 0;
      calls.push_back({[=, &api] {
        return api.CopyStrided(stream, output, out_stride, input, in_stride, count, batch,
                               accumulate);
      }});
    }
  }

  void RunCalls(const std::vector<Call>& calls) {
    for (const Call& call : calls) {
      const cuda::Status status = call.run();
      if (!status.ok()) Checked(status, "step '" + *call.label + "'");
    }
  }

  //! One run of every stage, enqueued; nothing waits for the GPU.
  void Enqueue() {
    const cuda::Stream origin = Origin();
    for (const CompiledStage& stage : stages_) {
      if (stage.lanes.size() == 1) {
        RunCalls(stage.lanes[0]);
        continue;
      }
      if (stage.lanes.empty()) continue;
      Checked(api_.RecordEvent(fork_.get(), origin), "forking a stage");
      for (size_t l = 0; l < stage.lanes.size(); ++l) {
        const StreamContext& lane = contexts_[l + 1];
        Checked(api_.WaitEvent(lane.stream.get(), fork_.get()), "forking a stage");
        RunCalls(stage.lanes[l]);
        Checked(api_.RecordEvent(lane.joined.get(), lane.stream.get()), "joining a stage");
      }
      for (size_t l = 0; l < stage.lanes.size(); ++l) {
        Checked(api_.WaitEvent(origin, contexts_[l + 1].joined.get()), "joining a stage");
      }
    }
  }

  //! Milliseconds between events recorded on the origin stream before and
  //! after what `enqueue` puts on it.
  template <class Enqueue>
  double Timed(const Enqueue& enqueue) {
    Checked(api_.RecordEvent(start_.get(), Origin()), "starting the clock");
    enqueue();
    Checked(api_.RecordEvent(end_.get(), Origin()), "stopping the clock");
    Checked(api_.SynchronizeEvent(end_.get()), "waiting for the runs");
    float ms = 0;
    Checked(api_.ElapsedMs(start_.get(), end_.get(), ms), "reading the clock");
    return ms;
  }

  //! Records one run, as Enqueue issues it, into a graph. A failure ends the
  //! capture before it is reported, so the stream stays usable.
  void Capture() {
    Checked(api_.BeginCapture(Origin()), "starting the capture");
    try {
      Enqueue();
    } catch (...) {
      cuda::Graph partial;
      (void)api_.EndCapture(Origin(), partial);
      if (partial) (void)api_.DestroyGraph(partial);
      throw;
    }
    cuda::Graph graph;
    const cuda::Status ended = api_.EndCapture(Origin(), graph);
    if (graph) graph_ = OwnedGraph(api_, graph);
    Checked(ended, "ending the capture");
    cuda::GraphExec exec;
    Checked(api_.InstantiateGraph(graph_.get(), exec), "instantiating the captured graph");
    graph_exec_ = OwnedGraphExec(api_, exec);
  }

  struct Weights {
    DeviceMemory kernel, bias;
  };

  // Declared in the order they may be destroyed last to first: descriptors
  // and graphs before the streams and memory they refer to.
  std::shared_ptr<DeviceState> state_;
  cuda::Api& api_;
  const int batch_;
  std::vector<exec::BufferDesc> buffers_;
  std::deque<std::string> labels_;  // one per step, in program order
  std::vector<DeviceMemory> slots_;
  std::deque<Weights> weights_;
  DeviceMemory find_workspace_;  // only while preparing
  size_t find_workspace_bytes_ = 0;
  bool find_workspace_tried_ = false;
  std::deque<StreamContext> contexts_;  // [0]: the origin stream
  OwnedEvent fork_, start_, end_;
  std::deque<OwnedTensor> tensors_;
  std::deque<OwnedFilter> filters_;
  std::deque<OwnedConv> convs_;
  std::deque<OwnedActivation> activations_;
  std::deque<OwnedPooling> pools_;
  std::deque<OwnedOpTensor> ops_;
  std::deque<FusedConv> fused_;
  std::vector<CompiledStage> stages_;
  std::vector<cuda::AlgoResult> chosen_;  // per convolution step, in program order
  OwnedGraph graph_;
  OwnedGraphExec graph_exec_;
};

std::string VersionText(int cuda_version) {
  return std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
}

class CudaDevice : public exec::Device {
 public:
  CudaDevice(std::unique_ptr<cuda::Api> api, const CudaOptions& options)
      : state_(std::make_shared<DeviceState>()) {
    state_->api = std::move(api);
    state_->options = options;
    cuda::Api& a = *state_->api;
    int count = 0;
    const cuda::Status counted = a.DeviceCount(count);
    if (!counted.ok()) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cuda: no usable GPU: " + counted.call + " failed: " + counted.message +
                          (counted.code == Code::kNoDevice
                               ? " (is the NVIDIA driver installed? nvidia-smi must list the GPU)"
                               : ""));
    }
    if (options.gpu < 0 || options.gpu >= count) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cuda: GPU " + std::to_string(options.gpu) + " asked for; this machine has " +
                          std::to_string(count) + (count == 1 ? " GPU (0)" : " GPUs") +
                          (count > 1 ? " (0.." + std::to_string(count - 1) + ")" : ""));
    }
    Check(a.SetDevice(options.gpu), "selecting GPU " + std::to_string(options.gpu));
    cuda::DeviceProperties p;
    Check(a.Properties(options.gpu, p), "reading the GPU's properties");
    cuda::Versions v;
    Check(a.GetVersions(v), "reading the driver, runtime and cuDNN versions");
    const bool tf32 = options.math == CudaOptions::Math::kTf32;
    info_.backend = "cuda";
    info_.name = p.name;
    info_.simulated = false;
    std::ostringstream fp;
    fp << "cuda-v1|gpu=" << p.name << "|cc=" << p.major << "." << p.minor << "|sms=" << p.sm_count
       << "|memory_mib=" << p.memory_bytes / (1024 * 1024) << "|clock_khz=" << p.clock_khz
       << "|memory_clock_khz=" << p.memory_clock_khz << "|driver=" << VersionText(v.driver)
       << "|runtime=" << VersionText(v.runtime) << "|cudnn=" << v.cudnn
       << "|math=" << (tf32 ? "tf32" : "fp32")
       << "|algo=" << (options.algo == CudaOptions::Algo::kExhaustive ? "exhaustive" : "heuristic")
       << "|workspace_mb=" << options.workspace_mb << "|fp32";
    info_.fingerprint = fp.str();
    if (!a.ClocksLocked(options.gpu)) {
      spdlog::warn(
          "cuda: GPU {} ({}): application clocks are not locked; timings drift with boost "
          "clocks and temperature (docs/gpu.md: nvidia-smi --lock-gpu-clocks)",
          options.gpu, p.name);
    }
  }

  const DeviceInfo& Info() const override { return info_; }

  std::unique_ptr<exec::PreparedProgram> Prepare(const exec::Program& program, int batch) override {
    if (state_->lost) {
      throw exec::DeviceLostError("cuda: the GPU context was lost by an earlier error");
    }
    if (batch < 1) throw ExecError(MeasureError::kUnsupported, "cuda: batch size must be >= 1");
    try {
      exec::Validate(program);
    } catch (const Error& e) {
      throw ExecError(MeasureError::kBackendFailure,
                      std::string("cuda: the program is not well formed: ") + e.what());
    }
    try {
      Check(state_->api->SetDevice(state_->options.gpu), "selecting the GPU");
      return std::make_unique<CudaPreparedProgram>(state_, program, batch);
    } catch (const exec::DeviceLostError&) {
      state_->lost = true;
      throw;
    }
  }

 private:
  std::shared_ptr<DeviceState> state_;
  DeviceInfo info_;
};

}  // namespace

std::unique_ptr<exec::Device> MakeCudaDevice(std::unique_ptr<cuda::Api> api,
                                             const CudaOptions& options) {
  if (!api) throw Error("cuda: no CUDA API given");
  return std::make_unique<CudaDevice>(std::move(api), options);
}

std::unique_ptr<exec::Device> MakeCudaDevice(std::unique_ptr<cuda::Api> api,
                                             const CudaOptions& options, OnceLatch&) {
  return MakeCudaDevice(std::move(api), options);
}

}  // namespace ios::worker
