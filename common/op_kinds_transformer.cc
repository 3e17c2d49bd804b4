#include "common/op_kinds_transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"

namespace ios::op_kinds_detail {
namespace {

int64_t Tokens(const Shape& s) { return int64_t{s.h} * s.w; }

}  // namespace

Shape AttentionShape(const RegisteredOp& op, const Shape& input, const std::string& where) {
  const int heads = op.attributes.at(0);
  if (input.c % 3 != 0) {
    throw Error(where + ": attention reads queries, keys and values stacked: " +
                std::to_string(input.c) + " input channels are not 3 x C");
  }
  const int channels = input.c / 3;
  if (heads < 1 || channels % heads != 0) {
    throw Error(where + ": heads: " + std::to_string(heads) + " does not divide the " +
                std::to_string(channels) + " channels of the queries");
  }
  return {channels, input.h, input.w};
}

std::string DescribeAttention(const RegisteredOp& op) {
  const int heads = op.attributes.at(0);
  return "attention (" + std::to_string(heads) + (heads == 1 ? " head)" : " heads)");
}

void AttentionReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                        const KindWeightValues&) {
  const int heads = op.attributes.at(0);
  const size_t channels = static_cast<size_t>(input.c) / 3;
  const size_t depth = channels / static_cast<size_t>(heads);
  const auto tokens = static_cast<size_t>(Tokens(input));
  const float* queries = in;
  const float* keys = in + channels * tokens;
  const float* values = in + 2 * channels * tokens;
  const double scale = 1 / std::sqrt(static_cast<double>(depth));
  std::vector<double> p(tokens);
  for (size_t head = 0; head < static_cast<size_t>(heads); ++head) {
    const size_t first = head * depth;
    for (size_t i = 0; i < tokens; ++i) {
      double largest = -std::numeric_limits<double>::infinity();
      for (size_t t = 0; t < tokens; ++t) {
        double dot = 0;
        for (size_t k = first; k < first + depth; ++k) {
          dot += double{queries[k * tokens + i]} * keys[k * tokens + t];
        }
        p[t] = dot * scale;
        largest = std::max(largest, p[t]);
      }
      double sum = 0;
      for (double& x : p) sum += x = std::exp(x - largest);
      for (size_t j = first; j < first + depth; ++j) {
        double acc = 0;
        for (size_t t = 0; t < tokens; ++t) acc += p[t] * values[j * tokens + t];
        out[j * tokens + i] = static_cast<float>(acc / sum);
      }
    }
  }
}

double AttentionFlops(const RegisteredOp&, const Shape& input) {
  // q.k for every pair of tokens and the weighted sum of values: 2 C L^2
  // multiply-adds; the softmax's exponentials are heads x L^2, negligible.
  const double tokens = static_cast<double>(Tokens(input));
  return 4.0 * (input.c / 3) * tokens * tokens;
}

Shape EmbedTokensShape(const RegisteredOp& op, const Shape& input, const std::string& where) {
  const int64_t tokens = Tokens(input) + op.attributes.at(0);
  if (tokens > std::numeric_limits<int>::max() / std::max(1, input.c)) {
    throw Error(where + ": embed_tokens of " + std::to_string(input.c) + "x" +
                std::to_string(input.h) + "x" + std::to_string(input.w) +
                " has more than 2^31 values");
  }
  return {input.c, static_cast<int>(tokens), 1};
}

std::string DescribeEmbedTokens(const RegisteredOp& op) {
  return op.attributes.at(0) != 0 ? "class token and position embedding" : "position embedding";
}

void EmbedTokensReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                          const KindWeightValues& weights) {
  const bool class_token = op.attributes.at(0) != 0;
  const auto pixels = static_cast<size_t>(Tokens(input));
  const size_t tokens = pixels + (class_token ? 1 : 0);
  const float* position = weights.kernel.data();
  for (size_t c = 0; c < static_cast<size_t>(input.c); ++c) {
    const float* row = position + c * tokens;
    float* to = out + c * tokens;
    if (class_token) *to++ = weights.bias[c] + *row++;
    for (size_t t = 0; t < pixels; ++t) to[t] = in[c * pixels + t] + row[t];
  }
}

KindWeightShape EmbedTokensWeights(const RegisteredOp& op, const Shape& input) {
  const bool class_token = op.attributes.at(0) != 0;
  return {.out_channels = input.c,
          .in_per_group = 1,
          .kernel_h = static_cast<int>(Tokens(input) + (class_token ? 1 : 0)),
          .kernel_w = 1,
          .bias = class_token};
}

double WindowAttentionScale(const RegisteredOp& op, int64_t depth) {
  const float scale = FloatOfBits(op.attributes.at(4));
  return scale != 0 ? double{scale} : 1 / std::sqrt(static_cast<double>(depth));
}

Shape WindowAttentionShape(const RegisteredOp& op, const Shape& input, const std::string& where) {
  const int window = op.attributes.at(1), shift = op.attributes.at(2);
  const Shape out = AttentionShape(op, input, where);
  if (op.attributes.at(3) != 0 && shift != 0) {
    throw Error(where + ": shift: " + std::to_string(shift) +
                " with grid=1: a grid's windows are not shifted");
  }
  if (window < 1 || input.h % window != 0 || input.w % window != 0) {
    throw Error(where + ": window: " + std::to_string(window) + " does not divide the " +
                std::to_string(input.h) + "x" + std::to_string(input.w) + " map");
  }
  if (shift < 0 || shift >= window) {
    throw Error(where + ": shift: " + std::to_string(shift) + " is not below the window " +
                std::to_string(window));
  }
  return out;
}

