// The transformer kinds' steps (common/op_kinds_transformer.h): attention,
// embed_tokens, Swin's window attention and patch merging's
// space_to_depth, each one launch of our kernel (cuda_kernels.cu) on the
// views as they are. cuDNN's legacy API has no call for the first three
// (and the last would take it block^2 calls); its graph API's fused
// attention would tie the worker to one cuDNN generation and to the
// layouts it fuses, and cuBLAS would be a dependency the worker does not
// have for a few kinds.
#include <string>

#include "common/op_kinds.h"
#include "devices/cuda/cuda_program.h"

namespace ios::devices::cuda_detail {

using exec::ExecError;

namespace {

//! Heads wider than our attention kernels' shared memory holds are a fact
//! about the problem (kUnsupported), not a failure of the device.
void CheckHeadChannels(int head_channels, const std::string& kernel, const std::string& where) {
  if (head_channels > cuda::kMaxAttentionHeadChannels) {
    throw ExecError(MeasureError::kUnsupported,
                    "cuda: " + where + ": heads of " + std::to_string(head_channels) +
                        " channels; our " + kernel + " kernel takes at most " +
                        std::to_string(cuda::kMaxAttentionHeadChannels));
  }
}

}  // namespace

// A channel view is a channel range, so the queries, keys and values are
// three consecutive runs of planes from the view's address, and a sample
// is the whole buffer's C*H*W after the previous one on either side.
void CudaPreparedProgram::CompileAttention(const exec::Step& step, StreamContext& context,
                                           const std::string& where, std::vector<Call>& calls) {
  const exec::View& from = step.inputs.at(0);
  const Shape& in = buffers_.at(from.buffer).shape;
  const Shape& out = buffers_.at(step.output.buffer).shape;
  const int heads = AttributeOf(step.op.registered, "heads").value_or(0);
  const int channels = step.output.channels;
  if (heads < 1 || from.channels != 3 * channels || channels % heads != 0 || in.h != out.h ||
      in.w != out.w) {
    throw ExecError(MeasureError::kBackendFailure,
                    "cuda: " + where + ": an attention of " + std::to_string(heads) +
                        " heads from " + ShapeText(Shape{from.channels, in.h, in.w}) + " to " +
                        ShapeText(Shape{channels, out.h, out.w}) +
                        "; expected 3 x C channels in, C out, heads dividing C, one map size");
  }
  CheckHeadChannels(channels / heads, "attention", where);
  cuda::AttentionShape shape;
  shape.batch = batch_;
  shape.channels = channels;
  shape.heads = heads;
  shape.tokens = int64_t{in.h} * in.w;
  shape.src_batch_stride = int64_t{in.c} * shape.tokens;
  shape.dst_batch_stride = int64_t{out.c} * shape.tokens;
  const float* src = ViewAddress(from);
  float* dst = ViewAddress(step.output);
  const cuda::Stream stream = context.stream;
  cuda::Api& api = api_;
  calls.push_back({[=, &api] { return api.AttentionStrided(stream, shape, src, dst); }});
}

// The position embedding and the class token were uploaded with the
// convolutions' weights (UploadWeights, at prepare); the call only points
// at them. The output is C x L x 1: a channel's L tokens are one plane.
void CudaPreparedProgram::CompileEmbedTokens(const exec::Step& step, StreamContext& context,
                                             const std::string& where, std::vector<Call>& calls) {
  const exec::View& from = step.inputs.at(0);
  const Shape& in = buffers_.at(from.buffer).shape;
  const Shape& out = buffers_.at(step.output.buffer).shape;
  const bool class_token = AttributeOf(step.op.registered, "class_token").value_or(0) != 0;
  const int64_t pixels = int64_t{in.h} * in.w;
  const int64_t tokens = pixels + (class_token ? 1 : 0);
  const bool has_weights = step.weights >= 0 && static_cast<size_t>(step.weights) < weights_.size();
  const Weights* w = has_weights ? &weights_[static_cast<size_t>(step.weights)] : nullptr;
  if (from.channels != step.output.channels || int64_t{out.h} * out.w != tokens || out.w != 1 ||
      w == nullptr || w->kernel.get() == nullptr || (w->bias.get() != nullptr) != class_token) {
    throw ExecError(MeasureError::kBackendFailure,
                    "cuda: " + where + ": an embed_tokens from " +
                        ShapeText(Shape{from.channels, in.h, in.w}) + " to " +
                        ShapeText(Shape{step.output.channels, out.h, out.w}) +
                        (class_token ? " with" : " without") + " a class token, weights " +
                        std::to_string(step.weights) +
                        "; expected C x (H*W + class token) x 1 out, a position embedding, and "
                        "the class token's values exactly when there is one");
  }
  cuda::EmbedTokensShape shape;
  shape.batch = batch_;
  shape.channels = from.channels;
  shape.pixels = pixels;
  shape.class_token = class_token;
  shape.src_batch_stride = int64_t{in.c} * pixels;
  shape.dst_batch_stride = int64_t{out.c} * tokens;
  const float* src = ViewAddress(from);
  const auto* position = static_cast<const float*>(w->kernel.get());
  const auto* class_values = static_cast<const float*>(w->bias.get());
  float* dst = ViewAddress(step.output);
  const cuda::Stream stream = context.stream;
  cuda::Api& api = api_;
  calls.push_back({[=, &api] {
    return api.EmbedTokensStrided(stream, shape, src, position, class_values, dst);
  }});
}

// Attention's views (CompileAttention), the relative position bias
// uploaded at prepare as embed_tokens' weights are. The roll and the
// windows (Swin's squares or MaxViT's grid) are the kernel's index
// arithmetic: no rolled or regrouped copy of the map and no mask is ever
// written, so the step stays one launch.
void CudaPreparedProgram::CompileWindowAttention(const exec::Step& step, StreamContext& context,
                                                 const std::string& where,
                                                 std::vector<Call>& calls) {
  const exec::View& from = step.inputs.at(0);
  const Shape& in = buffers_.at(from.buffer).shape;
  const Shape& out = buffers_.at(step.output.buffer).shape;
  const RegisteredOp& op = step.op.registered;
  const int heads = AttributeOf(op, "heads").value_or(0);
  const int window = AttributeOf(op, "window").value_or(0);
  const int shift = AttributeOf(op, "shift").value_or(-1);
  const bool grid = AttributeOf(op, "grid").value_or(0) != 0;
  const int channels = step.output.channels;
  const bool has_weights = step.weights >= 0 && static_cast<size_t>(step.weights) < weights_.size();
  const Weights* w = has_weights ? &weights_[static_cast<size_t>(step.weights)] : nullptr;
  if (heads < 1 || from.channels != 3 * channels || channels % heads != 0 || in.h != out.h ||
      in.w != out.w || window < 1 || in.h % window != 0 || in.w % window != 0 || shift < 0 ||
      shift >= window || (grid && shift != 0) || w == nullptr || w->kernel.get() == nullptr ||
      w->bias.get() != nullptr) {
    throw ExecError(
        MeasureError::kBackendFailure,
        "cuda: " + where + ": a window attention of " + std::to_string(heads) + " heads, " +
            std::to_string(window) + "x" + std::to_string(window) +
            (grid ? " grid windows" : " windows") + " shifted by " + std::to_string(shift) +
            ", from " + ShapeText(Shape{from.channels, in.h, in.w}) + " to " +
            ShapeText(Shape{channels, out.h, out.w}) + ", weights " + std::to_string(step.weights) +
            "; expected 3 x C channels in, C out, heads dividing C, one map size "
            "that the window divides, a shift below the window (none with a grid), and a "
            "bias table");
  }
  CheckHeadChannels(channels / heads, "window attention", where);
  cuda::WindowAttentionShape shape;
  shape.batch = batch_;
  shape.channels = channels;
  shape.heads = heads;
  shape.height = in.h;
  shape.width = in.w;
  shape.window = window;
  shape.shift = shift;
  shape.grid = grid;
  shape.scale = FloatAttributeOf(op, "scale").value_or(0.0f);
  shape.src_batch_stride = int64_t{in.c} * shape.tokens();
  shape.dst_batch_stride = int64_t{out.c} * shape.tokens();
  const float* src = ViewAddress(from);
  const auto* bias = static_cast<const float*>(w->kernel.get());
  float* dst = ViewAddress(step.output);
  const cuda::Stream stream = context.stream;
  cuda::Api& api = api_;
  calls.push_back(
      {[=, &api] { return api.WindowAttentionStrided(stream, shape, src, bias, dst); }});
}

// One launch of our copy kernel rather than block^2 cudnnTransformTensor
// calls (one per offset in the square, each a strided view of both sides):
// a capture and a timed run see a single node, as for the other kinds.
void CudaPreparedProgram::CompileSpaceToDepth(const exec::Step& step, StreamContext& context,
                                              const std::string& where, std::vector<Call>& calls) {
  const exec::View& from = step.inputs.at(0);
  const Shape& in = buffers_.at(from.buffer).shape;
  const Shape& out = buffers_.at(step.output.buffer).shape;
  const int block = AttributeOf(step.op.registered, "block").value_or(0);
  if (block < 1 || in.h % block != 0 || in.w % block != 0 || out.h * block != in.h ||
      out.w * block != in.w || int64_t{from.channels} * block * block != step.output.channels) {
    throw ExecError(MeasureError::kBackendFailure,
                    "cuda: " + where + ": a space_to_depth by " + std::to_string(block) + " from " +
                        ShapeText(Shape{from.channels, in.h, in.w}) + " to " +
                        ShapeText(Shape{step.output.channels, out.h, out.w}) +
                        "; expected a block dividing the map and block^2 x C channels out");
  }
  cuda::SpaceToDepthShape shape;
  shape.batch = batch_;
  shape.channels = from.channels;
  shape.height = in.h;
  shape.width = in.w;
  shape.block = block;
  shape.src_batch_stride = int64_t{in.c} * in.h * in.w;
  shape.dst_batch_stride = int64_t{out.c} * out.h * out.w;
  const float* src = ViewAddress(from);
  float* dst = ViewAddress(step.output);
  const cuda::Stream stream = context.stream;
  cuda::Api& api = api_;
  calls.push_back({[=, &api] { return api.SpaceToDepthStrided(stream, shape, src, dst); }});
}

}  // namespace ios::devices::cuda_detail
