// Random small operator graphs for brute-force tests of anything that looks
// at tensors and orders (the memory model, the memory-order search): every
// way exec lays out a tensor occurs in them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"
#include "tests/testing/ops.h"

namespace ios::testing {

//! splitmix64: the same stream on every platform (std distributions are not).
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  //! Uniform in [lo, hi].
  int Uniform(int lo, int hi) {
    return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Chance(int percent) { return Uniform(1, 100) <= percent; }

 private:
  uint64_t state_;
};

//! A random graph of `operators` (>= 1) operators, the same for the same
//! seed. Properties:
//! - node 0 is the input, 1..16 channels; every tensor has the input's
//!   height and width (1x1 or 2x2); every operator output has 1..16 channels
//!   except concatenations (their terms' sum);
//! - node ids are topological; operator 1 is a convolution of the input,
//!   later operators read earlier ones (recent ones more often) or the input;
//! - operators are a mix of 1x1 convolutions and relu->conv chains reading
//!   one slice, a summed term (several slices: a gather temp) or several
//!   concatenated terms; identities concatenating whole outputs (exec serves
//!   them as views when it can), identities of one slice (aliases), summing
//!   identities, element-wise adds of equal-width slices;
//! - the last operator concatenates every output nobody reads (one sink), so
//!   it is the network's output; one block holds all operators.
//! Shapes are inferred; CheckSingleSinkBlocks holds.
inline Graph RandomSmallGraph(uint64_t seed, int operators) {
  SplitMix rng(seed);
  const int spatial = rng.Uniform(1, 2);
  Graph g = GraphWithInput({rng.Uniform(1, 16), spatial, spatial});
  g.name = "random_" + std::to_string(seed) + "_" + std::to_string(operators);
  std::vector<int> channels{g.nodes[0].output.c};
  std::vector<bool> read(1, false);
  const auto pick = [&](int v) {  // an earlier node, recent ones more often
    if (rng.Chance(15)) return 0;
    const int back = std::min(v - 1, rng.Chance(60) ? 2 : v - 1);
    return std::max(0, v - 1 - rng.Uniform(0, back));
  };
  const auto slice_of = [&](int p, int width) {  // `width` channels of p, at a random offset
    const int begin = rng.Uniform(0, channels[static_cast<size_t>(p)] - width);
    return Slice{p, begin, begin + width};
  };
  const auto whole = [&](int p) { return Slice{p, 0, channels[static_cast<size_t>(p)]}; };
  // A summed term of 2..3 slices of equal width from distinct producers.
  const auto summed_term = [&](int v) {
    std::vector<int> ps{pick(v), pick(v)};
    if (rng.Chance(40)) ps.push_back(pick(v));
    std::sort(ps.begin(), ps.end());
    ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
    int width = 16;
    for (int p : ps) width = std::min(width, channels[static_cast<size_t>(p)]);
    width = rng.Uniform(1, width);
    Term term;
    for (int p : ps) term.push_back(slice_of(p, width));
    return term;
  };
  // Whole outputs of 2..3 distinct producers, concatenated.
  const auto concat_terms = [&](int v) {
    std::vector<int> ps{pick(v), pick(v), pick(v)};
    if (rng.Chance(50)) ps.pop_back();
    std::sort(ps.begin(), ps.end());
    ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
    Inputs in;
    for (int p : ps) in.push_back({whole(p)});
    return in;
  };
  const auto any_input = [&](int v) {
    const int form = rng.Uniform(0, 2);
    if (form == 0) {
      const int p = pick(v);
      return Inputs{{rng.Chance(70)
                         ? whole(p)
                         : slice_of(p, rng.Uniform(1, channels[static_cast<size_t>(p)]))}};
    }
    if (form == 1) return Inputs{summed_term(v)};
    return concat_terms(v);
  };
  for (int v = 1; v <= operators; ++v) {
    Node node{"op" + std::to_string(v), "", IdentityOp(), {}, {}};
    if (v == operators && v > 1) {
      for (int p = 1; p < v; ++p) {
        if (!read[static_cast<size_t>(p)]) node.inputs.push_back({whole(p)});
      }
    }
    if (v == 1) {
      node.op = ConvOp(rng.Uniform(1, 16), 1, 1, 0, Activation::kNone);
      node.inputs = {{whole(0)}};
    } else if (node.inputs.empty()) {
      switch (rng.Uniform(0, 6)) {
        case 0:
        case 1:
          node.op = ConvOp(rng.Uniform(1, 16), 1, 1, 0, Activation::kRelu);
          node.inputs = any_input(v);
          break;
        case 2:
          node.op = SequentialOp({ActOp(Activation::kRelu), ConvOp(rng.Uniform(1, 16), 1)});
          node.inputs = any_input(v);
          break;
        case 3:
          node.inputs = concat_terms(v);
          break;
        case 4: {
          const int p = pick(v);
          node.inputs = {{rng.Chance(50)
                              ? whole(p)
                              : slice_of(p, rng.Uniform(1, channels[static_cast<size_t>(p)]))}};
          break;
        }
        case 5:
          node.inputs = {summed_term(v)};
          break;
        default: {
          const Term term = summed_term(v);
          node.op = EltwiseOp(EltwiseType::kAdd);
          for (const Slice& s : term) node.inputs.push_back({s});
          if (node.inputs.size() < 2) node.inputs.push_back(node.inputs[0]);
          break;
        }
      }
    }
    int c = 0;
    for (const Term& term : node.inputs) {
      for (const Slice& s : term) read[static_cast<size_t>(s.producer)] = true;
      c += term[0].channels();
    }
    if (node.op.kind == OpKind::kEltwise) c = node.inputs[0][0].channels();
    if (node.op.kind == OpKind::kConv) c = node.op.conv.out_channels;
    if (node.op.kind == OpKind::kSequential) c = node.op.chain.back().conv.out_channels;
    channels.push_back(c);
    read.push_back(false);
    g.nodes.push_back(std::move(node));
  }
  Block block{0, {}, operators, {}};
  for (int v = 1; v < operators; ++v) block.inner.push_back(v);
  g.blocks.push_back(block);
  InferShapes(g);
  return g;
}

//! A random topological order of the operators 1..n-1 (Kahn's algorithm,
//! picking a random ready operator each time).
inline std::vector<NodeId> RandomTopologicalOrder(const Graph& g, uint64_t seed) {
  SplitMix rng(seed);
  const size_t n = g.nodes.size();
  std::vector<int> missing(n, 0);
  std::vector<std::vector<NodeId>> readers(n);
  for (NodeId v = 1; v < static_cast<NodeId>(n); ++v) {
    std::vector<NodeId> producers;
    for (const Term& t : g.node(v).inputs) {
      for (const Slice& s : t) {
        if (s.producer != 0) producers.push_back(s.producer);
      }
    }
    std::sort(producers.begin(), producers.end());
    producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
    missing[static_cast<size_t>(v)] = static_cast<int>(producers.size());
    for (NodeId p : producers) readers[static_cast<size_t>(p)].push_back(v);
  }
  std::vector<NodeId> ready, order;
  for (NodeId v = 1; v < static_cast<NodeId>(n); ++v) {
    if (missing[static_cast<size_t>(v)] == 0) ready.push_back(v);
  }
  while (!ready.empty()) {
    const size_t i = static_cast<size_t>(rng.Uniform(0, static_cast<int>(ready.size()) - 1));
    const NodeId u = ready[i];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(i));
    order.push_back(u);
    for (NodeId r : readers[static_cast<size_t>(u)]) {
      if (--missing[static_cast<size_t>(r)] == 0) ready.push_back(r);
    }
  }
  return order;
}

//! One operator per stage, in `order`.
inline std::vector<Stage> OneOperatorStages(const std::vector<NodeId>& order) {
  std::vector<Stage> stages;
  for (NodeId id : order) stages.push_back({Strategy::kParallel, {{id}}});
  return stages;
}

}  // namespace ios::testing
