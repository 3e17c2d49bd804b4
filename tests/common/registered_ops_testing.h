// Operators of the registered kinds (common/op_kinds.h) at given attributes,
// for the tests of the kinds' spec, the cpu backend and the cuda fake.
#pragma once

#include "common/graph.h"
#include "common/op_kinds.h"

namespace ios {

inline OpParams ChannelShuffleOp(int groups) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kChannelShuffle);
  SetAttribute(op.registered, "groups", groups, "test");
  return op;
}

inline OpParams LayerNormOp(float eps) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kLayerNorm);
  SetFloatAttribute(op.registered, "eps", eps, "test");
  return op;
}

inline OpParams LeakyReluOp(float alpha) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kLeakyRelu);
  SetFloatAttribute(op.registered, "alpha", alpha, "test");
  return op;
}

inline OpParams HardSigmoidOp(float alpha, float beta) {
  OpParams op = MakeRegisteredOp(RegisteredKind::kHardSigmoid);
  SetFloatAttribute(op.registered, "alpha", alpha, "test");
  SetFloatAttribute(op.registered, "beta", beta, "test");
  return op;
}

}  // namespace ios
