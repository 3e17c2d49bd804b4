#include "common/op_kinds.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>

#include "common/error.h"
#include "common/op_kinds_transformer.h"

namespace ios {
namespace {

// ---- softmax ------------------------------------------------------------------
// Over the channels of each pixel: a classifier's last layer (ONNX Softmax
// and LogSoftmax on N x C, or on N x C x H x W along axis 1).

constexpr OpAttribute kSoftmaxAttributes[] = {
    {"log", 0, 0, 1, "1: the logarithm of the softmax (ONNX LogSoftmax)"},
};

Shape SoftmaxShape(const RegisteredOp&, const Shape& input, const std::string&) { return input; }

std::string DescribeSoftmax(const RegisteredOp& op) {
  return op.attributes.at(0) != 0 ? "logsoftmax" : "softmax";
}

void SoftmaxReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                      const KindWeightValues&) {
  const bool log = op.attributes.at(0) != 0;
  const size_t plane = static_cast<size_t>(input.h) * input.w;
  for (size_t pixel = 0; pixel < plane; ++pixel) {
    // Shifted by the largest value, so no exponential overflows.
    double largest = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < input.c; ++c) largest = std::max<double>(largest, in[c * plane + pixel]);
    double sum = 0;
    for (int c = 0; c < input.c; ++c) sum += std::exp(in[c * plane + pixel] - largest);
    for (int c = 0; c < input.c; ++c) {
      const double shifted = in[c * plane + pixel] - largest;
      out[c * plane + pixel] =
          static_cast<float>(log ? shifted - std::log(sum) : std::exp(shifted) / sum);
    }
  }
}

// ---- channel_shuffle ----------------------------------------------------------
// ShuffleNet's channel shuffle: the channels, seen as `groups` rows of C/groups,
// read column by column (PyTorch's view(N, g, C/g, H, W) -> transpose(1, 2) ->
// view(N, C, H, W)). Output channel j*g + i is input channel i*(C/g) + j.

constexpr OpAttribute kChannelShuffleAttributes[] = {
    {"groups", 2, 1, 1 << 16, "the number of channel groups (a divisor of the channels)"},
};

Shape ChannelShuffleShape(const RegisteredOp& op, const Shape& input, const std::string& where) {
  const int groups = op.attributes.at(0);
  if (groups < 1 || input.c % groups != 0) {
    throw Error(where + ": groups: " + std::to_string(groups) + " does not divide the " +
                std::to_string(input.c) + " input channels");
  }
  return input;
}

std::string DescribeChannelShuffle(const RegisteredOp& op) {
  return "channel shuffle (" + std::to_string(op.attributes.at(0)) + " groups)";
}

void ChannelShuffleReference(const RegisteredOp& op, const Shape& input, const float* in,
                             float* out, const KindWeightValues&) {
  const int groups = op.attributes.at(0);
  const int per_group = input.c / groups;
  const size_t plane = static_cast<size_t>(input.h) * input.w;
  for (int i = 0; i < groups; ++i) {
    for (int j = 0; j < per_group; ++j) {
      std::copy_n(in + static_cast<size_t>(i * per_group + j) * plane, plane,
                  out + static_cast<size_t>(j * groups + i) * plane);
    }
  }
}

// ---- layernorm ----------------------------------------------------------------
// LayerNorm over the channels of each pixel, without its affine (the
// importer folds gamma and beta into neighbouring convs): ConvNeXt's norm,
// and a transformer's over the channels of each token. The variance is the
// mean of squared deviations, as PyTorch computes it, not E[x^2] - mean^2
// (which cancels catastrophically when the mean is large).

constexpr OpAttribute kLayerNormAttributes[] = {
    {.name = "eps",
     .default_value = FloatBits(1e-5f),
     .means = "added to the variance before its square root (PyTorch's default 1e-05)",
     .is_float = true,
     .float_min = 0,
     .float_max = 1,
     .float_min_excluded = true},
};

Shape LayerNormShape(const RegisteredOp&, const Shape& input, const std::string&) { return input; }

