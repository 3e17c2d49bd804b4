// The element-wise activations, each declared here once: the name it has in
// stage keys, IOS JSON and descriptions, and the arithmetic every backend is
// checked against (the reference device uses it). The wire enumerator and
// the backends' own calls follow this list; appending a kind here and there
// is all a new activation needs. Existing names never change: they are in
// stage keys, and so in profiling DBs.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "common/graph.h"

namespace ios {

//! The one slope of Activation::kLeakyRelu (PyTorch's default): a slope is
//! not a parameter of stage keys, so other slopes are refused on import.
inline constexpr float kLeakyReluSlope = 0.01f;

struct ActivationKind {
  Activation id;
  std::string_view name;
  float (*apply)(float x);
};

//! Every activation, kNone first, in the order of the Activation enum.
std::span<const ActivationKind> ActivationKinds();

//! The kind of `act`.
const ActivationKind& KindOf(Activation act);

//! The activation named `name` ("relu", "relu6", ...), or nullopt.
std::optional<Activation> ActivationNamed(std::string_view name);

//! "relu, sigmoid, tanh, ... or gelu_tanh": for messages.
std::string ActivationNames();

}  // namespace ios
