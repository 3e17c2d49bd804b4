// The recording fake's transformer kernels (recording_api.h): attention
// and embed_tokens checked, recorded and, when the journal computes,
// computed on the host as our kernels (cuda_kernels.cu) compute them, so
// that a program run on the fake is compared with the reference device.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/devices/cuda/recording_api.h"

namespace ios::cuda::testing {

namespace {

// The kernel's keys per tile (cuda_kernels.cu, kAttentionThreads): the
// softmax's running max and sums are rescaled between tiles as there.
constexpr int64_t kKeyTile = 128;

}  // namespace

// In float, as the kernel: the query scaled first, scores by fused
// multiply-adds, the softmax online over tiles of keys. Only the order of
// each tile's sums differs (the GPU's are trees of shuffles).
Status RecordingApi::AttentionStrided(Stream stream, const AttentionShape& g, const float* src,
                                      float* dst) {
  const std::string call = "AttentionStrided";
  if (Status s = Enter(call); !s.ok()) return s;
  NotComputed(call);
  const int64_t tokens = g.tokens;
  const int64_t in_sample = 3 * int64_t{g.channels} * tokens;
  const int64_t out_sample = int64_t{g.channels} * tokens;
  if (g.batch < 1 || g.channels < 1 || tokens < 1 || g.heads < 1 || g.channels % g.heads != 0 ||
      g.src_batch_stride < in_sample || g.dst_batch_stride < out_sample) {
    Violation(call + ": empty, heads that do not divide the channels, or samples that overlap");
    return Ok();
  }
  if (g.channels / g.heads > kMaxAttentionHeadChannels) {
    Violation(call + ": heads of more channels than the kernel takes");
  }
  const auto span = [&](int64_t stride, int64_t sample) {
    return static_cast<size_t>((g.batch - 1) * stride + sample) * sizeof(float);
  };
  Span(src, span(g.src_batch_stride, in_sample), call + " (source)");
  Span(dst, span(g.dst_batch_stride, out_sample), call + " (destination)");
  Work(stream.value, call);
  journal_->ops.push_back({call, nullptr, stream.value, -1});
  Trace(call, stream.value, nullptr, src, dst);
  journal_->attentions.push_back({g});
  const auto* from = reinterpret_cast<const float*>(Held(src, span(g.src_batch_stride, in_sample)));
  auto* to = reinterpret_cast<float*>(Held(dst, span(g.dst_batch_stride, out_sample)));
  if (capturing_ || from == nullptr || to == nullptr) return Ok();
  const int depth = g.channels / g.heads;
  const auto scale = static_cast<float>(1 / std::sqrt(static_cast<double>(depth)));
  std::vector<float> query(static_cast<size_t>(depth)), sums(query.size());
  std::vector<float> weights(kKeyTile);
  for (int n = 0; n < g.batch; ++n) {
    for (int head = 0; head < g.heads; ++head) {
      const int64_t first = int64_t{head} * depth * tokens;
      const float* q = from + n * g.src_batch_stride + first;
      const float* k = q + out_sample;
      const float* v = k + out_sample;
      float* out = to + n * g.dst_batch_stride + first;
      for (int64_t i = 0; i < tokens; ++i) {
        for (int c = 0; c < depth; ++c) query[c] = q[c * tokens + i] * scale;
        std::fill(sums.begin(), sums.end(), 0.0f);
        float largest = -std::numeric_limits<float>::infinity(), total = 0;
        for (int64_t tile = 0; tile < tokens; tile += kKeyTile) {
          const int64_t count = std::min(tokens - tile, kKeyTile);
          float tile_largest = -std::numeric_limits<float>::infinity();
          for (int64_t u = 0; u < count; ++u) {
            float score = 0;
            for (int c = 0; c < depth; ++c)
              score = std::fma(query[c], k[c * tokens + tile + u], score);
            weights[u] = score;
            tile_largest = std::max(tile_largest, score);
          }
          const float raised = std::max(largest, tile_largest);
          float tile_total = 0;
          for (int64_t u = 0; u < count; ++u)
            tile_total += weights[u] = std::exp(weights[u] - raised);
          const float rescale = std::exp(largest - raised);
          total = total * rescale + tile_total;
          largest = raised;
          for (int j = 0; j < depth; ++j) {
            const float* row = v + j * tokens + tile;
            float part = 0;
            for (int64_t u = 0; u < count; ++u) part = std::fma(weights[u], row[u], part);
            sums[j] = sums[j] * rescale + part;
          }
        }
        for (int j = 0; j < depth; ++j) out[j * tokens + i] = sums[j] / total;
      }
    }
  }
  return Ok();
}

Status RecordingApi::EmbedTokensStrided(Stream stream, const EmbedTokensShape& g, const float* src,
                                        const float* position, const float* class_token,
                                        float* dst) {
  const std::string call = "EmbedTokensStrided";
  if (Status s = Enter(call); !s.ok()) return s;
  NotComputed(call);
  const int64_t tokens = g.tokens();
  const int64_t in_sample = int64_t{g.channels} * g.pixels;
  const int64_t out_sample = int64_t{g.channels} * tokens;
  if (g.batch < 1 || g.channels < 1 || g.pixels < 1 || g.src_batch_stride < in_sample ||
      g.dst_batch_stride < out_sample) {
    Violation(call + ": empty, or samples that overlap");
    return Ok();
  }
  if (g.class_token != (class_token != nullptr)) {
    Violation(call + ": class token values " + (g.class_token ? "missing" : "without one"));
  }
  const auto span = [&](int64_t stride, int64_t sample) {
    return static_cast<size_t>((g.batch - 1) * stride + sample) * sizeof(float);
  };
  const size_t position_bytes = static_cast<size_t>(out_sample) * sizeof(float);
  const size_t class_bytes = static_cast<size_t>(g.channels) * sizeof(float);
  Span(src, span(g.src_batch_stride, in_sample), call + " (source)");
  Span(dst, span(g.dst_batch_stride, out_sample), call + " (destination)");
  Span(position, position_bytes, call + " (position embedding)");
  if (class_token != nullptr) Span(class_token, class_bytes, call + " (class token)");
  Work(stream.value, call);
  journal_->ops.push_back({call, nullptr, stream.value, -1});
  Trace(call, stream.value, nullptr, src, dst);
  journal_->embeds.push_back({g, position, class_token});
  const auto* from = reinterpret_cast<const float*>(Held(src, span(g.src_batch_stride, in_sample)));
  const auto* added = reinterpret_cast<const float*>(Held(position, position_bytes));
  const auto* first = g.class_token && class_token != nullptr
                          ? reinterpret_cast<const float*>(Held(class_token, class_bytes))
                          : nullptr;
  auto* to = reinterpret_cast<float*>(Held(dst, span(g.dst_batch_stride, out_sample)));
  if (capturing_ || from == nullptr || added == nullptr || to == nullptr ||
      (g.class_token && first == nullptr)) {
    return Ok();
  }
  const int64_t skip = tokens - g.pixels;
  for (int n = 0; n < g.batch; ++n) {
    for (int64_t c = 0; c < g.channels; ++c) {
      for (int64_t t = 0; t < tokens; ++t) {
        const float token =
            t < skip ? first[c] : from[n * g.src_batch_stride + c * g.pixels + t - skip];
        to[n * g.dst_batch_stride + c * tokens + t] = token + added[c * tokens + t];
      }
    }
  }
  return Ok();
}

}  // namespace ios::cuda::testing