std::string DescribeLayerNorm(const RegisteredOp& op) {
  return "layer norm over channels (eps " +
         AttributeText(kLayerNormAttributes[0], op.attributes.at(0)) + ")";
}

void LayerNormReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                        const KindWeightValues&) {
  const double eps = FloatOfBits(op.attributes.at(0));
  const size_t plane = static_cast<size_t>(input.h) * input.w;
  for (size_t pixel = 0; pixel < plane; ++pixel) {
    double sum = 0;
    for (int c = 0; c < input.c; ++c) sum += in[c * plane + pixel];
    const double mean = sum / input.c;
    double squares = 0;
    for (int c = 0; c < input.c; ++c) {
      const double deviation = in[c * plane + pixel] - mean;
      squares += deviation * deviation;
    }
    const double scale = 1 / std::sqrt(squares / input.c + eps);
    for (int c = 0; c < input.c; ++c) {
      out[c * plane + pixel] = static_cast<float>((in[c * plane + pixel] - mean) * scale);
    }
  }
}

// ---- leaky_relu, hard_sigmoid --------------------------------------------------
// ONNX's LeakyRelu and HardSigmoid with any parameters. The Activation enum's
// leakyrelu and hardsigmoid keep PyTorch's defaults only (a slope is not part
// of their stage keys, which profiling DBs hold): the importer maps other
// parameters here. Both in double, as backends are checked against them.

// Far beyond any trained model's; finite, so that no backend meets inf * 0.
constexpr float kLargestCoefficient = 1e6f;

constexpr OpAttribute kLeakyReluAttributes[] = {
    {.name = "alpha",
     .default_value = FloatBits(0.01f),
     .means = "the slope below zero (ONNX's and PyTorch's default 0.01)",
     .is_float = true,
     .float_min = -kLargestCoefficient,
     .float_max = kLargestCoefficient},
};

constexpr OpAttribute kHardSigmoidAttributes[] = {
    {.name = "alpha",
     .default_value = FloatBits(0.2f),
     .means = "the slope of alpha * x + beta before its clip to [0, 1] (ONNX's default 0.2)",
     .is_float = true,
     .float_min = -kLargestCoefficient,
     .float_max = kLargestCoefficient},
    {.name = "beta",
     .default_value = FloatBits(0.5f),
     .means = "the offset of alpha * x + beta before its clip to [0, 1] (ONNX's default 0.5)",
     .is_float = true,
     .float_min = -kLargestCoefficient,
     .float_max = kLargestCoefficient},
};

Shape SameShape(const RegisteredOp&, const Shape& input, const std::string&) { return input; }

std::string DescribeLeakyRelu(const RegisteredOp& op) {
  return "leaky relu (slope " + AttributeText(kLeakyReluAttributes[0], op.attributes.at(0)) + ")";
}

std::string DescribeHardSigmoid(const RegisteredOp& op) {
  return "hard sigmoid (alpha " + AttributeText(kHardSigmoidAttributes[0], op.attributes.at(0)) +
         ", beta " + AttributeText(kHardSigmoidAttributes[1], op.attributes.at(1)) + ")";
}

void LeakyReluReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                        const KindWeightValues&) {
  const double alpha = FloatOfBits(op.attributes.at(0));
  const size_t count = static_cast<size_t>(input.c) * input.h * input.w;
  for (size_t i = 0; i < count; ++i) {
    out[i] = static_cast<float>(in[i] >= 0 ? double{in[i]} : alpha * in[i]);
  }
}

void HardSigmoidReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                          const KindWeightValues&) {
  const double alpha = FloatOfBits(op.attributes.at(0));
  const double beta = FloatOfBits(op.attributes.at(1));
  const size_t count = static_cast<size_t>(input.c) * input.h * input.w;
  for (size_t i = 0; i < count; ++i) {
    out[i] = static_cast<float>(std::clamp(alpha * in[i] + beta, 0.0, 1.0));
  }
}

