#include "common/activation.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace ios {

namespace {

float None(float x) { return x; }
float Relu(float x) { return x > 0 ? x : 0; }
float Sigmoid(float x) { return 1 / (1 + std::exp(-x)); }
float Tanh(float x) { return std::tanh(x); }
// PyTorch's ReLU6 (ONNX: Clip to [0, 6]).
float Relu6(float x) { return std::min(std::max(x, 0.0f), 6.0f); }
// x * relu6(x + 3) / 6, as PyTorch's Hardswish and ONNX's HardSwish.
float HardSwish(float x) { return x * Relu6(x + 3) / 6; }
// x * sigmoid(x), PyTorch's SiLU (ONNX: Mul(x, Sigmoid(x))).
float Silu(float x) { return x * Sigmoid(x); }
// relu6(x + 3) / 6, PyTorch's Hardsigmoid (ONNX: HardSigmoid, alpha 1/6,
// beta 1/2).
float HardSigmoid(float x) { return Relu6(x + 3) / 6; }
// PyTorch's LeakyReLU at its default slope (ONNX: LeakyRelu, alpha 0.01).
float LeakyRelu(float x) { return x > 0 ? x : kLeakyReluSlope * x; }
// 0.5 x (1 + erf(x / sqrt 2)), PyTorch's GELU (ONNX: Gelu, or its
// decomposition through Erf). Both GELUs in double, since backends are
// checked against them; 1 + erf(y) as erfc(-y), which keeps the small values
// of negative x that 1 + erf(y) rounds to 0.
float Gelu(float x) {
  const double v = x;
  return static_cast<float>(0.5 * v * std::erfc(-v / std::numbers::sqrt2));
}
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's
// GELU(approximate='tanh').
float GeluTanh(float x) {
  const double v = x;
  const double k = std::sqrt(2 / std::numbers::pi);
  return static_cast<float>(0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v))));
}

// In the order of the Activation enum (and of the wire's enumerators).
constexpr ActivationKind kKinds[] = {
    {Activation::kNone, "none", None},
    {Activation::kRelu, "relu", Relu},
    {Activation::kSigmoid, "sigmoid", Sigmoid},
    {Activation::kTanh, "tanh", Tanh},
    {Activation::kRelu6, "relu6", Relu6},
    {Activation::kHardSwish, "hardswish", HardSwish},
    {Activation::kSilu, "silu", Silu},
    {Activation::kHardSigmoid, "hardsigmoid", HardSigmoid},
    {Activation::kLeakyRelu, "leakyrelu", LeakyRelu},
    {Activation::kGelu, "gelu", Gelu},
    {Activation::kGeluTanh, "gelu_tanh", GeluTanh},
};

}  // namespace

std::span<const ActivationKind> ActivationKinds() { return kKinds; }

const ActivationKind& KindOf(Activation act) {
  const auto index = static_cast<size_t>(act);
  return index < std::size(kKinds) ? kKinds[index] : kKinds[0];
}

std::optional<Activation> ActivationNamed(std::string_view name) {
  for (const ActivationKind& kind : kKinds) {
    if (kind.name == name) return kind.id;
  }
  return std::nullopt;
}

std::string ActivationNames() {
  std::string text;
  for (size_t i = 1; i < std::size(kKinds); ++i) {
    text += i == 1 ? "" : i + 1 == std::size(kKinds) ? " or " : ", ";
    text += kKinds[i].name;
  }
  return text;
}

}  // namespace ios
