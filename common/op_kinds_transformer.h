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

// ---- window_attention(heads, window, shift) ---------------------------------------
// Swin's shifted-window attention of one sample: the input's 3C channels are
// queries, keys and values as for attention, H and W multiples of `window`.
// The map, rolled up and left by `shift` (torch.roll by -shift), is cut into
// window x window windows; each window's window^2 pixels attend to each
// other only. Token i of a window (row-major inside it) scores token j by
// q_i . k_j / sqrt(d) + bias[head, i, j], and, when shift > 0, -100 more
// where i and j lie in different regions of the rolled map (rows cut at
// H - window and H - shift, columns at W - window and W - shift: Swin's mask, so that
// pixels the roll brought together from opposite edges do not attend to
// each other). Each output goes back to its pixel's place before the roll.
// With grid=1 (MaxViT's grid attention, never shifted) a "window" is
// instead the window x window pixels spread evenly over the map: window
// (gy, gx) holds pixels (ty * H/window + gy, tx * W/window + gx), token
// (ty, tx) in row-major order, so there are H/window x W/window of them.
// `scale`, when not 0, replaces the 1/sqrt(d) (MaxViT divides by sqrt(C)).
// Weights: `kernel` the relative position bias, heads x window^2 x
// window^2 (ConvWeights' out_channels heads, kernel_h = kernel_w = window^2).

inline constexpr OpAttribute kWindowAttentionAttributes[] = {
    {"heads", 1, 1, 1 << 16, "the number of heads (a divisor of the channels / 3)"},
    {"window", 7, 1, 64, "the side of a window (dividing the height and the width)"},
    {"shift", 0, 0, 63, "how far the map is rolled up and left first (below the window)"},
    {"grid", 0, 0, 1, "1: windows of pixels spread over the map (MaxViT's grid attention)"},
    {.name = "scale",
     .default_value = FloatBits(0.0f),
     .means = "the scores' factor; 0: 1/sqrt(C/heads) (Swin's; MaxViT scales by 1/sqrt(C))",
     .is_float = true,
     .float_min = 0,
     .float_max = 1e6f},
};

//! The factor window_attention `op` multiplies its scores by, on heads of
//! `depth` channels.
double WindowAttentionScale(const RegisteredOp& op, int64_t depth);

Shape WindowAttentionShape(const RegisteredOp& op, const Shape& input, const std::string& where);
std::string DescribeWindowAttention(const RegisteredOp& op);
void WindowAttentionReference(const RegisteredOp& op, const Shape& input, const float* in,
                              float* out, const KindWeightValues& weights);
double WindowAttentionFlops(const RegisteredOp& op, const Shape& input);
KindWeightShape WindowAttentionWeights(const RegisteredOp& op, const Shape& input);

//! Swin's mask region of row (or column) `at` of a rolled map of `extent`:
//! 0 before extent - window, 1 before extent - shift, 2 after (0 without shift).
int WindowRegion(int at, int extent, int window, int shift);

// ---- space_to_depth(block) ---------------------------------------------------------
// Swin's patch merging before its norm and linear layer: every block x block
// square of pixels becomes one pixel of block^2 x C channels. Output channel
// (dx * block + dy) * C + c is input channel c at (block * y + dy, block * x
// + dx): the order of torchvision's concatenation of x[0::2, 0::2],
// x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2]. H and W multiples of block.

inline constexpr OpAttribute kSpaceToDepthAttributes[] = {
    {"block", 2, 1, 64, "the side of the squares that become one pixel"},
};

Shape SpaceToDepthShape(const RegisteredOp& op, const Shape& input, const std::string& where);
std::string DescribeSpaceToDepth(const RegisteredOp& op);
void SpaceToDepthReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                           const KindWeightValues& weights);

}  // namespace ios::op_kinds_detail