// ---- flatten ------------------------------------------------------------------
// A map as one C*H*W x 1 x 1 vector per sample, in its own channel-major
// order or pixel-major (channels_last=1: TensorFlow's NHWC order, which an
// exported TF model's outputs have after their Transpose and Reshape). The
// importer ends a network of several outputs, or of one left channels-last,
// with these, concatenated: ios-run's output is then every output in turn.

constexpr OpAttribute kFlattenAttributes[] = {
    {"channels_last", 0, 0, 1, "1: pixel by pixel, a pixel's channels together (NHWC order)"},
};

Shape FlattenShape(const RegisteredOp&, const Shape& input, const std::string& where) {
  const int64_t elements = int64_t{input.c} * input.h * input.w;
  if (elements > std::numeric_limits<int>::max()) {
    throw Error(where + ": flatten of " + std::to_string(input.c) + "x" + std::to_string(input.h) +
                "x" + std::to_string(input.w) + " has more than 2^31 values");
  }
  return {static_cast<int>(elements), 1, 1};
}

std::string DescribeFlatten(const RegisteredOp& op) {
  return op.attributes.at(0) != 0 ? "flatten, channels last" : "flatten";
}

void FlattenReference(const RegisteredOp& op, const Shape& input, const float* in, float* out,
                      const KindWeightValues&) {
  const size_t plane = static_cast<size_t>(input.h) * input.w;
  if (op.attributes.at(0) == 0) {
    std::copy_n(in, plane * input.c, out);
    return;
  }
  for (size_t pixel = 0; pixel < plane; ++pixel) {
    for (int c = 0; c < input.c; ++c) out[pixel * input.c + c] = in[c * plane + pixel];
  }
}

