// The compilation of a program's steps into the library calls a run
// enqueues (cuda_program.h): descriptors per view, each convolution's
// algorithm (cuda_algorithms.h), which stream and handle run a lane.
#include <algorithm>
#include <optional>

#include "common/activation.h"
#include "common/op_kinds.h"
#include "devices/cuda/cuda_program.h"

namespace ios::devices::cuda_detail {
namespace {

using exec::ExecError;

cuda::ActivationMode ModeOf(Activation act, const std::string& where) {
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
    case Activation::kGelu:
      return cuda::ActivationMode::kGelu;
    case Activation::kGeluTanh:
      return cuda::ActivationMode::kGeluTanh;
    case Activation::kNone:
      break;
  }
  throw ExecError(MeasureError::kBackendFailure, "cuda: " + where + ": no activation");
}

cuda::MathType MathOf(const CudaOptions& options) {
  return options.math == CudaOptions::Math::kTf32 ? cuda::MathType::kTensorOp
                                                  : cuda::MathType::kFma;
}

//! Whether a step's views become cuDNN tensors (our kernels take int64
//! strides and counts: identity copies, ceil-mode max pools, activations
//! cuDNN lacks, layer norms, leaky_relu and hard_sigmoid).
bool DescribedToCuDnn(const exec::Step& step) {
  switch (step.op.kind) {
    case OpKind::kConv:
    case OpKind::kEltwise:
      return true;
    case OpKind::kRegistered:
      return step.op.registered.kind == RegisteredKind::kSoftmax ||
             step.op.registered.kind == RegisteredKind::kChannelShuffle ||
             step.op.registered.kind == RegisteredKind::kFlatten;
    case OpKind::kPool:
      return !step.op.pool.ceil;
    case OpKind::kActivation:
      return step.op.act != Activation::kNone &&
             !cuda::OnlyOurKernelComputes(ModeOf(step.op.act, step.label));
    case OpKind::kIdentity:
    case OpKind::kInput:
    case OpKind::kSequential:
      break;
  }
  return false;
}

}  // namespace

void CudaPreparedProgram::CheckTensorLimits(const exec::Program& program) const {
  for (size_t s = 0; s < program.stages.size(); ++s) {
    const exec::ProgramStage& stage = program.stages[s];
    for (size_t l = 0; l < stage.lanes.size(); ++l) {
      for (const exec::Step& step : stage.lanes[l].steps) {
        if (!DescribedToCuDnn(step)) continue;
        std::vector<std::pair<std::string, exec::View>> views;
        for (size_t i = 0; i < step.inputs.size(); ++i) {
          views.emplace_back("input " + std::to_string(i), step.inputs[i]);
        }
        views.emplace_back("output", step.output);
        if (step.op.kind == OpKind::kConv) {
          const double padded =
              PaddedInputElements(step, buffers_.at(step.inputs[0].buffer), batch_);
          if (padded > kMaxTensorExtent) {
            throw ExecError(MeasureError::kUnsupported,
                            "cuda: stage " + std::to_string(s) + " lane " + std::to_string(l) +
                                " step '" + step.label + "': its input padded at the bottom and " +
                                "right has " + std::to_string(int64_t(padded)) +
                                " floats at batch " + std::to_string(batch_) +
                                "; cuDNN's tensor descriptors take at most " +
                                std::to_string(kMaxTensorExtent) + " (2^31 - 1) elements");
          }
        }
        for (const auto& [role, view] : views) {
          const cuda::TensorLayout t = LayoutOf(buffers_.at(view.buffer), view, batch_);
          // In double: the product of a batch and a stride may pass int64.
          const double extent = (t.n - 1.0) * t.stride_n + (t.c - 1.0) * t.stride_c +
                                (t.h - 1.0) * t.stride_h + (t.w - 1.0) * t.stride_w + 1;
          const int64_t widest = std::max({t.stride_n, t.stride_c, t.stride_h, t.stride_w});
          if (extent <= kMaxTensorExtent && widest <= kMaxTensorExtent) continue;
          throw ExecError(MeasureError::kUnsupported,
                          "cuda: stage " + std::to_string(s) + " lane " + std::to_string(l) +
                              " step '" + step.label + "': its " + role + " (buffer '" +
                              buffers_.at(view.buffer).label + "') at batch " +
                              std::to_string(batch_) + " is the tensor " + Describe(t) +
                              ", spanning " + MiB(extent * 4) +
                              " of floats; cuDNN's tensor descriptors take at most " +
                              std::to_string(kMaxTensorExtent) +
                              " (2^31 - 1) elements from first to last and per stride");
        }
      }
    }
  }
}

