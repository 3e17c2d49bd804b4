// The recording fake's work calls: each enqueued operation's operands are
// checked (alive, inside a live allocation, shapes that agree) and recorded
// on its stream (recording_api.h), and, when the journal computes, the
// calls the fake can compute are computed on the host.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/activation.h"
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
  const Status status = Op(call, handle, algo, x, y);
  if (status.ok() && !capturing_) ComputeConvolution(x_desc, x, w_desc, w, conv, y_desc, y);
  return status;
}

void RecordingApi::ComputeConvolution(TensorDesc x_desc, const void* x, FilterDesc w_desc,
                                      const void* w, ConvDesc conv, TensorDesc y_desc, void* y) {
  const auto xt = tensors_.find(x_desc.value);
  const auto yt = tensors_.find(y_desc.value);
  const auto filter = filters_.find(w_desc.value);
  const auto geometry = convs_.find(conv.value);
  if (xt == tensors_.end() || yt == tensors_.end() || filter == filters_.end() ||
      geometry == convs_.end()) {
    return;
  }
  const TensorLayout &in = xt->second, &out = yt->second;
  const auto [k, c, r, s] = filter->second;
  const ConvGeometry& g = geometry->second;
  const auto extent = [](const TensorLayout& t) {
    return static_cast<size_t>((t.n - 1) * t.stride_n + (t.c - 1) * t.stride_c +
                               (t.h - 1) * t.stride_h + (t.w - 1) * t.stride_w + 1) *
           sizeof(float);
  };
  const auto* from = reinterpret_cast<const float*>(Held(x, extent(in)));
  const auto* weights =
      reinterpret_cast<const float*>(Held(w, static_cast<size_t>(k) * c * r * s * sizeof(float)));
  auto* to = reinterpret_cast<float*>(Held(y, extent(out)));
  if (from == nullptr || weights == nullptr || to == nullptr || g.groups < 1 || k % g.groups) {
    return;
  }
  const int per_group = k / g.groups;
  for (int n = 0; n < out.n; ++n) {
    for (int o = 0; o < out.c; ++o) {
      for (int oy = 0; oy < out.h; ++oy) {
        for (int ox = 0; ox < out.w; ++ox) {
          double sum = 0;
          for (int i = 0; i < c; ++i) {
            const int channel = o / per_group * c + i;
            for (int ky = 0; ky < r; ++ky) {
              const int iy = oy * g.stride_h - g.pad_h + ky * g.dilation_h;
              if (iy < 0 || iy >= in.h) continue;
              for (int kx = 0; kx < s; ++kx) {
                const int ix = ox * g.stride_w - g.pad_w + kx * g.dilation_w;
                if (ix < 0 || ix >= in.w) continue;
                sum += double{weights[((int64_t{o} * c + i) * r + ky) * s + kx]} *
                       from[n * in.stride_n + channel * in.stride_c + iy * in.stride_h +
                            ix * in.stride_w];
              }
            }
          }
          to[n * out.stride_n + o * out.stride_c + oy * out.stride_h + ox * out.stride_w] =
              static_cast<float>(sum);
        }
      }
    }
  }
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

// Work inside a capture is not run, on a GPU either: computed only outside.
Status RecordingApi::TransformTensor(DnnHandle handle, TensorDesc x_desc, const void* x,
                                     TensorDesc y_desc, void* y) {
  const std::string call = "cudnnTransformTensor";
  Extent(x, x_desc, call);
  Extent(y, y_desc, call);
  SameShape(call, x_desc, y_desc);
  const auto xt = tensors_.find(x_desc.value);
  const auto yt = tensors_.find(y_desc.value);
  if (xt == tensors_.end() || yt == tensors_.end()) return Op(call, handle, -1, x, y);
  const TensorLayout p = xt->second, q = yt->second;
  const auto bytes = [](const TensorLayout& t) {
    return static_cast<size_t>((t.n - 1) * t.stride_n + (t.c - 1) * t.stride_c +
                               (t.h - 1) * t.stride_h + (t.w - 1) * t.stride_w + 1) *
           sizeof(float);
  };
  // Every element's offset, in the order of the sizes both share.
  const auto offsets = [](const TensorLayout& t) {
    std::vector<int64_t> at;
    for (int n = 0; n < t.n; ++n) {
      for (int c = 0; c < t.c; ++c) {
        for (int h = 0; h < t.h; ++h) {
          for (int w = 0; w < t.w; ++w) {
            at.push_back(n * t.stride_n + c * t.stride_c + h * t.stride_h + w * t.stride_w);
          }
        }
      }
    }
    return at;
  };
  // Element by element: channel views of one buffer interleave at batch > 1.
  const auto x_at = reinterpret_cast<uintptr_t>(x), y_at = reinterpret_cast<uintptr_t>(y);
  if (x_at < y_at + bytes(q) && y_at < x_at + bytes(p)) {
    std::vector<uintptr_t> written;
    for (int64_t o : offsets(q)) written.push_back(y_at + o * sizeof(float));
    std::sort(written.begin(), written.end());
    for (int64_t i : offsets(p)) {
      if (std::binary_search(written.begin(), written.end(), x_at + i * sizeof(float))) {
        Violation(call + ": the output overlaps the input (cuDNN converts out of place)");
        break;
      }
    }
  }
  journal_->transforms.emplace_back(p, q);
  const Status status = Op(call, handle, -1, x, y);
  const unsigned char* from = Held(x, bytes(p));
  unsigned char* to = Held(y, bytes(q));
  const bool same = p.n == q.n && p.c == q.c && p.h == q.h && p.w == q.w;  // else a violation
  if (!status.ok() || capturing_ || !same || from == nullptr || to == nullptr) return status;
  const std::vector<int64_t> reads = offsets(p), writes = offsets(q);
  for (size_t e = 0; e < reads.size(); ++e) {
    std::memcpy(to + writes[e] * sizeof(float), from + reads[e] * sizeof(float), sizeof(float));
  }
  return status;
}

Status RecordingApi::CopyStrided(Stream stream, float* dst, int64_t dst_stride, const float* src,
                                 int64_t src_stride, int64_t count, int batch, bool accumulate) {
  const Status status = StridedKernel(accumulate ? "CopyStrided(accumulate)" : "CopyStrided",
                                      stream, dst, dst_stride, src, src_stride, count, batch);
  const auto span = [&](int64_t stride) {
    return static_cast<size_t>((batch - 1) * stride + count) * sizeof(float);
  };
  auto* to = reinterpret_cast<float*>(Held(dst, span(dst_stride)));
  const auto* from = reinterpret_cast<const float*>(Held(src, span(src_stride)));
  if (!status.ok() || capturing_ || from == nullptr || to == nullptr) return status;
  for (int n = 0; n < batch; ++n) {
    for (int64_t i = 0; i < count; ++i) {
      float& out = to[n * dst_stride + i];
      out = (accumulate ? out : 0.0f) + from[n * src_stride + i];
    }
  }
  return status;
}

unsigned char* RecordingApi::Held(const void* pointer, size_t bytes) {
  if (!journal_->compute) return nullptr;
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  auto it = memory_.upper_bound(address);
  if (it == memory_.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  if (address + bytes > it->first + a.bytes || a.held.size() != a.bytes) return nullptr;
  return a.held.data() + (address - it->first);
}

void RecordingApi::NotComputed(const std::string& call) {
  if (!journal_->compute) return;
  for (const char* computed :
       {"cudnnTransformTensor", "CopyStrided", "CopyStrided(accumulate)", "LayerNormStrided",
        "ActivateStrided", "cudnnConvolutionForward", "AttentionStrided", "EmbedTokensStrided",
        "WindowAttentionStrided", "SpaceToDepthStrided"}) {
    if (call == computed) return;
  }
  Violation(call + ": the journal computes, and the fake cannot compute this call");
}

Status RecordingApi::StridedKernel(const std::string& call, Stream stream, const float* dst,
                                   int64_t dst_stride, const float* src, int64_t src_stride,
                                   int64_t count, int batch) {
  if (Status s = Enter(call); !s.ok()) return s;
  NotComputed(call);
  const size_t dst_bytes = static_cast<size_t>((batch - 1) * dst_stride + count) * sizeof(float);
  const size_t src_bytes = static_cast<size_t>((batch - 1) * src_stride + count) * sizeof(float);
  Span(dst, dst_bytes, call + " (destination)");
  Span(src, src_bytes, call + " (source)");
  Work(stream.value, call);
  journal_->ops.push_back({call, nullptr, stream.value, -1});
  Trace(call, stream.value, nullptr, src, dst);
  return Ok();
}

// Computed as the kernel computes it (cuda_kernels.cu), in float; the
// functions without coefficients as common/activation.cc defines them.
Status RecordingApi::ActivateStrided(Stream stream, ActivationMode mode, ActivationParams params,
                                     float* dst, int64_t dst_stride, const float* src,
                                     int64_t src_stride, int64_t count, int batch) {
  if (!OnlyOurKernelComputes(mode)) Violation("ActivateStrided for an activation cuDNN has");
  const bool coefficients =
      mode == ActivationMode::kLeakyRelu || mode == ActivationMode::kHardSigmoidAlphaBeta;
  if (coefficients && !(std::isfinite(params.alpha) && std::isfinite(params.beta))) {
    Violation("ActivateStrided: coefficients that are not finite");
  }
  Status status =
      StridedKernel("ActivateStrided", stream, dst, dst_stride, src, src_stride, count, batch);
  if (!status.ok()) return status;
  journal_->kernel_activations.push_back(mode);
  journal_->kernel_activation_params.push_back(params);
  const auto span = [&](int64_t stride) {
    return static_cast<size_t>((batch - 1) * stride + count) * sizeof(float);
  };
  auto* to = reinterpret_cast<float*>(Held(dst, span(dst_stride)));
  const auto* from = reinterpret_cast<const float*>(Held(src, span(src_stride)));
  if (capturing_ || from == nullptr || to == nullptr) return status;
  const auto function = [&](float x) {
    switch (mode) {
      case ActivationMode::kLeakyRelu:
        return x > 0 ? x : params.alpha * x;
      case ActivationMode::kHardSigmoidAlphaBeta:
        return std::clamp(std::fma(params.alpha, x, params.beta), 0.0f, 1.0f);
      case ActivationMode::kHardSwish:
        return KindOf(Activation::kHardSwish).apply(x);
      case ActivationMode::kHardSigmoid:
        return KindOf(Activation::kHardSigmoid).apply(x);
      case ActivationMode::kGelu:
        return KindOf(Activation::kGelu).apply(x);
      case ActivationMode::kGeluTanh:
        return KindOf(Activation::kGeluTanh).apply(x);
      case ActivationMode::kRelu:
      case ActivationMode::kSigmoid:
      case ActivationMode::kTanh:
      case ActivationMode::kRelu6:
      case ActivationMode::kSwish:
        break;  // cuDNN's: a violation above
    }
    return std::nanf("");
  };
  for (int n = 0; n < batch; ++n) {
    for (int64_t i = 0; i < count; ++i) to[n * dst_stride + i] = function(from[n * src_stride + i]);
  }
  return status;
}

// Computed as the kernel computes it (cuda_kernels.cu): the sums in
// double, the variance the mean of squared deviations.
Status RecordingApi::LayerNormStrided(Stream stream, const LayerNormShape& g, float eps,
                                      const float* src, float* dst) {
  const std::string call = "LayerNormStrided";
  if (Status s = Enter(call); !s.ok()) return s;
  NotComputed(call);
  const int64_t sample = int64_t{g.channels} * g.pixels;
  if (g.batch < 1 || g.channels < 1 || g.pixels < 1 || g.src_batch_stride < sample ||
      g.dst_batch_stride < sample) {
    Violation(call + ": empty, or samples that overlap");
    return Ok();
  }
  if (!(eps > 0)) Violation(call + ": eps " + std::to_string(eps) + " is not positive");
  const auto span = [&](int64_t stride) {
    return static_cast<size_t>((g.batch - 1) * stride + sample) * sizeof(float);
  };
  Span(src, span(g.src_batch_stride), call + " (source)");
  Span(dst, span(g.dst_batch_stride), call + " (destination)");
  Work(stream.value, call);
  journal_->ops.push_back({call, nullptr, stream.value, -1});
  Trace(call, stream.value, nullptr, src, dst);
  journal_->layer_norms.push_back({g, eps});
  const auto* from = reinterpret_cast<const float*>(Held(src, span(g.src_batch_stride)));
  auto* to = reinterpret_cast<float*>(Held(dst, span(g.dst_batch_stride)));
  if (capturing_ || from == nullptr || to == nullptr) return Ok();
  for (int n = 0; n < g.batch; ++n) {
    for (int64_t pixel = 0; pixel < g.pixels; ++pixel) {
      const float* x = from + n * g.src_batch_stride + pixel;
      float* y = to + n * g.dst_batch_stride + pixel;
      double sum = 0;
      for (int c = 0; c < g.channels; ++c) sum += x[c * g.pixels];
      const double mean = sum / g.channels;
      double squares = 0;
      for (int c = 0; c < g.channels; ++c) {
        const double deviation = x[c * g.pixels] - mean;
        squares += deviation * deviation;
      }
      const double scale = 1 / std::sqrt(squares / g.channels + eps);
      for (int c = 0; c < g.channels; ++c) {
        y[c * g.pixels] = static_cast<float>((x[c * g.pixels] - mean) * scale);
      }
    }
  }
  return Ok();
}

Status RecordingApi::MaxPool(Stream stream, const MaxPoolShape& g, const float* src, float* dst) {
  const std::string call = "MaxPool";
  if (Status s = Enter(call); !s.ok()) return s;
  NotComputed(call);
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