// In the order of the RegisteredKind enum.
constexpr OpKindSpec kSpecs[] = {
    {.kind = RegisteredKind::kSoftmax,
     .name = "softmax",
     .summary = "softmax over the channels of each pixel (log=1: its logarithm)",
     .attributes = kSoftmaxAttributes,
     .infer = SoftmaxShape,
     .describe = DescribeSoftmax,
     .reference = SoftmaxReference,
     // max, subtract, exp, sum, divide: about five per element
     .sim_flops_per_element = 5},
    {.kind = RegisteredKind::kChannelShuffle,
     .name = "channel_shuffle",
     .summary = "the channels as `groups` rows read column by column (ShuffleNet)",
     .attributes = kChannelShuffleAttributes,
     .infer = ChannelShuffleShape,
     .describe = DescribeChannelShuffle,
     .reference = ChannelShuffleReference,
     // a copy: no arithmetic, only the read and the write every kind pays
     .sim_flops_per_element = 0},
    {.kind = RegisteredKind::kLayerNorm,
     .name = "layernorm",
     .summary = "(x - mean) / sqrt(variance + eps) over the channels of each pixel, no affine",
     .attributes = kLayerNormAttributes,
     .infer = LayerNormShape,
     .describe = DescribeLayerNorm,
     .reference = LayerNormReference,
     // sum, subtract, square, sum, subtract, multiply, and the per-pixel
     // square root spread over the channels: about eight per element
     .sim_flops_per_element = 8},
    {.kind = RegisteredKind::kLeakyRelu,
     .name = "leaky_relu",
     .summary = "x, or alpha * x below zero (ONNX LeakyRelu)",
     .attributes = kLeakyReluAttributes,
     .infer = SameShape,
     .describe = DescribeLeakyRelu,
     .reference = LeakyReluReference,
     // a compare and a multiply
     .sim_flops_per_element = 1},
    {.kind = RegisteredKind::kHardSigmoid,
     .name = "hard_sigmoid",
     .summary = "max(0, min(1, alpha * x + beta)) (ONNX HardSigmoid)",
     .attributes = kHardSigmoidAttributes,
     .infer = SameShape,
     .describe = DescribeHardSigmoid,
     .reference = HardSigmoidReference,
     // a multiply-add and the clip
     .sim_flops_per_element = 2},
    {.kind = RegisteredKind::kFlatten,
     .name = "flatten",
     .summary = "the map as one C*H*W x 1 x 1 vector (channels_last=1: in NHWC order)",
     .attributes = kFlattenAttributes,
     .infer = FlattenShape,
     .describe = DescribeFlatten,
     .reference = FlattenReference,
     // a copy, as channel_shuffle
     .sim_flops_per_element = 0},
    {.kind = RegisteredKind::kAttention,
     .name = "attention",
     .summary = "multi-head scaled dot-product attention over the pixels as tokens "
                "(queries, keys and values stacked on the channels)",
     .attributes = op_kinds_detail::kAttentionAttributes,
     .infer = op_kinds_detail::AttentionShape,
     .describe = op_kinds_detail::DescribeAttention,
     .reference = op_kinds_detail::AttentionReference,
     .sim_flops = op_kinds_detail::AttentionFlops},
    {.kind = RegisteredKind::kEmbedTokens,
     .name = "embed_tokens",
     .summary = "the pixels as tokens C x L x 1, a learned class token first "
                "(class_token=1), a learned position embedding added",
     .attributes = op_kinds_detail::kEmbedTokensAttributes,
     .infer = op_kinds_detail::EmbedTokensShape,
     .describe = op_kinds_detail::DescribeEmbedTokens,
     .reference = op_kinds_detail::EmbedTokensReference,
     // one add per value
     .sim_flops_per_element = 1,
     .weights = op_kinds_detail::EmbedTokensWeights},
    {.kind = RegisteredKind::kWindowAttention,
     .name = "window_attention",
     .summary = "Swin's attention inside window x window windows of the map rolled by shift, "
                "with a relative position bias (queries, keys and values stacked on the channels)",
     .attributes = op_kinds_detail::kWindowAttentionAttributes,
     .infer = op_kinds_detail::WindowAttentionShape,
     .describe = op_kinds_detail::DescribeWindowAttention,
     .reference = op_kinds_detail::WindowAttentionReference,
     .weights = op_kinds_detail::WindowAttentionWeights,
     .sim_flops = op_kinds_detail::WindowAttentionFlops},
    {.kind = RegisteredKind::kSpaceToDepth,
     .name = "space_to_depth",
     .summary = "every block x block square of pixels as one pixel of block^2 x C channels "
                "(Swin's patch merging order)",
     .attributes = op_kinds_detail::kSpaceToDepthAttributes,
     .infer = op_kinds_detail::SpaceToDepthShape,
     .describe = op_kinds_detail::DescribeSpaceToDepth,
     .reference = op_kinds_detail::SpaceToDepthReference,
     // a copy
     .sim_flops_per_element = 0},
};

// The shortest decimal that reads back to `value`'s bits (std::to_chars
// without a precision guarantees that).
std::string FloatText(float value) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  if (error != std::errc()) throw Error("a float attribute could not be printed");
  return std::string(text, end);
}

bool InFloatRange(const OpAttribute& a, float value) {
  // Written so that NaN, which compares false, is out of range.
  const bool above_min = a.float_min_excluded ? value > a.float_min : value >= a.float_min;
  return above_min && value <= a.float_max;
}

std::string RangeText(const OpAttribute& a) {
  if (!a.is_float) return std::to_string(a.min) + " to " + std::to_string(a.max);
  return (a.float_min_excluded ? "above " : "") + FloatText(a.float_min) + " to " +
         FloatText(a.float_max);
}

const OpAttribute* FindAttribute(const OpKindSpec& spec, std::string_view name, size_t* index) {
  for (size_t i = 0; i < spec.attributes.size(); ++i) {
    if (spec.attributes[i].name == name) {
      *index = i;
      return &spec.attributes[i];
    }
  }
  return nullptr;
}

}  // namespace

std::span<const OpKindSpec> RegisteredKinds() { return kSpecs; }

const OpKindSpec& SpecOf(RegisteredKind kind) {
  const auto index = static_cast<size_t>(kind);
  if (index >= std::size(kSpecs)) {
    throw Error("operator kind " + std::to_string(index) + " is not registered");
  }
  return kSpecs[index];
}

