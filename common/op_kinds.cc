#include "common/op_kinds.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>

#include "common/error.h"

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

void SoftmaxReference(const RegisteredOp& op, const Shape& input, const float* in, float* out) {
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
                             float* out) {
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
};

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

void CheckAttributes(const RegisteredOp& op, const std::string& where) {
  const OpKindSpec& spec = SpecOf(op.kind);
  if (op.attributes.size() != spec.attributes.size()) {
    throw Error(where + ": attributes: " + std::string(spec.name) + " has " +
                std::to_string(spec.attributes.size()) + ", got " +
                std::to_string(op.attributes.size()));
  }
  for (size_t i = 0; i < spec.attributes.size(); ++i) {
    const OpAttribute& a = spec.attributes[i];
    if (op.attributes[i] < a.min || op.attributes[i] > a.max) {
      throw Error(where + ": " + std::string(a.name) + ": " + std::to_string(op.attributes[i]) +
                  " is out of range (expected " + std::to_string(a.min) + " to " +
                  std::to_string(a.max) + "; " + std::string(a.means) + ")");
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
    text += std::to_string(i < op.attributes.size() ? op.attributes[i] : 0);
  }
  text += ')';
  return text;
}

}  // namespace ios
