#include "devices/cpu/cpu_primitives.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "common/activation.h"
#include "common/op_kinds.h"
#include "devices/cpu/cpu_dnnl_terms.h"
#include "devices/cpu/cpu_step_builder.h"
#include "devices/cpu/cpu_transformer.h"
#include "exec/device.h"

namespace ios::devices::cpu {
namespace {

using dnnl::memory;
using exec::ExecError;
using Dims = memory::dims;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

std::string FormatBytes(double bytes) {
  std::ostringstream out;
  out.precision(3);
  if (bytes >= double(1 << 30)) {
    out << bytes / double(1 << 30) << " GiB";
  } else if (bytes >= double(1 << 20)) {
    out << bytes / double(1 << 20) << " MiB";
  } else {
    out << static_cast<int64_t>(bytes) << " bytes";
  }
  return out.str();
}

//! Turns the steps of one lane into primitives. Runs on the thread that will
//! execute them, after its OpenMP thread count is set.
class LaneCompiler : private StepBuilder {
 public:
  explicit LaneCompiler(const LaneContext& context) : StepBuilder(context) {}

  std::vector<Call> Compile(const exec::Lane& lane, const std::string& where) {
    std::vector<Call> calls;
    for (size_t i = 0; i < lane.steps.size(); ++i) {
      const exec::Step& step = lane.steps[i];
      BeginStep(where + " step " + std::to_string(i) + " (" + step.label + ")");
      try {
        CompileStep(step, calls);
      } catch (const dnnl::error& e) {
        ThrowDnnl(e, this->where() + ": " + doing());
      }
    }
    return calls;
  }

 private:
  void CompileStep(const exec::Step& step, std::vector<Call>& calls) {
    switch (step.op.kind) {
      case OpKind::kConv:
        return Conv(step, calls);
      case OpKind::kPool:
        return Pool(step, calls);
      case OpKind::kActivation:
        return Activate(step, calls);
      case OpKind::kEltwise:
        return Combine(step,
                       step.op.eltwise == EltwiseType::kMul ? dnnl::algorithm::binary_mul
                                                            : dnnl::algorithm::binary_add,
                       calls);
      case OpKind::kIdentity:
        return Combine(step, dnnl::algorithm::binary_add, calls);
      case OpKind::kRegistered:
        return Registered(step, calls);
      case OpKind::kInput:
      case OpKind::kSequential:
        break;
    }
    throw ExecError(MeasureError::kUnsupported, "cpu: " + where() + ": a program step cannot be " +
                                                    std::string(ToString(step.op.kind)));
  }

  void Conv(const exec::Step& step, std::vector<Call>& calls) {
    const ConvParams& c = step.op.conv;
    const exec::View& in = step.inputs.at(0);
    const exec::View& out = step.output;
    const exec::ConvWeights& w = program().weights.at(step.weights);
    const int groups = c.groups;
    if (w.out_channels != out.channels || int64_t{w.in_per_group} * groups != in.channels ||
        w.kernel_h != c.kernel.h || w.kernel_w != c.kernel.w ||
        w.kernel.size() != size_t(w.out_channels) * w.in_per_group * w.kernel_h * w.kernel_w ||
        (!w.bias.empty() && w.bias.size() != size_t(w.out_channels))) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cpu: " + where() + ": the weights do not fit the convolution");
    }
    const Shape& is = ShapeOf(in);
    const Shape& os = ShapeOf(out);
    const memory::desc src_any(Dims{batch(), in.channels, is.h, is.w}, kF32, Tag::any);
    const memory::desc dst_any(Dims{batch(), out.channels, os.h, os.w}, kF32, Tag::any);
    const Dims weight_dims =
        groups == 1 ? Dims{w.out_channels, w.in_per_group, w.kernel_h, w.kernel_w}
                    : Dims{groups, w.out_channels / groups, w.in_per_group, w.kernel_h, w.kernel_w};
    const memory::desc weights_any(weight_dims, kF32, Tag::any);
    const bool bias = !w.bias.empty();
    const memory::desc bias_desc =
        bias ? memory::desc(Dims{w.out_channels}, kF32, Tag::a) : memory::desc();
    dnnl::primitive_attr conv_attr = NewAttr();  // its own: it may get post-ops
    if (c.act != Activation::kNone) {
      dnnl::post_ops ops;
      for (const Eltwise& e : EltwiseStepsOf(c.act))
        ops.append_eltwise(1.f, e.alg, e.alpha, e.beta);
      conv_attr.set_post_ops(ops);
    }
    Doing("convolution_forward::primitive_desc");
    const dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_auto, src_any, weights_any,
        bias_desc, dst_any, Dims{c.stride.h, c.stride.w}, Dims{c.dilation.h - 1, c.dilation.w - 1},
        Dims{c.padding.h, c.padding.w},
        Dims{int64_t{c.padding.h} + c.padding_end_extra.h,
             int64_t{c.padding.w} + c.padding_end_extra.w});
    const dnnl::convolution_forward::primitive_desc pd(desc, conv_attr, engine());

