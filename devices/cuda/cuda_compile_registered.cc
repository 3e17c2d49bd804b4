// The compilation of the registered kinds' steps (common/op_kinds.h): the
// calls cuda_compile.cc's CompileStep hands them to, through cuDNN where it
// has the operation and through our kernels (cuda_kernels.h) where not.
#include "common/op_kinds.h"
#include "devices/cuda/cuda_program.h"

namespace ios::devices::cuda_detail {

using exec::ExecError;

void CudaPreparedProgram::CompileRegistered(const exec::Step& step, StreamContext& context,
                                            const std::string& where, std::vector<Call>& calls) {
  switch (step.op.registered.kind) {
    case RegisteredKind::kSoftmax: {
      // cuDNN takes the strided views as they are (channel mode: over C at
      // each pixel, as the reference device computes it).
      const bool log = AttributeOf(step.op.registered, "log").value_or(0) != 0;
      return AddUnaryCall(step, context, where, calls,
                          [log](cuda::Api& api, cuda::DnnHandle dnn, cuda::TensorDesc x,
                                const float* from, cuda::TensorDesc y, float* to) {
                            return api.SoftmaxForward(dnn, log, x, from, y, to);
                          });
    }
    case RegisteredKind::kChannelShuffle:
      return CompileChannelShuffle(step, context, where, calls);
    case RegisteredKind::kLayerNorm:
      return CompileLayerNorm(step, context, where, calls);
    case RegisteredKind::kLeakyRelu:
    case RegisteredKind::kHardSigmoid:
      return CompileCoefficientActivation(step, context, where, calls);
    case RegisteredKind::kFlatten:
      return CompileFlatten(step, context, where, calls);
    case RegisteredKind::kAttention:
      return CompileAttention(step, context, where, calls);
    case RegisteredKind::kEmbedTokens:
      return CompileEmbedTokens(step, context, where, calls);
    case RegisteredKind::kWindowAttention:
      return CompileWindowAttention(step, context, where, calls);
    case RegisteredKind::kSpaceToDepth:
      return CompileSpaceToDepth(step, context, where, calls);
  }
  throw ExecError(MeasureError::kUnsupported,
                  "cuda: " + where + ": no call for " + KindName(step.op));
}

// The shuffle is a transpose of the channels seen as groups x (C/groups)
// rows: one cudnnTransformTensor, the permutation written as strides, on
// 4-D descriptors {N, groups, C/groups, H*W}. The input reads row i, column
// j at channel i*(C/groups) + j; the output writes it at channel j*groups
// + i. H and W fold into one dimension because a channel's plane is
// contiguous in every view (a view is a channel range), which keeps the
// Api's 4-D tensors (a 5-D descriptor would add a second tensor kind for
// this call alone). One launch, where copies per group would be `groups`
// launches (ShuffleNet V2 shuffles 2 groups, V1 up to 8) and a kernel of
// our own would duplicate what cuDNN has.
void CudaPreparedProgram::CompileChannelShuffle(const exec::Step& step, StreamContext& context,
                                                const std::string& where,
                                                std::vector<Call>& calls) {
  const int groups = AttributeOf(step.op.registered, "groups").value_or(0);
  const int channels = step.inputs[0].channels;
  if (groups < 1 || channels % groups != 0 || step.output.channels != channels) {
    throw ExecError(MeasureError::kBackendFailure,
                    "cuda: " + where + ": a channel shuffle of " + std::to_string(groups) +
                        " groups from " + std::to_string(channels) + " channels to " +
                        std::to_string(step.output.channels) +
                        "; expected a divisor of the channels and as many out as in");
  }
  const cuda::TensorLayout in =
      LayoutOf(buffers_.at(step.inputs[0].buffer), step.inputs[0], batch_);
  const cuda::TensorLayout out = LayoutOf(buffers_.at(step.output.buffer), step.output, batch_);
  const int per_group = channels / groups;
  const int64_t plane = in.stride_c;  // H*W, the same for both views
  // The extent check (CheckTensorLimits) bounds the plane far below int's range.
  const int pixels = static_cast<int>(plane);
  const cuda::TensorDesc x =
      KeepTensor(cuda::TensorLayout{batch_, groups, per_group, pixels, in.stride_n,
                                    per_group * plane, plane, 1},
                 where + ": its input as groups x channels per group");
  const cuda::TensorDesc y = KeepTensor(
      cuda::TensorLayout{batch_, groups, per_group, pixels, out.stride_n, plane, groups * plane, 1},
      where + ": its output as groups x channels per group");
  AddTransformCall(step, context, x, y, calls);
}

// One cudnnTransformTensor from the step's input view, described as `x`,
// to its output view, described as `y`: the strides say the permutation.
void CudaPreparedProgram::AddTransformCall(const exec::Step& step, StreamContext& context,
                                           cuda::TensorDesc x, cuda::TensorDesc y,
                                           std::vector<Call>& calls) {
  const float* input = ViewAddress(step.inputs[0]);
  float* output = ViewAddress(step.output);
  const cuda::DnnHandle dnn = context.dnn;
  cuda::Api& api = api_;
  calls.push_back({[=, &api] { return api.TransformTensor(dnn, x, input, y, output); }});
}

// A map as one vector per sample: one cudnnTransformTensor between the
// input's NCHW view and the same dims laid out as the vector orders them
// (channels first: the view's own order; channels last: a pixel's channels
// together), so the output may be a view of a wider vector too.
void CudaPreparedProgram::CompileFlatten(const exec::Step& step, StreamContext& context,
                                         const std::string& where, std::vector<Call>& calls) {
  const cuda::TensorLayout in =
      LayoutOf(buffers_.at(step.inputs[0].buffer), step.inputs[0], batch_);
  const int64_t values = int64_t{in.c} * in.h * in.w;
  if (step.output.channels != values) {
    throw ExecError(MeasureError::kBackendFailure,
                    "cuda: " + where + ": a flatten of " + Describe(in) + " into " +
                        std::to_string(step.output.channels) + " values");
  }
  const bool channels_last = AttributeOf(step.op.registered, "channels_last").value_or(0) != 0;
  const int64_t vector_stride = buffers_.at(step.output.buffer).shape.c;
  const int64_t plane = int64_t{in.h} * in.w;
  const cuda::TensorLayout out =
      channels_last
          ? cuda::TensorLayout{in.n, in.c, in.h, in.w, vector_stride, 1, int64_t{in.w} * in.c, in.c}
          : cuda::TensorLayout{in.n, in.c, in.h, in.w, vector_stride, plane, in.w, 1};
  const cuda::TensorDesc x = KeepTensor(in, where + ": its input");
  const cuda::TensorDesc y = KeepTensor(out, where + ": its output as a vector");
  AddTransformCall(step, context, x, y, calls);
}

// Our kernel (cuDNN's legacy API has no layer norm), on the views as they
// are: a channel's plane is contiguous in any view, so a pixel's channels
// are `plane` floats apart and a sample is the whole buffer's C*H*W after
// the previous one, on both sides.
void CudaPreparedProgram::CompileLayerNorm(const exec::Step& step, StreamContext& context,
                                           const std::string& where, std::vector<Call>& calls) {
  const exec::View& from = step.inputs.at(0);
  const Shape& in = buffers_.at(from.buffer).shape;
  const Shape& out = buffers_.at(step.output.buffer).shape;
  const std::optional<float> eps = FloatAttributeOf(step.op.registered, "eps");
  if (!eps || from.channels != step.output.channels || in.h != out.h || in.w != out.w) {
    throw ExecError(MeasureError::kBackendFailure,
                    "cuda: " + where + ": a layer norm from " + std::to_string(from.channels) +
                        "x" + std::to_string(in.h) + "x" + std::to_string(in.w) + " to " +
                        std::to_string(step.output.channels) + "x" + std::to_string(out.h) + "x" +
                        std::to_string(out.w) + (eps ? "" : " without an eps") +
                        "; expected one shape in and out, and an eps");
  }
  cuda::LayerNormShape shape;
  shape.batch = batch_;
  shape.channels = from.channels;
  shape.pixels = int64_t{in.h} * in.w;
  shape.src_batch_stride = int64_t{in.c} * shape.pixels;
  shape.dst_batch_stride = int64_t{out.c} * shape.pixels;
  const float* src = ViewAddress(from);
  float* dst = ViewAddress(step.output);
  const float epsilon = *eps;
  const cuda::Stream stream = context.stream;
  cuda::Api& api = api_;
  calls.push_back({[=, &api] { return api.LayerNormStrided(stream, shape, epsilon, src, dst); }});
}

}  // namespace ios::devices::cuda_detail
