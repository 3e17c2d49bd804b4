// A convolution padded more at the bottom and right than at the top and
// left (ConvParams::padding_end_extra): cuDNN's convolution descriptor pads
// both sides equally, so the convolution runs unpadded on a zeroed copy of
// its input that holds all of its padding (cuda_program.h).
#include <algorithm>
#include <vector>

#include "devices/cuda/cuda_program.h"

namespace ios::devices::cuda_detail {
namespace {

//! The tensor of the zeroed, padded copy of `x`, convolution `c`'s input.
cuda::TensorLayout PaddedLayout(const ConvParams& c, const cuda::TensorLayout& x) {
  const int64_t h = int64_t{x.h} + 2 * int64_t{c.padding.h} + c.padding_end_extra.h;
  const int64_t w = int64_t{x.w} + 2 * int64_t{c.padding.w} + c.padding_end_extra.w;
  // Heights and widths are limited (common/limits.h): these fit an int.
  return {x.n, x.c, static_cast<int>(h), static_cast<int>(w), x.c * h * w, h * w, w, 1};
}

}  // namespace

double PaddedInputElements(const exec::Step& step, const exec::BufferDesc& input, int batch) {
  const ConvParams& c = step.op.conv;
  if (c.padding_end_extra == Window{0, 0}) return 0;
  const cuda::TensorLayout p = PaddedLayout(c, LayoutOf(input, step.inputs.at(0), batch));
  return static_cast<double>(p.stride_n) * p.n;
}

std::function<cuda::Status()> CudaPreparedProgram::PadInput(const exec::Step& step,
                                                            StreamContext& context,
                                                            const std::string& where,
                                                            cuda::TensorLayout& x_layout,
                                                            const float*& input) {
  const ConvParams& c = step.op.conv;
  const cuda::TensorLayout padded = PaddedLayout(c, x_layout);
  const size_t bytes = static_cast<size_t>(padded.stride_n) * padded.n * sizeof(float);
  const DeviceMemory& memory = padded_.emplace_back(
      Allocate(api_, bytes, where + ": its padded input (" + MiB(double(bytes)) + ")"));
  float* base = static_cast<float*>(memory.get());
  // Zeroed once, here: a run writes only the interior, so the border stays.
  const std::vector<char> zeros(std::min(bytes, size_t{16} << 20), 0);
  for (size_t at = 0; at < bytes; at += zeros.size()) {
    Checked(api_.CopyToDevice(reinterpret_cast<char*>(base) + at, zeros.data(),
                              std::min(zeros.size(), bytes - at)),
            where + ": zeroing its padded input");
  }
  // The view's sizes in the padded strides, from the first unpadded pixel.
  cuda::TensorLayout interior = padded;
  interior.h = x_layout.h;
  interior.w = x_layout.w;
  const cuda::TensorDesc from = KeepTensor(x_layout, where);
  const cuda::TensorDesc to = KeepTensor(interior, where);
  float* inside = base + int64_t{c.padding.h} * padded.stride_h + c.padding.w;
  const float* source = input;
  x_layout = padded;
  input = base;
  const cuda::DnnHandle dnn = context.dnn;
  cuda::Api& api = api_;
  return [=, &api] { return api.TransformTensor(dnn, from, source, to, inside); };
}

}  // namespace ios::devices::cuda_detail