void CudaPreparedProgram::Compile(const exec::Program& program, AlgorithmSearch& search) {
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
        CompileStep(program, step, context, where, search, calls);
        for (size_t c = first; c < calls.size(); ++c) calls[c].label = &labels_[label];
        ++label;
      }
    }
  }
}

cuda::TensorDesc CudaPreparedProgram::KeepTensor(const cuda::TensorLayout& layout,
                                                 const std::string& where) {
  cuda::TensorDesc desc;
  Checked(api_.CreateTensor(layout, desc), where + ": a tensor " + Describe(layout));
  return tensors_.emplace_back(api_, desc).get();
}

cuda::TensorDesc CudaPreparedProgram::KeepTensor(const exec::View& view, const std::string& where) {
  return KeepTensor(LayoutOf(buffers_.at(view.buffer), view, batch_), where);
}

cuda::ActivationDesc CudaPreparedProgram::KeepActivation(Activation act, const std::string& where) {
  const cuda::ActivationMode mode = ModeOf(act, where);
  cuda::ActivationDesc desc;
  Checked(api_.CreateActivation(mode, desc), where + ": an activation");
  return activations_.emplace_back(api_, desc).get();
}

void CudaPreparedProgram::CompileStep(const exec::Program& program, const exec::Step& step,
                                      StreamContext& context, const std::string& where,
                                      AlgorithmSearch& search, std::vector<Call>& calls) {
  switch (step.op.kind) {
    case OpKind::kConv:
      return CompileConv(program, step, context, where, search, calls);
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

void CudaPreparedProgram::CompileConv(const exec::Program& program, const exec::Step& step,
                                      StreamContext& context, const std::string& where,
                                      AlgorithmSearch& search, std::vector<Call>& calls) {
  const ConvParams& c = step.op.conv;
  const exec::ConvWeights& w = program.weights.at(step.weights);
  cuda::TensorLayout x_layout =
      LayoutOf(buffers_.at(step.inputs[0].buffer), step.inputs[0], batch_);
  const float* input = ViewAddress(step.inputs[0]);
  // cuDNN pads both sides equally: with more at the end, the convolution
  // runs unpadded on a copy that holds all of its padding.
  Window padding = c.padding;
  if (!(c.padding_end_extra == Window{0, 0})) {
    calls.push_back({PadInput(step, context, where, x_layout, input)});
    padding = {0, 0};
  }
  const cuda::TensorLayout y_layout =
      LayoutOf(buffers_.at(step.output.buffer), step.output, batch_);
  const cuda::TensorDesc x = KeepTensor(x_layout, where);
  const cuda::TensorDesc y = KeepTensor(y_layout, where);
  cuda::FilterDesc filter;
  Checked(api_.CreateFilter(w.out_channels, w.in_per_group, w.kernel_h, w.kernel_w, filter),
          where + ": its filter");
  filters_.emplace_back(api_, filter);
  const cuda::ConvGeometry geometry{
      padding.h,    padding.w,    c.stride.h, c.stride.w,
      c.dilation.h, c.dilation.w, c.groups,   MathOf(state_->options)};
  cuda::ConvDesc conv;
  Checked(api_.CreateConvolution(geometry, conv), where + ": its convolution");
  convs_.emplace_back(api_, conv);
  float* output = ViewAddress(step.output);
  const void* kernel = weights_.at(step.weights).kernel.get();
  const std::string problem =
      ProblemKey(x_layout, input, w, kernel, geometry, y_layout, output, state_->options);
  const cuda::AlgoResult algo =
      search.Choose(problem, context.dnn, x, input, filter, kernel, conv, y, output, where);
  Checked(api_.SetConvolutionMath(conv, algo.math), where + ": the chosen algorithm's math");
  chosen_.push_back(algo);
  context.workspace_needed = std::max(context.workspace_needed, algo.workspace_bytes);
  const cuda::DnnHandle dnn = context.dnn;
  StreamContext* ctx = &context;  // contexts_ is a deque: the address stays
  const void* bias = weights_.at(step.weights).bias.get();
  cuda::TensorDesc bias_desc;
  if (bias != nullptr) {
    const int k = w.out_channels;
    bias_desc = KeepTensor(cuda::TensorLayout{1, k, 1, 1, k, 1, 1, 1}, where + ": its bias");
  }
  const std::function<cuda::Status()> activate =
      c.act == Activation::kNone ? nullptr
                                 : ActivationCall(c.act, context, step.output, step.output, where);
  cuda::Api& api = api_;
  // Convolution, then the bias added, then the activation: three calls.
  std::function<cuda::Status()> separate = [=, &api] {
    cuda::Status status = api.ConvolutionForward(dnn, x, input, filter, kernel, conv, algo.algo,
                                                 ctx->workspace, ctx->workspace_bytes, y, output);
    if (status.ok() && bias != nullptr) status = api.AddTensor(dnn, bias_desc, bias, y, output);
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
  fused.key = problem + " algo=" + std::to_string(algo.algo);
  fused.where = where;
  fused.run = [=, &api] {
    return api.ConvolutionBiasRelu(dnn, x, input, filter, kernel, conv, algo.algo, ctx->workspace,
                                   ctx->workspace_bytes, bias_desc, bias, relu, y, output);
  };
  const FusedConv* decided = &fused;  // fused_ is a deque: the address stays
  calls.push_back({[decided, separate] { return decided->runs ? decided->run() : separate(); }});
}

void CudaPreparedProgram::CompilePool(const exec::Step& step, StreamContext& context,
                                      const std::string& where, std::vector<Call>& calls) {
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
  Checked(
      api_.CreatePooling(mode, window.h, window.w, padding.h, padding.w, stride.h, stride.w, pool),
      where + ": its pooling");
  pools_.emplace_back(api_, pool);
  AddUnaryCall(step, context, where, calls,
               [pool](cuda::Api& api, cuda::DnnHandle dnn, cuda::TensorDesc x, const float* from,
                      cuda::TensorDesc y,
                      float* to) { return api.PoolingForward(dnn, pool, x, from, y, to); });
}

// A max pool whose last window runs past the input (ceil_mode): cuDNN pads
// both sides equally, so our kernel computes it.
void CudaPreparedProgram::CompileCeilMaxPool(const exec::Step& step, StreamContext& context,
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
  const cuda::Stream stream = context.stream;
  cuda::Api& api = api_;
  calls.push_back({[=, &api] { return api.MaxPool(stream, g, src, dst); }});
}

void CudaPreparedProgram::AddUnaryCall(
    const exec::Step& step, StreamContext& context, const std::string& where,
    std::vector<Call>& calls,
    std::function<cuda::Status(cuda::Api&, cuda::DnnHandle, cuda::TensorDesc, const float*,
                               cuda::TensorDesc, float*)>
        run) {
  const cuda::TensorDesc x = KeepTensor(step.inputs[0], where);
  const cuda::TensorDesc y = KeepTensor(step.output, where);
  const float* input = ViewAddress(step.inputs[0]);
  float* output = ViewAddress(step.output);
  const cuda::DnnHandle dnn = context.dnn;
  cuda::Api& api = api_;
  calls.push_back({[=, &api] { return run(api, dnn, x, input, y, output); }});
}

void CudaPreparedProgram::CompileActivation(const exec::Step& step, StreamContext& context,
                                            const std::string& where, std::vector<Call>& calls) {
  if (step.op.act == Activation::kNone) return CompileIdentity(step, context, calls);
  calls.push_back({ActivationCall(step.op.act, context, step.inputs[0], step.output, where)});
}

// cuDNN's activation where it has the function, our kernel where it has
// not (hardswish, hardsigmoid, leaky relu, gelu, gelu_tanh).
std::function<cuda::Status()> CudaPreparedProgram::ActivationCall(Activation act,
                                                                  StreamContext& context,
                                                                  const exec::View& from,
                                                                  const exec::View& to,
                                                                  const std::string& where) {
  if (const cuda::ActivationMode mode = ModeOf(act, where); cuda::OnlyOurKernelComputes(mode)) {
    cuda::ActivationParams params;
    if (act == Activation::kLeakyRelu) params.alpha = kLeakyReluSlope;
    return KernelActivationCall(mode, params, context, from, to);
  }
  cuda::Api& api = api_;
  const float* src = ViewAddress(from);
  float* dst = ViewAddress(to);
  const cuda::ActivationDesc desc = KeepActivation(act, where);
  const cuda::TensorDesc x = KeepTensor(from, where);
  const cuda::TensorDesc y = KeepTensor(to, where);
  const cuda::DnnHandle dnn = context.dnn;
  return [=, &api] { return api.ActivationForward(dnn, desc, x, src, y, dst); };
}

// Our kernel on the views as they are: a channel range of a sample is
// contiguous, the samples a whole buffer apart.
std::function<cuda::Status()> CudaPreparedProgram::KernelActivationCall(
    cuda::ActivationMode mode, cuda::ActivationParams params, StreamContext& context,
    const exec::View& from, const exec::View& to) {
  cuda::Api& api = api_;
  const float* src = ViewAddress(from);
  float* dst = ViewAddress(to);
  const Shape& in = buffers_.at(from.buffer).shape;
  const Shape& out = buffers_.at(to.buffer).shape;
  const int64_t src_stride = int64_t{in.c} * in.h * in.w;
  const int64_t dst_stride = int64_t{out.c} * out.h * out.w;
  const int64_t count = int64_t{to.channels} * out.h * out.w;
  const cuda::Stream stream = context.stream;
  const int batch = batch_;
  return [=, &api] {
    return api.ActivateStrided(stream, mode, params, dst, dst_stride, src, src_stride, count,
                               batch);
  };
}

// leaky_relu and hard_sigmoid: the kernel that runs the Activation enum's
// leakyrelu and hardsigmoid (PyTorch's defaults), with the op's own
// coefficients.
void CudaPreparedProgram::CompileCoefficientActivation(const exec::Step& step,
                                                       StreamContext& context,
                                                       const std::string& where,
                                                       std::vector<Call>& calls) {
  const exec::View& from = step.inputs.at(0);
  const Shape& in = buffers_.at(from.buffer).shape;
  const Shape& out = buffers_.at(step.output.buffer).shape;
  const bool leaky = step.op.registered.kind == RegisteredKind::kLeakyRelu;
  const std::optional<float> alpha = FloatAttributeOf(step.op.registered, "alpha");
  const std::optional<float> beta =
      leaky ? std::optional<float>(0) : FloatAttributeOf(step.op.registered, "beta");
  if (!alpha || !beta || from.channels != step.output.channels || in.h != out.h || in.w != out.w) {
    throw ExecError(MeasureError::kBackendFailure,
                    "cuda: " + where + ": " + KindName(step.op) + " from " +
                        std::to_string(from.channels) + "x" + std::to_string(in.h) + "x" +
                        std::to_string(in.w) + " to " + std::to_string(step.output.channels) + "x" +
                        std::to_string(out.h) + "x" + std::to_string(out.w) +
                        "; expected one shape in and out, and its coefficients");
  }
  const cuda::ActivationMode mode =
      leaky ? cuda::ActivationMode::kLeakyRelu : cuda::ActivationMode::kHardSigmoidAlphaBeta;
  calls.push_back({KernelActivationCall(mode, {*alpha, *beta}, context, from, step.output)});
}

void CudaPreparedProgram::CompileEltwise(const exec::Step& step, StreamContext& context,
                                         const std::string& where, std::vector<Call>& calls) {
  if (step.inputs.size() < 2) {
    throw ExecError(MeasureError::kBackendFailure,
                    "cuda: " + where + ": an element-wise op needs two inputs or more");
  }
  const bool add = step.op.eltwise != EltwiseType::kMul;
  cuda::OpTensorDesc op;
  Checked(api_.CreateOpTensor(add ? cuda::OpTensorOp::kAdd : cuda::OpTensorOp::kMul, op),
          where + ": its op-tensor");
  ops_.emplace_back(api_, op);
  const cuda::TensorDesc y = KeepTensor(step.output, where);
  float* output = ViewAddress(step.output);
  const cuda::DnnHandle dnn = context.dnn;
  cuda::Api& api = api_;
  // cuDNN broadcasts only B (a C x 1 x 1 input): one input of the output's
  // shape goes first as A; add and mul commute.
  std::vector<exec::View> inputs = step.inputs;
  const Shape& out = buffers_.at(step.output.buffer).shape;
  const auto full = std::find_if(inputs.begin(), inputs.end(), [&](const exec::View& v) {
    const Shape& s = buffers_.at(v.buffer).shape;
    return s.h == out.h && s.w == out.w;
  });
  if (full != inputs.end()) std::iter_swap(inputs.begin(), full);
  // out = in0 op in1: no operand is the output (a step's output never
  // overlaps its inputs).
  const cuda::TensorDesc a = KeepTensor(inputs[0], where);
  const float* first = ViewAddress(inputs[0]);
  const cuda::TensorDesc b = KeepTensor(inputs[1], where);
  const float* second = ViewAddress(inputs[1]);
  calls.push_back({[=, &api] { return api.OpTensor(dnn, op, a, first, b, second, y, output); }});
  for (size_t k = 2; k < inputs.size(); ++k) {
    const cuda::TensorDesc more = KeepTensor(inputs[k], where);
    const float* term = ViewAddress(inputs[k]);
    if (add) {
      // out += in_k by cudnnAddTensor with beta = 1, the form cuDNN
      // documents for blending into a destination ("Scaling Parameters":
      // dstValue = alpha * computedValue + beta * priorDstValue, the
      // destination read before it is written), rather than cudnnOpTensor
      // with C == A, which its documentation does not promise.
      calls.push_back({[=, &api] { return api.AddTensor(dnn, more, term, y, output); }});
    } else {
      // A product of three or more terms (IOS JSON allows it; ONNX's Mul is
      // binary) has no blending form: out = out * in_k in place, C == A,
      // which cuDNN's documentation neither promises nor forbids.
      calls.push_back(
          {[=, &api] { return api.OpTensor(dnn, op, y, output, more, term, y, output); }});
    }
  }
}

// A copy of one view, or the sum of several, with our strided kernel.
void CudaPreparedProgram::CompileIdentity(const exec::Step& step, StreamContext& context,
                                          std::vector<Call>& calls) {
  const Shape& out = buffers_.at(step.output.buffer).shape;
  const int64_t plane = int64_t{out.h} * out.w;
  const int64_t count = plane * step.output.channels;
  float* output = ViewAddress(step.output);
  const int64_t out_stride = int64_t{out.c} * plane;
  const cuda::Stream stream = context.stream;
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

}  // namespace ios::devices::cuda_detail