    // Weights: reordered once, here, from OIHW (GOIHW when grouped: the
    // same values in the same order) into the layout the primitive wants.
    memory weights = Allocate(pd.weights_desc(), "convolution weights");
    {
      Doing("reordering the weights");
      memory user(memory::desc(weight_dims, kF32, groups == 1 ? Tag::oihw : Tag::goihw), engine(),
                  const_cast<float*>(w.kernel.data()));
      RunNow(dnnl::reorder(user, weights), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, weights}});
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_WEIGHTS, weights}};
    if (bias) {
      memory bias_memory = Allocate(bias_desc, "convolution bias");
      std::memcpy(bias_memory.get_data_handle(), w.bias.data(), w.bias.size() * sizeof(float));
      args.emplace(DNNL_ARG_BIAS, bias_memory);
    }

    memory src = ViewMemory(in);
    if (pd.src_desc() != src.get_desc()) {
      memory plain = src;
      src = Temp(pd.src_desc());
      Copy(calls, plain, src);
    }
    const memory dst_view = ViewMemory(out);
    const bool direct = pd.dst_desc() == dst_view.get_desc();
    const memory dst = direct ? dst_view : Temp(pd.dst_desc());
    args.emplace(DNNL_ARG_SRC, src);
    args.emplace(DNNL_ARG_DST, dst);
    Doing("creating a convolution_forward");
    Add(calls, pd, dnnl::convolution_forward(pd), std::move(args));
    if (!direct) Copy(calls, dst, dst_view);
  }

  void Pool(const exec::Step& step, std::vector<Call>& calls) {
    const PoolParams& p = step.op.pool;
    const exec::View& in = step.inputs.at(0);
    const Shape& is = ShapeOf(in);
    const bool global = p.type == PoolType::kGlobalMax || p.type == PoolType::kGlobalAvg;
    const bool max = p.type == PoolType::kMax || p.type == PoolType::kGlobalMax;
    // IOS's average pooling divides by the whole window, padding included.
    const dnnl::algorithm algorithm = max ? dnnl::algorithm::pooling_max
                                      : p.exclude_padding
                                          ? dnnl::algorithm::pooling_avg_exclude_padding
                                          : dnnl::algorithm::pooling_avg_include_padding;
    const Dims kernel = global ? Dims{is.h, is.w} : Dims{p.kernel.h, p.kernel.w};
    const Dims strides = global ? Dims{1, 1} : Dims{p.stride.h, p.stride.w};
    const Dims padding = global ? Dims{0, 0} : Dims{p.padding.h, p.padding.w};
    // Rounding the output up (ceil) pads the bottom and right further, so
    // the last window fits; a max never takes padding.
    const Shape& os = ShapeOf(step.output);
    const Dims padding_r =
        p.ceil ? Dims{(os.h - 1) * int64_t{p.stride.h} + p.kernel.h - is.h - p.padding.h,
                      (os.w - 1) * int64_t{p.stride.w} + p.kernel.w - is.w - p.padding.w}
               : padding;
    const memory src = DenseInput(calls, in);
    const memory dst = DenseOutput(step.output);
    Doing("pooling_forward::primitive_desc");
    const dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm,
                                           src.get_desc(), dst.get_desc(), strides, kernel, padding,
                                           padding_r);
    const dnnl::pooling_forward::primitive_desc pd(desc, attr(), engine());
    Doing("creating a pooling_forward");
    Add(calls, pd, dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    FinishOutput(calls, step.output, dst);
  }

  void Activate(const exec::Step& step, std::vector<Call>& calls) {
    if (step.op.act == Activation::kNone) {
      return Copy(calls, ViewMemory(step.inputs.at(0)), ViewMemory(step.output));
    }
    EltwiseSteps(step, EltwiseStepsOf(step.op.act), calls);
  }

  //! `steps` in turn from the step's input to its output.
  void EltwiseSteps(const exec::Step& step, const std::vector<Eltwise>& steps,
                    std::vector<Call>& calls) {
    // Both dense and of equal dims: one descriptor serves source and
    // destination, as oneDNN 2.x's eltwise requires.
    const memory src = DenseInput(calls, step.inputs.at(0));
    const memory dst = DenseOutput(step.output);
    // The first step reads the input, later ones work in place.
    bool first = true;
    for (const Eltwise& e : steps) {
      Doing("eltwise_forward::primitive_desc");
      const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, e.alg,
                                             dst.get_desc(), e.alpha, e.beta);
      const dnnl::eltwise_forward::primitive_desc pd(desc, attr(), engine());
      Doing("creating an eltwise_forward");
      Add(calls, pd, dnnl::eltwise_forward(pd),
          {{DNNL_ARG_SRC, first ? src : dst}, {DNNL_ARG_DST, dst}});
      first = false;
    }
    FinishOutput(calls, step.output, dst);
  }

  //! A kind of common/op_kinds.h: oneDNN's own primitive for it.
  void Registered(const exec::Step& step, std::vector<Call>& calls) {
    switch (step.op.registered.kind) {
      case RegisteredKind::kSoftmax:
        return Softmax(step, calls);
      case RegisteredKind::kChannelShuffle:
        return ChannelShuffle(step, calls);
      case RegisteredKind::kLayerNorm:
        return LayerNorm(step, calls);
      case RegisteredKind::kLeakyRelu:  // as Activation::kLeakyRelu, at the op's slope
        return EltwiseSteps(step, {{dnnl::algorithm::eltwise_relu, Float(step, "alpha")}}, calls);
      case RegisteredKind::kHardSigmoid:  // as Activation::kHardSigmoid, at the op's line
        return EltwiseSteps(
            step,
            {{dnnl::algorithm::eltwise_linear, Float(step, "alpha"), Float(step, "beta")},
             {dnnl::algorithm::eltwise_clip, 0.f, 1.f}},
            calls);
      case RegisteredKind::kFlatten:
        return Flatten(step, calls);
      case RegisteredKind::kAttention:
        return CompileAttention(*this, step, calls);
      case RegisteredKind::kEmbedTokens:
        return CompileEmbedTokens(*this, step, calls);
      case RegisteredKind::kWindowAttention:
        return CompileWindowAttention(*this, step, calls);
      case RegisteredKind::kSpaceToDepth:
        return CompileSpaceToDepth(*this, step, calls);
    }
    throw ExecError(MeasureError::kUnsupported,
                    "cpu: " + where() + ": no primitive for " + KindName(step.op));
  }

  //! A float attribute of the step's kind; a program from a bad key says so.
  float Float(const exec::Step& step, std::string_view name) const {
    const std::optional<float> value = FloatAttributeOf(step.op.registered, name);
    if (!value) {
      throw ExecError(MeasureError::kBackendFailure, "cpu: " + where() + ": " + KindName(step.op) +
                                                         " has no attribute " + std::string(name));
    }
    return *value;
  }

  //! Softmax (or its logarithm) over channels, on dense nhwc data: the
  //! channels of a pixel are adjacent, the layout oneDNN's fast softmax
  //! takes.
  void Softmax(const exec::Step& step, std::vector<Call>& calls) {
    const bool log = AttributeOf(step.op.registered, "log").value_or(0) != 0;
    const memory src = DenseInput(calls, step.inputs.at(0));
    const memory dst = DenseOutput(step.output);
    Doing("softmax_v2_forward::primitive_desc");
    const dnnl::softmax_v2_forward::desc desc(
        dnnl::prop_kind::forward_inference,
        log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, src.get_desc(),
        dst.get_desc(), /*softmax_axis=*/1);
    const dnnl::softmax_v2_forward::primitive_desc pd(desc, attr(), engine());
    Doing("creating a softmax_v2_forward");
    Add(calls, pd, dnnl::softmax_v2_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    FinishOutput(calls, step.output, dst);
  }

  //! A view as rows of `rows` x its channels: a pixel's channels are a row
  //! (nhwc), the row stride being the buffer's channel count.
  memory RowsMemory(const exec::View& view, int64_t rows) const {
    const memory::desc desc(Dims{rows, view.channels}, kF32, Dims{ShapeOf(view).c, 1});
    return memory(desc, engine(), DataOf(view));
  }

  //! LayerNorm over the channels of each pixel, without scale or shift.
  //! oneDNN normalises over the last logical dimension, so the data is
  //! described as {N*H*W, C} rows; its statistics are computed in its
  //! scratchpad (forward_inference without use_global_stats). A channel
  //! view of a wider buffer is copied to dense rows first, and written
  //! back from them, as for softmax.
  void LayerNorm(const exec::Step& step, std::vector<Call>& calls) {
    const exec::View& in = step.inputs.at(0);
    const exec::View& out = step.output;
    const Shape& is = ShapeOf(in);
    const Shape& os = ShapeOf(out);
    if (in.channels != out.channels || is.h != os.h || is.w != os.w) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cpu: " + where() + ": layernorm cannot map " + std::to_string(in.channels) +
                          "x" + std::to_string(is.h) + "x" + std::to_string(is.w) + " onto " +
                          std::to_string(out.channels) + "x" + std::to_string(os.h) + "x" +
                          std::to_string(os.w));
    }
    const float eps = FloatAttributeOf(step.op.registered, "eps").value_or(0);
    const int64_t rows = batch() * is.h * is.w;
    const memory::desc dense(Dims{rows, in.channels}, kF32, Tag::ab);
    memory src = RowsMemory(in, rows);
    if (!IsDense(in)) {
      const memory strided = src;
      src = Temp(dense);
      Copy(calls, strided, src);
    }
    const memory dst_view = RowsMemory(out, rows);
    const memory dst = IsDense(out) ? dst_view : Temp(dense);
    Doing("layer_normalization_forward::primitive_desc");
    const dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, dense,
                                                       eps, dnnl::normalization_flags::none);
    const dnnl::layer_normalization_forward::primitive_desc pd(desc, attr(), engine());
    Doing("creating a layer_normalization_forward");
    Add(calls, pd, dnnl::layer_normalization_forward(pd),
        {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    if (!IsDense(out)) Copy(calls, dst, dst_view);
  }

  //! A view's channels seen as `rows` x `columns` (channel row * row_stride
  //! + column * column_stride of the view): 5-D {N, rows, columns, H, W}
  //! over the view's own NHWC storage.
  memory GridMemory(const exec::View& view, int64_t rows, int64_t columns, int64_t row_stride,
                    int64_t column_stride) const {
    const Shape& s = ShapeOf(view);
    const memory::desc desc(
        Dims{batch(), rows, columns, s.h, s.w}, kF32,
        Dims{int64_t{s.c} * s.h * s.w, row_stride, column_stride, int64_t{s.w} * s.c, s.c});
    return memory(desc, engine(), DataOf(view));
  }

  //! ShuffleNet's channel shuffle as one reorder: input channel i*(C/g) + j
  //! is element (i, j) of a g x C/g grid read row by row, output channel
  //! j*g + i the same element of a grid read column by column. A reorder
  //! between two strided descriptors of one dims is a pure permutation, so
  //! it reads and writes channel views of wider buffers in place (oneDNN
  //! runs it with its jit reorder). dnnl::shuffle_forward would gain little:
  //! on nhwc oneDNN 2.6 has only its reference implementation (ref:any),
  //! measured about as fast on dense data (116x28x28, one core: 41 us
  //! against the reorder's 47 us; a plain copy 11-24 us).
  void ChannelShuffle(const exec::Step& step, std::vector<Call>& calls) {
    const exec::View& in = step.inputs.at(0);
    const int64_t groups = AttributeOf(step.op.registered, "groups").value_or(0);
    if (groups < 1 || in.channels % groups != 0 || step.output.channels != in.channels) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cpu: " + where() + ": channel_shuffle of " + std::to_string(groups) +
                          " groups cannot map " + std::to_string(in.channels) +
                          " input channels onto " + std::to_string(step.output.channels));
    }
    const int64_t per_group = in.channels / groups;
    Copy(calls, GridMemory(in, groups, per_group, per_group, 1),
         GridMemory(step.output, groups, per_group, 1, groups));
  }

  //! A map as one vector per sample, as one reorder: both sides described
  //! with the input's dims {N, C, H, W}, the input over its NHWC storage,
  //! the output as the vector's order puts each value. Channels last, that
  //! is the storage's own order (a copy when the input is a whole buffer);
  //! channels first, a transpose. The output may be a view of a wider
  //! vector (several flattened outputs concatenated).
  void Flatten(const exec::Step& step, std::vector<Call>& calls) {
    const exec::View& in = step.inputs.at(0);
    const Shape& s = ShapeOf(in);
    const int64_t c = in.channels, h = s.h, w = s.w;
    if (step.output.channels != c * h * w) {
      throw ExecError(MeasureError::kBackendFailure,
                      "cpu: " + where() + ": flatten of " + std::to_string(c) + "x" +
                          std::to_string(h) + "x" + std::to_string(w) + " into " +
                          std::to_string(step.output.channels) + " values");
    }
    const bool channels_last = AttributeOf(step.op.registered, "channels_last").value_or(0) != 0;
    const int64_t vector_stride = ShapeOf(step.output).c;  // the output buffer's values a sample
    const memory::desc from(Dims{batch(), c, h, w}, kF32,
                            Dims{int64_t{s.c} * h * w, 1, w * s.c, s.c});
    const memory::desc to(
        Dims{batch(), c, h, w}, kF32,
        channels_last ? Dims{vector_stride, 1, w * c, c} : Dims{vector_stride, h * w, w, 1});
    Copy(calls, memory(from, engine(), DataOf(in)), memory(to, engine(), DataOf(step.output)));
  }

  //! out = in0 (op) in1 (op) ... as a chain of binary primitives, the later
  //! ones in place on the output; one input is a copy.
  void Combine(const exec::Step& step, dnnl::algorithm algorithm, std::vector<Call>& calls) {
    if (step.inputs.size() == 1) {
      return Copy(calls, ViewMemory(step.inputs[0]), ViewMemory(step.output));
    }
    // oneDNN broadcasts only its second source (a C x 1 x 1 eltwise input):
    // one input of the output's shape goes first; add and mul commute.
    std::vector<exec::View> inputs = step.inputs;
    const Shape out_shape{step.output.channels, ShapeOf(step.output).h, ShapeOf(step.output).w};
    const auto full = std::find_if(inputs.begin(), inputs.end(), [&](const exec::View& v) {
      return ShapeOf(v).h == out_shape.h && ShapeOf(v).w == out_shape.w;
    });
    if (full != inputs.end()) std::iter_swap(inputs.begin(), full);
    const memory dst = DenseOutput(step.output);
    const memory first = DenseInput(calls, inputs[0]);
    for (size_t i = 1; i < inputs.size(); ++i) {
      const memory src0 = i == 1 ? first : dst;
      const memory src1 = DenseInput(calls, inputs[i]);
      Doing("binary::primitive_desc");
      const dnnl::binary::desc desc(algorithm, src0.get_desc(), src1.get_desc(), dst.get_desc());
      const dnnl::binary::primitive_desc pd(desc, attr(), engine());
      Doing("creating a binary");
      Add(calls, pd, dnnl::binary(pd),
          {{DNNL_ARG_SRC_0, src0}, {DNNL_ARG_SRC_1, src1}, {DNNL_ARG_DST, dst}});
    }
    FinishOutput(calls, step.output, dst);
  }
};

}  // namespace

