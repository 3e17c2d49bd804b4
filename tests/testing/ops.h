// Operator parameters for hand-built test graphs.
#pragma once

#include <utility>
#include <vector>

#include "common/graph.h"

namespace ios::testing {

inline OpParams ConvOp(int out, int kernel, int stride = 1, int pad = 0,
                       Activation act = Activation::kRelu, int groups = 1) {
  OpParams op;
  op.kind = OpKind::kConv;
  op.conv.out_channels = out;
  op.conv.kernel = {kernel, kernel};
  op.conv.stride = {stride, stride};
  op.conv.padding = {pad, pad};
  op.conv.act = act;
  op.conv.groups = groups;
  return op;
}

inline OpParams PoolOp(PoolType type, int kernel = 1, int stride = 1, int pad = 0) {
  OpParams op;
  op.kind = OpKind::kPool;
  op.pool.type = type;
  op.pool.kernel = {kernel, kernel};
  op.pool.stride = {stride, stride};
  op.pool.padding = {pad, pad};
  return op;
}

inline OpParams EltwiseOp(EltwiseType type) {
  OpParams op;
  op.kind = OpKind::kEltwise;
  op.eltwise = type;
  return op;
}

//! A concatenation (or a pass-through): the IOS identity operator.
inline OpParams IdentityOp() {
  OpParams op;
  op.kind = OpKind::kIdentity;
  return op;
}

inline OpParams ActOp(Activation act) {
  OpParams op;
  op.kind = OpKind::kActivation;
  op.act = act;
  return op;
}

//! Ops applied one after another as one operator (e.g. relu, depthwise, pointwise).
inline OpParams SequentialOp(std::vector<OpParams> chain) {
  OpParams op;
  op.kind = OpKind::kSequential;
  op.chain = std::move(chain);
  return op;
}

//! A graph named "g" holding only its input node "in" of `shape`.
inline Graph GraphWithInput(Shape shape) {
  Graph g;
  g.name = "g";
  Node input{"in", "", {}, {}, shape};
  input.op.kind = OpKind::kInput;
  g.nodes.push_back(std::move(input));
  return g;
}

}  // namespace ios::testing
