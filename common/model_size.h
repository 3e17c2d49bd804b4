// A network's size as papers report it: multiply-adds and weights.
#pragma once

#include <cstdint>

#include "common/graph.h"

namespace ios {

struct ModelSize {
  //! Multiply-adds of the convolutions at batch 1 (out elements x in
  //! channels per group x kernel taps), steps of sequential operators
  //! included; pools, activations and sums are not counted, as papers don't.
  int64_t macs = 0;
  //! Convolution kernels and biases.
  int64_t weights = 0;
};

//! Requires InferShapes to have passed (the zoo's graphs have).
ModelSize CountModelSize(const Graph& graph);

}  // namespace ios
