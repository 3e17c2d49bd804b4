// The recording fake's transformer kernels (recording_api.h): attention,
// embed_tokens, window attention and space_to_depth checked, recorded and,
// when the journal computes, computed on the host as our kernels
// (cuda_kernels.cu) compute them, so that a program run on the fake is
// compared with the reference device.
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

// One query of one head as AttentionKernel computes it, in float: the
// query (`depth` floats, scaled) scores the keys at `pixels` of the key
// planes `k` (plane after plane, `plane` floats each) by fused
// multiply-adds plus `added`, the softmax online over tiles of keys; the
// weighted sums of the values `v` at those pixels go to out[j * plane +
// at]. Only the order of each tile's sums differs (the GPU's are trees of
// shuffles).
void Attend(const std::vector<float>& query, const float* k, const float* v, int64_t plane,
            const std::vector<int64_t>& pixels, const std::vector<float>& added, float* out,
            int64_t at) {
  const auto depth = static_cast<int64_t>(query.size());
  const auto keys = static_cast<int64_t>(pixels.size());
  std::vector<float> sums(query.size()), weights(kKeyTile);
  float largest = -std::numeric_limits<float>::infinity(), total = 0;
  for (int64_t tile = 0; tile < keys; tile += kKeyTile) {
    const int64_t count = std::min(keys - tile, kKeyTile);
    float tile_largest = -std::numeric_limits<float>::infinity();
    for (int64_t u = 0; u < count; ++u) {
      const int64_t pixel = pixels[tile + u];
      float score = 0;
      for (int64_t c = 0; c < depth; ++c) score = std::fma(query[c], k[c * plane + pixel], score);
      weights[u] = score += added[tile + u];
      tile_largest = std::max(tile_largest, score);
    }
    const float raised = std::max(largest, tile_largest);
    float tile_total = 0;
    for (int64_t u = 0; u < count; ++u) tile_total += weights[u] = std::exp(weights[u] - raised);
    const float rescale = std::exp(largest - raised);
    total = total * rescale + tile_total;
    largest = raised;
    for (int64_t j = 0; j < depth; ++j) {
      float part = 0;
      for (int64_t u = 0; u < count; ++u) {
        part = std::fma(weights[u], v[j * plane + pixels[tile + u]], part);
      }
      sums[j] = sums[j] * rescale + part;
    }
  }
  for (int64_t j = 0; j < depth; ++j) out[j * plane + at] = sums[j] / total;
}

// common/op_kinds_transformer.cc's WindowRegion, as the kernel has it.
int Region(int at, int extent, int window, int shift) {
  if (shift == 0 || at < extent - window) return 0;
  return at < extent - shift ? 1 : 2;
}

}  // namespace

