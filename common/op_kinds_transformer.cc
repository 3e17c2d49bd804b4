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

}  // namespace ios::op_kinds_detail