std::string DescribeWindowAttention(const RegisteredOp& op) {
  const int heads = op.attributes.at(0), window = op.attributes.at(1), shift = op.attributes.at(2);
  const bool grid = op.attributes.at(3) != 0;
  return std::string(grid ? "grid" : "window") + " attention (" + std::to_string(heads) +
         (heads == 1 ? " head" : " heads") + ", " + std::to_string(window) + "x" +
         std::to_string(window) + (grid ? " grid" : " windows") +
         (shift > 0 ? ", shifted by " + std::to_string(shift) : "") + ")";
}

int WindowRegion(int at, int extent, int window, int shift) {
  if (shift == 0 || at < extent - window) return 0;
  return at < extent - shift ? 1 : 2;
}

void WindowAttentionReference(const RegisteredOp& op, const Shape& input, const float* in,
                              float* out, const KindWeightValues& weights) {
  const int heads = op.attributes.at(0), window = op.attributes.at(1), shift = op.attributes.at(2);
  const bool grid = op.attributes.at(3) != 0;
  const size_t channels = static_cast<size_t>(input.c) / 3;
  const size_t depth = channels / static_cast<size_t>(heads);
  const auto plane = static_cast<size_t>(Tokens(input));
  const size_t size = static_cast<size_t>(window) * window;
  const float* queries = in;
  const float* keys = in + channels * plane;
  const float* values = in + 2 * channels * plane;
  const double scale = WindowAttentionScale(op, static_cast<int64_t>(depth));
  // Each window's tokens: their pixels in the unrolled map and their regions.
  std::vector<size_t> pixel(size);
  std::vector<int> region(size);
  std::vector<double> p(size);
  for (int wy = 0; wy < input.h / window; ++wy) {
    for (int wx = 0; wx < input.w / window; ++wx) {
      for (size_t t = 0; t < size; ++t) {
        const int y = wy * window + static_cast<int>(t) / window;  // in the rolled map
        const int x = wx * window + static_cast<int>(t) % window;
        pixel[t] = static_cast<size_t>((y + shift) % input.h) * input.w + (x + shift) % input.w;
        if (grid) {
          const int ty = static_cast<int>(t) / window, tx = static_cast<int>(t) % window;
          pixel[t] = static_cast<size_t>(ty * (input.h / window) + wy) * input.w +
                     tx * (input.w / window) + wx;
        }
        region[t] =
            WindowRegion(y, input.h, window, shift) * 3 + WindowRegion(x, input.w, window, shift);
      }
      for (size_t head = 0; head < static_cast<size_t>(heads); ++head) {
        const size_t first = head * depth;
        const float* bias = weights.kernel.data() + head * size * size;
        for (size_t i = 0; i < size; ++i) {
          double largest = -std::numeric_limits<double>::infinity();
          for (size_t j = 0; j < size; ++j) {
            double dot = 0;
            for (size_t k = first; k < first + depth; ++k) {
              dot += double{queries[k * plane + pixel[i]]} * keys[k * plane + pixel[j]];
            }
            p[j] = dot * scale + bias[i * size + j] + (region[i] != region[j] ? -100.0 : 0.0);
            largest = std::max(largest, p[j]);
          }
          double sum = 0;
          for (double& x : p) sum += x = std::exp(x - largest);
          for (size_t c = first; c < first + depth; ++c) {
            double acc = 0;
            for (size_t j = 0; j < size; ++j) acc += p[j] * values[c * plane + pixel[j]];
            out[c * plane + pixel[i]] = static_cast<float>(acc / sum);
          }
        }
      }
    }
  }
}

double WindowAttentionFlops(const RegisteredOp& op, const Shape& input) {
  // Every token scores and sums over its window's window^2 tokens.
  const double size = static_cast<double>(op.attributes.at(1)) * op.attributes.at(1);
  return 4.0 * (input.c / 3) * static_cast<double>(Tokens(input)) * size;
}

KindWeightShape WindowAttentionWeights(const RegisteredOp& op, const Shape&) {
  const int size = op.attributes.at(1) * op.attributes.at(1);
  return {.out_channels = op.attributes.at(0),
          .in_per_group = 1,
          .kernel_h = size,
          .kernel_w = size,
          .bias = false};
}

Shape SpaceToDepthShape(const RegisteredOp& op, const Shape& input, const std::string& where) {
  const int block = op.attributes.at(0);
  if (block < 1 || input.h % block != 0 || input.w % block != 0) {
    throw Error(where + ": block: " + std::to_string(block) + " does not divide the " +
                std::to_string(input.h) + "x" + std::to_string(input.w) + " map");
  }
  if (int64_t{input.c} * block * block > std::numeric_limits<int>::max()) {
    throw Error(where + ": space_to_depth of " + std::to_string(input.c) + " channels by " +
                std::to_string(block) + " has too many channels");
  }
  return {input.c * block * block, input.h / block, input.w / block};
}

std::string DescribeSpaceToDepth(const RegisteredOp& op) {
  const int block = op.attributes.at(0);
  return "space to depth (" + std::to_string(block) + "x" + std::to_string(block) + ")";
}

void SpaceToDepthReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                           const KindWeightValues&) {
  const int block = op.attributes.at(0);
  const int oh = input.h / block, ow = input.w / block;
  for (int dx = 0; dx < block; ++dx) {
    for (int dy = 0; dy < block; ++dy) {
      for (int c = 0; c < input.c; ++c) {
        const size_t to = static_cast<size_t>((dx * block + dy) * input.c + c) * oh * ow;
        for (int y = 0; y < oh; ++y) {
          for (int x = 0; x < ow; ++x) {
            out[to + static_cast<size_t>(y) * ow + x] =
                in[(static_cast<size_t>(c) * input.h + block * y + dy) * input.w + block * x + dx];
          }
        }
      }
    }
  }
}

}  // namespace ios::op_kinds_detail