// Every token a key of every query, nothing added to the scores (the
// kernel's EveryToken).
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
  std::vector<float> query(static_cast<size_t>(depth));
  std::vector<int64_t> pixels(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) pixels[t] = t;
  const std::vector<float> added(pixels.size(), 0.0f);
  for (int n = 0; n < g.batch; ++n) {
    for (int head = 0; head < g.heads; ++head) {
      const int64_t first = int64_t{head} * depth * tokens;
      const float* q = from + n * g.src_batch_stride + first;
      const float* k = q + out_sample;
      const float* v = k + out_sample;
      float* out = to + n * g.dst_batch_stride + first;
      for (int64_t i = 0; i < tokens; ++i) {
        for (int c = 0; c < depth; ++c) query[c] = q[c * tokens + i] * scale;
        Attend(query, k, v, tokens, pixels, added, out, i);
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

// Attend over each window of the rolled map (or of MaxViT's grid), its
// keys' pixels found through the roll and their added terms the bias plus
// Swin's mask, as the kernel's WindowTokens gives them.
Status RecordingApi::WindowAttentionStrided(Stream stream, const WindowAttentionShape& g,
                                            const float* src, const float* bias, float* dst) {
  const std::string call = "WindowAttentionStrided";
  if (Status s = Enter(call); !s.ok()) return s;
  NotComputed(call);
  const int64_t tokens = g.tokens();
  const int64_t in_sample = 3 * int64_t{g.channels} * tokens;
  const int64_t out_sample = int64_t{g.channels} * tokens;
  if (g.batch < 1 || g.channels < 1 || tokens < 1 || g.heads < 1 || g.channels % g.heads != 0 ||
      g.src_batch_stride < in_sample || g.dst_batch_stride < out_sample) {
    Violation(call + ": empty, heads that do not divide the channels, or samples that overlap");
    return Ok();
  }
  if (g.window < 1 || g.height % g.window != 0 || g.width % g.window != 0 || g.shift < 0 ||
      g.shift >= g.window || (g.grid && g.shift != 0) || bias == nullptr) {
    Violation(call +
              ": a window that does not divide the map, a shift not below it (or any with a "
              "grid), or no bias");
    return Ok();
  }
  if (g.channels / g.heads > kMaxAttentionHeadChannels) {
    Violation(call + ": heads of more channels than the kernel takes");
  }
  const auto span = [&](int64_t stride, int64_t sample) {
    return static_cast<size_t>((g.batch - 1) * stride + sample) * sizeof(float);
  };
  const int64_t size = int64_t{g.window} * g.window;
  const size_t bias_bytes = static_cast<size_t>(g.heads * size * size) * sizeof(float);
  Span(src, span(g.src_batch_stride, in_sample), call + " (source)");
  Span(dst, span(g.dst_batch_stride, out_sample), call + " (destination)");
  Span(bias, bias_bytes, call + " (bias)");
  Work(stream.value, call);
  journal_->ops.push_back({call, nullptr, stream.value, -1});
  Trace(call, stream.value, nullptr, src, dst);
  journal_->window_attentions.push_back({g, bias});
  const auto* from = reinterpret_cast<const float*>(Held(src, span(g.src_batch_stride, in_sample)));
  const auto* table = reinterpret_cast<const float*>(Held(bias, bias_bytes));
  auto* to = reinterpret_cast<float*>(Held(dst, span(g.dst_batch_stride, out_sample)));
  if (capturing_ || from == nullptr || table == nullptr || to == nullptr) return Ok();
  const int depth = g.channels / g.heads;
  const auto scale =
      g.scale != 0 ? g.scale : static_cast<float>(1 / std::sqrt(static_cast<double>(depth)));
  const auto unrolled = [&](int y, int x) {
    return int64_t{(y + g.shift) % g.height} * g.width + (x + g.shift) % g.width;
  };
  const auto region = [&](int y, int x) {
    return Region(y, g.height, g.window, g.shift) * 3 + Region(x, g.width, g.window, g.shift);
  };
  const int row_step = g.grid ? g.height / g.window : 1;  // between a window's tokens
  const int column_step = g.grid ? g.width / g.window : 1;
  std::vector<float> query(static_cast<size_t>(depth)), added(static_cast<size_t>(size));
  std::vector<int64_t> pixels(added.size());
  for (int n = 0; n < g.batch; ++n) {
    for (int head = 0; head < g.heads; ++head) {
      const int64_t first = int64_t{head} * depth * tokens;
      const float* q = from + n * g.src_batch_stride + first;
      const float* k = q + out_sample;
      const float* v = k + out_sample;
      float* out = to + n * g.dst_batch_stride + first;
      for (int y = 0; y < g.height; ++y) {  // the rolled map's
        for (int x = 0; x < g.width; ++x) {
          // Swin: window (y / window, x / window), token (y % window, x %
          // window); grid: window (y % row_step, x % column_step), token (y /
          // row_step, x / column_step), its tokens step rows and columns apart.
          const int top = g.grid ? y % row_step : y - y % g.window;
          const int left = g.grid ? x % column_step : x - x % g.window;
          const int64_t index = g.grid ? int64_t{y / row_step} * g.window + x / column_step
                                       : int64_t{y % g.window} * g.window + x % g.window;
          const float* row = table + (head * size + index) * size;
          for (int64_t t = 0; t < size; ++t) {
            const int ky = top + static_cast<int>(t) / g.window * row_step;
            const int kx = left + static_cast<int>(t) % g.window * column_step;
            pixels[t] = unrolled(ky, kx);
            added[t] = row[t];
            if (region(ky, kx) != region(y, x)) added[t] -= 100.0f;
          }
          const int64_t at = unrolled(y, x);
          for (int c = 0; c < depth; ++c) query[c] = q[c * tokens + at] * scale;
          Attend(query, k, v, tokens, pixels, added, out, at);
        }
      }
    }
  }
  return Ok();
}

// A copy: exactly the input's values.
Status RecordingApi::SpaceToDepthStrided(Stream stream, const SpaceToDepthShape& g,
                                         const float* src, float* dst) {
  const std::string call = "SpaceToDepthStrided";
  if (Status s = Enter(call); !s.ok()) return s;
  NotComputed(call);
  const int64_t sample = g.values();
  if (g.batch < 1 || sample < 1 || g.block < 1 || g.height % g.block != 0 ||
      g.width % g.block != 0 || g.src_batch_stride < sample || g.dst_batch_stride < sample) {
    Violation(call + ": empty, a block that does not divide the map, or samples that overlap");
    return Ok();
  }
  const auto span = [&](int64_t stride) {
    return static_cast<size_t>((g.batch - 1) * stride + sample) * sizeof(float);
  };
  Span(src, span(g.src_batch_stride), call + " (source)");
  Span(dst, span(g.dst_batch_stride), call + " (destination)");
  Work(stream.value, call);
  journal_->ops.push_back({call, nullptr, stream.value, -1});
  Trace(call, stream.value, nullptr, src, dst);
  journal_->space_to_depths.push_back({g});
  const auto* from = reinterpret_cast<const float*>(Held(src, span(g.src_batch_stride)));
  auto* to = reinterpret_cast<float*>(Held(dst, span(g.dst_batch_stride)));
  if (capturing_ || from == nullptr || to == nullptr) return Ok();
  const int b = g.block, out_h = g.height / b, out_w = g.width / b;
  for (int n = 0; n < g.batch; ++n) {
    for (int dx = 0; dx < b; ++dx) {
      for (int dy = 0; dy < b; ++dy) {
        for (int c = 0; c < g.channels; ++c) {
          float* plane =
              to + n * g.dst_batch_stride + int64_t{(dx * b + dy) * g.channels + c} * out_h * out_w;
          const float* in = from + n * g.src_batch_stride + int64_t{c} * g.height * g.width;
          for (int y = 0; y < out_h; ++y) {
            for (int x = 0; x < out_w; ++x) {
              plane[int64_t{y} * out_w + x] = in[int64_t{b * y + dy} * g.width + b * x + dx];
            }
          }
        }
      }
    }
  }
  return Ok();
}

}  // namespace ios::cuda::testing
