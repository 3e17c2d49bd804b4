// The recording fake's work calls: each enqueued operation's operands are
// checked (alive, inside a live allocation, shapes that agree) and recorded
// on its stream (recording_api.h).
#include <algorithm>
#include <string>
#include <vector>

#include "tests/devices/cuda/recording_api.h"

namespace ios::cuda::testing {

// ---- Work ------------------------------------------------------------------------

void RecordingApi::CheckConvolution(const std::string& call, TensorDesc x_desc, const void* x,
                                    FilterDesc w_desc, const void* w, ConvDesc conv,
                                    TensorDesc y_desc, const void* y) {
  Extent(x, x_desc, call);
  Extent(y, y_desc, call);
  Use(w_desc.value, "filter", call);
  Use(conv.value, "convolution", call);
  const auto filter = filters_.find(w_desc.value);
  const auto geometry = convs_.find(conv.value);
  const auto xt = tensors_.find(x_desc.value);
  const auto yt = tensors_.find(y_desc.value);
  if (filter == filters_.end() || geometry == convs_.end() || xt == tensors_.end() ||
      yt == tensors_.end()) {
    return;
  }
  const auto [k, c, r, s] = filter->second;
  Span(w, static_cast<size_t>(k) * c * r * s * sizeof(float), call + " (weights)");
  const ConvGeometry& g = geometry->second;
  const TensorLayout& in = xt->second;
  const TensorLayout& out = yt->second;
  const int out_h = (in.h + 2 * g.pad_h - g.dilation_h * (r - 1) - 1) / g.stride_h + 1;
  const int out_w = (in.w + 2 * g.pad_w - g.dilation_w * (s - 1) - 1) / g.stride_w + 1;
  if (in.c != c * g.groups || out.c != k || out.n != in.n || out.h != out_h || out.w != out_w) {
    Violation(call + ": input, filter and output shapes do not agree");
  }
}

Status RecordingApi::FindConvolutionAlgorithms(DnnHandle handle, TensorDesc x_desc, const void* x,
                                               FilterDesc w_desc, const void* w, ConvDesc conv,
                                               TensorDesc y_desc, void* y, void* workspace,
                                               size_t workspace_bytes,
                                               std::vector<AlgoResult>& results) {
  const std::string call = "cudnnFindConvolutionForwardAlgorithmEx";
  if (Status s = Enter(call); !s.ok()) return s;
  OutsideRegions(call);
  Use(handle.value, "cudnn handle", call);
  CheckConvolution(call, x_desc, x, w_desc, w, conv, y_desc, y);
  if (workspace_bytes > 0) Span(workspace, workspace_bytes, call + " (workspace)");
  ++journal_->finds;
  results = journal_->algorithms;
  return Ok();
}

Status RecordingApi::HeuristicConvolutionAlgorithms(DnnHandle handle, TensorDesc x_desc,
                                                    FilterDesc w_desc, ConvDesc conv,
                                                    TensorDesc y_desc,
                                                    std::vector<AlgoResult>& results) {
  const std::string call = "cudnnGetConvolutionForwardAlgorithm_v7";
  if (Status s = Enter(call); !s.ok()) return s;
  OutsideRegions(call);
  Use(handle.value, "cudnn handle", call);
  Use(x_desc.value, "tensor", call);
  Use(w_desc.value, "filter", call);
  Use(conv.value, "convolution", call);
  Use(y_desc.value, "tensor", call);
  results = journal_->algorithms;
  return Ok();
}

Status RecordingApi::ConvolutionForward(DnnHandle handle, TensorDesc x_desc, const void* x,
                                        FilterDesc w_desc, const void* w, ConvDesc conv, int algo,
                                        void* workspace, size_t workspace_bytes, TensorDesc y_desc,
                                        void* y) {
  const std::string call = "cudnnConvolutionForward";
  CheckConvolution(call, x_desc, x, w_desc, w, conv, y_desc, y);
  if (workspace_bytes > 0) Span(workspace, workspace_bytes, call + " (workspace)");
  CheckAlgorithm(call, algo, workspace_bytes);
  return Op(call, handle, algo, x, y);
}

Status RecordingApi::ConvolutionBiasRelu(DnnHandle handle, TensorDesc x_desc, const void* x,
                                         FilterDesc w_desc, const void* w, ConvDesc conv, int algo,
                                         void* workspace, size_t workspace_bytes,
                                         TensorDesc bias_desc, const void* bias,
                                         ActivationDesc relu, TensorDesc y_desc, void* y) {
  const std::string call = "cudnnConvolutionBiasActivationForward";
  CheckConvolution(call, x_desc, x, w_desc, w, conv, y_desc, y);
  if (workspace_bytes > 0) Span(workspace, workspace_bytes, call + " (workspace)");
  Extent(bias, bias_desc, call + " (bias)");
  Use(relu.value, "activation", call);
  CheckAlgorithm(call, algo, workspace_bytes);
  if (journal_->unfusable_algorithms.count(algo) > 0) {
    if (Status s = Enter(call); !s.ok()) return s;
    ++journal_->fusion_refusals;
    return {Code::kUnsupported, call, "CUDNN_STATUS_NOT_SUPPORTED (recorded)"};
  }
  return Op(call, handle, algo, x, y);
}

void RecordingApi::CheckAlgorithm(const std::string& call, int algo, size_t workspace_bytes) {
  for (const AlgoResult& result : journal_->algorithms) {
    if (result.algo != algo) continue;
    if (result.status != Code::kOk) Violation(call + " with an algorithm whose status failed");
    if (result.workspace_bytes > workspace_bytes) {
      Violation(call + " with less workspace than its algorithm needs");
    }
    return;
  }
  Violation(call + " with an algorithm cuDNN never reported");
}

Status RecordingApi::AddTensor(DnnHandle handle, TensorDesc a_desc, const void* a,
                               TensorDesc c_desc, void* c) {
  const std::string call = "cudnnAddTensor";
  Extent(a, a_desc, call);
  Extent(c, c_desc, call);
  const auto at = tensors_.find(a_desc.value);
  const auto ct = tensors_.find(c_desc.value);
  if (at != tensors_.end() && ct != tensors_.end()) {
    const TensorLayout& p = at->second;
    const TensorLayout& q = ct->second;
    const auto fits = [](int from, int to) { return from == to || from == 1; };
    if (!fits(p.n, q.n) || !fits(p.c, q.c) || !fits(p.h, q.h) || !fits(p.w, q.w)) {
      Violation(call + ": A is neither C's shape nor 1 where it differs");
    }
  }
  if (a == c) Violation(call + ": A is the destination");
  return Op(call, handle, -1, a, c);
}

void RecordingApi::SameShape(const std::string& call, TensorDesc a, TensorDesc b) {
  const auto x = tensors_.find(a.value);
  const auto y = tensors_.find(b.value);
  if (x == tensors_.end() || y == tensors_.end()) return;
  const TensorLayout& p = x->second;
  const TensorLayout& q = y->second;
  if (p.n != q.n || p.c != q.c || p.h != q.h || p.w != q.w) {
    Violation(call + ": tensors of different shapes");
  }
}

Status RecordingApi::ActivationForward(DnnHandle handle, ActivationDesc act, TensorDesc x_desc,
                                       const void* x, TensorDesc y_desc, void* y) {
  const std::string call = "cudnnActivationForward";
  Use(act.value, "activation", call);
  return SameShapeOp(call, handle, x_desc, x, y_desc, y);
}

Status RecordingApi::SoftmaxForward(DnnHandle handle, bool log, TensorDesc x_desc, const void* x,
                                    TensorDesc y_desc, void* y) {
  return SameShapeOp(log ? "cudnnSoftmaxForward(log)" : "cudnnSoftmaxForward", handle, x_desc, x,
                     y_desc, y);
}

Status RecordingApi::SameShapeOp(const std::string& call, DnnHandle handle, TensorDesc x_desc,
                                 const void* x, TensorDesc y_desc, const void* y) {
  Extent(x, x_desc, call);
  Extent(y, y_desc, call);
  SameShape(call, x_desc, y_desc);
  return Op(call, handle, -1, x, y);
}

Status RecordingApi::PoolingForward(DnnHandle handle, PoolingDesc pool, TensorDesc x_desc,
                                    const void* x, TensorDesc y_desc, void* y) {
  const std::string call = "cudnnPoolingForward";
  Use(pool.value, "pooling", call);
  Extent(x, x_desc, call);
  Extent(y, y_desc, call);
  const auto p = pools_.find(pool.value);
  const auto xt = tensors_.find(x_desc.value);
  const auto yt = tensors_.find(y_desc.value);
  if (p != pools_.end() && xt != tensors_.end() && yt != tensors_.end()) {
    const auto [wh, ww, ph, pw, sh, sw] = p->second;
    const TensorLayout& in = xt->second;
    const TensorLayout& out = yt->second;
    if (out.n != in.n || out.c != in.c || out.h != (in.h + 2 * ph - wh) / sh + 1 ||
        out.w != (in.w + 2 * pw - ww) / sw + 1) {
      Violation(call + ": the output is not the pooled input's shape");
    }
  }
  return Op(call, handle);
}

Status RecordingApi::OpTensor(DnnHandle handle, OpTensorDesc op, TensorDesc a_desc, const void* a,
                              TensorDesc b_desc, const void* b, TensorDesc c_desc, void* c) {
  const std::string call = "cudnnOpTensor";
  Use(op.value, "op tensor", call);
  Extent(a, a_desc, call);
  Extent(b, b_desc, call);
  Extent(c, c_desc, call);
  SameShape(call, a_desc, c_desc);
  // cuDNN broadcasts B where its height and width are 1 (never A).
  const auto b_it = tensors_.find(b_desc.value);
  const bool b_broadcast = b_it != tensors_.end() && b_it->second.h == 1 && b_it->second.w == 1;
  const auto c_it = tensors_.find(c_desc.value);
  if (!b_broadcast) {
    SameShape(call, b_desc, c_desc);
  } else if (c_it != tensors_.end() &&
             (b_it->second.n != c_it->second.n || b_it->second.c != c_it->second.c)) {
    Violation(call + ": a broadcast B of other batch or channels than C");
  }
  if (c == b && c != a)
    Violation(call + ": the output is the second input (only C == A may alias)");
  return Op(call, handle);
}

Status RecordingApi::CopyStrided(Stream stream, float* dst, int64_t dst_stride, const float* src,
                                 int64_t src_stride, int64_t count, int batch, bool accumulate) {
  return StridedKernel(accumulate ? "CopyStrided(accumulate)" : "CopyStrided", stream, dst,
                       dst_stride, src, src_stride, count, batch);
}

Status RecordingApi::StridedKernel(const std::string& call, Stream stream, const float* dst,
                                   int64_t dst_stride, const float* src, int64_t src_stride,
                                   int64_t count, int batch) {
  if (Status s = Enter(call); !s.ok()) return s;
  const size_t dst_bytes = static_cast<size_t>((batch - 1) * dst_stride + count) * sizeof(float);
  const size_t src_bytes = static_cast<size_t>((batch - 1) * src_stride + count) * sizeof(float);
  Span(dst, dst_bytes, call + " (destination)");
  Span(src, src_bytes, call + " (source)");
  Work(stream.value, call);
  journal_->ops.push_back({call, nullptr, stream.value, -1});
  Trace(call, stream.value, nullptr, src, dst);
  return Ok();
}

Status RecordingApi::ActivateStrided(Stream stream, ActivationMode mode, float* dst,
                                     int64_t dst_stride, const float* src, int64_t src_stride,
                                     int64_t count, int batch) {
  if (!OnlyOurKernelComputes(mode)) Violation("ActivateStrided for an activation cuDNN has");
  return StridedKernel("ActivateStrided", stream, dst, dst_stride, src, src_stride, count, batch);
}

Status RecordingApi::MaxPool(Stream stream, const MaxPoolShape& g, const float* src, float* dst) {
  const std::string call = "MaxPool";
  if (Status s = Enter(call); !s.ok()) return s;
  const int64_t in_plane = int64_t{g.in_h} * g.in_w, out_plane = int64_t{g.out_h} * g.out_w;
  Span(src,
       static_cast<size_t>((g.batch - 1) * g.src_batch_stride + g.channels * in_plane) *
           sizeof(float),
       call + " (source)");
  Span(dst,
       static_cast<size_t>((g.batch - 1) * g.dst_batch_stride + g.channels * out_plane) *
           sizeof(float),
       call + " (destination)");
  // Every window must start inside the input or its left padding.
  if ((g.out_h - 1) * g.stride_h - g.pad_h >= g.in_h ||
      (g.out_w - 1) * g.stride_w - g.pad_w >= g.in_w) {
    Violation(call + ": a window starts past the input");
  }
  Work(stream.value, call);
  journal_->ops.push_back({call, nullptr, stream.value, -1});
  Trace(call, stream.value, nullptr, src, dst);
  return Ok();
}

}  // namespace ios::cuda::testing