bool HasWeights(RegisteredKind kind) { return SpecOf(kind).weights != nullptr; }

const OpKindSpec* RegisteredKindNamed(std::string_view name) {
  for (const OpKindSpec& spec : kSpecs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string RegisteredKindNames() {
  std::string text;
  for (const OpKindSpec& spec : kSpecs) {
    if (!text.empty()) text += ", ";
    text += spec.name;
  }
  return text;
}

OpParams MakeRegisteredOp(RegisteredKind kind) {
  OpParams op;
  op.kind = OpKind::kRegistered;
  op.registered.kind = kind;
  for (const OpAttribute& attribute : SpecOf(kind).attributes) {
    op.registered.attributes.push_back(attribute.default_value);
  }
  return op;
}

std::optional<int> AttributeOf(const RegisteredOp& op, std::string_view name) {
  size_t index = 0;
  if (FindAttribute(SpecOf(op.kind), name, &index) == nullptr || index >= op.attributes.size()) {
    return std::nullopt;
  }
  return op.attributes[index];
}

std::optional<float> FloatAttributeOf(const RegisteredOp& op, std::string_view name) {
  size_t index = 0;
  const OpAttribute* attribute = FindAttribute(SpecOf(op.kind), name, &index);
  if (attribute == nullptr || !attribute->is_float || index >= op.attributes.size()) {
    return std::nullopt;
  }
  return FloatOfBits(op.attributes[index]);
}

void SetAttribute(RegisteredOp& op, std::string_view name, int value, const std::string& where) {
  const OpKindSpec& spec = SpecOf(op.kind);
  size_t index = 0;
  if (FindAttribute(spec, name, &index) == nullptr) {
    throw Error(where + ": " + std::string(spec.name) + " has no attribute '" + std::string(name) +
                "'");
  }
  if (op.attributes.size() <= index) op.attributes.resize(spec.attributes.size());
  op.attributes[index] = value;
}

void SetFloatAttribute(RegisteredOp& op, std::string_view name, float value,
                       const std::string& where) {
  const OpKindSpec& spec = SpecOf(op.kind);
  size_t index = 0;
  const OpAttribute* attribute = FindAttribute(spec, name, &index);
  if (attribute != nullptr && !attribute->is_float) {
    throw Error(where + ": " + std::string(spec.name) + "'s attribute '" + std::string(name) +
                "' is an integer, not a float");
  }
  SetAttribute(op, name, FloatBits(value), where);
}

std::string AttributeText(const OpAttribute& attribute, int value) {
  return attribute.is_float ? FloatText(FloatOfBits(value)) : std::to_string(value);
}

void CheckAttributes(const RegisteredOp& op, const std::string& where) {
  const OpKindSpec& spec = SpecOf(op.kind);
  if (op.attributes.size() != spec.attributes.size()) {
    throw Error(where + ": attributes: " + std::string(spec.name) + " has " +
                std::to_string(spec.attributes.size()) + ", got " +
                std::to_string(op.attributes.size()));
  }
  for (size_t i = 0; i < spec.attributes.size(); ++i) {
    const OpAttribute& a = spec.attributes[i];
    const int value = op.attributes[i];
    const bool in_range =
        a.is_float ? InFloatRange(a, FloatOfBits(value)) : value >= a.min && value <= a.max;
    if (!in_range) {
      throw Error(where + ": " + std::string(a.name) + ": " + AttributeText(a, value) +
                  " is out of range (expected " + RangeText(a) + "; " + std::string(a.means) + ")");
    }
  }
}

std::string RegisteredKeyText(const RegisteredOp& op) {
  const OpKindSpec& spec = SpecOf(op.kind);
  std::string text(spec.name);
  text += '(';
  for (size_t i = 0; i < spec.attributes.size(); ++i) {
    if (i > 0) text += ',';
    text += spec.attributes[i].name;
    text += '=';
    text += AttributeText(spec.attributes[i], i < op.attributes.size() ? op.attributes[i] : 0);
  }
  text += ')';
  return text;
}

}  // namespace ios