void MemoryBudget::Reserve(int64_t bytes, const std::string& what) {
  if (bytes < 0 || bytes > limit_ - used_) {
    throw ExecError(MeasureError::kOutOfMemory,
                    "cpu: " + what + " needs " +
                        (bytes < 0 ? std::string("more than 2^63 bytes") : FormatBytes(bytes)) +
                        (used_ > 0 ? " beside " + FormatBytes(used_) + " already planned" : "") +
                        "; this machine has " + FormatBytes(limit_) + " of physical memory");
  }
  used_ += bytes;
}

Storage AllocateFloats(int64_t count, const std::string& what) {
  const size_t bytes =
      (static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float) + kAlignment - 1) /
      kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, bytes);
  if (data == nullptr) {
    throw ExecError(MeasureError::kOutOfMemory,
                    "cpu: could not allocate " + FormatBytes(double(bytes)) + " for " + what);
  }
  std::memset(data, 0, bytes);
  return Storage(static_cast<float*>(data));
}

void ThrowDnnl(const dnnl::error& e, const std::string& where) {
  throw ExecError(KindOf(e), "cpu: " + where + ": oneDNN: " + e.what() + " (status " +
                                 std::to_string(static_cast<int>(e.status)) + ")");
}

void RunCalls(std::vector<Call>& calls, Executor& executor) {
  try {
    for (Call& call : calls) call.primitive.execute(executor.stream, call.args);
    executor.stream.wait();
  } catch (const dnnl::error& e) {
    ThrowDnnl(e, "running a primitive");
  }
}

std::vector<Call> CompileLane(const LaneContext& context, const exec::Lane& lane,
                              const std::string& where) {
  return LaneCompiler(context).Compile(lane, where);
}

}  // namespace ios::devices::cpu
