// The registered kinds a vision transformer needs (common/op_kinds.h has the
// table; this is their arithmetic, kept apart so that op_kinds.cc stays the
// table and the small kinds). A token sequence is a feature map whose pixels,
// in row-major order, are the tokens and whose channels are their features:
// ViT's [N, L, C] tokens are a C x L x 1 map (or the C x H x W map of its
// patches, before the class token), so per-token layers are the per-pixel
// operators the IR already has.
#pragma once

#include <string>

#include "common/op_kinds.h"

namespace ios::op_kinds_detail {

// ---- attention(heads) ---------------------------------------------------------
// Multi-head scaled dot-product attention of one sample: the input's 3C
// channels are the queries, keys and values (C each, in that order), its
// H*W pixels the tokens. Head h owns channels [h*d, (h+1)*d) of each, d =
// C / heads; token i's output on those channels is sum_t p(i,t) v_t with
// p(i, .) = softmax_t(q_i . k_t / sqrt(d)). Output: C x H x W. No weights:
// the projections before and after are 1x1 convolutions.

inline constexpr OpAttribute kAttentionAttributes[] = {
    {"heads", 1, 1, 1 << 16, "the number of heads (a divisor of the channels / 3)"},
};

Shape AttentionShape(const RegisteredOp& op, const Shape& input, const std::string& where);
std::string DescribeAttention(const RegisteredOp& op);
void AttentionReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                        const KindWeightValues& weights);
double AttentionFlops(const RegisteredOp& op, const Shape& input);

// ---- embed_tokens(class_token) -------------------------------------------------
// The tokens' learned embedding: with class_token=1 a learned token first,
// then the input's H*W pixels as tokens; a learned position embedding added
// to every token. Input C x H x W, output C x L x 1 with L = H*W +
// class_token. Weights: `kernel` the position embedding, C x L (channel c,
// token t at c * L + t: ConvWeights' out_channels C, kernel_h L), `bias` the
// class token's C values (class_token=1 only).

inline constexpr OpAttribute kEmbedTokensAttributes[] = {
    {"class_token", 1, 0, 1, "1: a learned class token first (ViT)"},
};

Shape EmbedTokensShape(const RegisteredOp& op, const Shape& input, const std::string& where);
std::string DescribeEmbedTokens(const RegisteredOp& op);
void EmbedTokensReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                          const KindWeightValues& weights);
KindWeightShape EmbedTokensWeights(const RegisteredOp& op, const Shape& input);

}  // namespace ios::op_kinds_detail
