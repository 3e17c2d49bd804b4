// Operator weights (convolutions', and those of registered kinds declaring
// weights: a position embedding): kept outside StageSpec and its key (a
// stage's latency does not depend on the values), per node of a network,
// seeded random for zoo models or loaded from a file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/graph.h"
#include "common/op_kinds.h"

namespace ios::exec {

//! The weights of one convolution: `kernel` is OIHW (out_channels x
//! in_channels/groups x kernel.h x kernel.w), `bias` has out_channels values
//! or is empty when the convolution has none. A registered kind's weights
//! use the same fields in the shape its declaration gives (ExpectedWeightShape).
struct ConvWeights {
  int out_channels = 0, in_per_group = 0, kernel_h = 0, kernel_w = 0;
  std::vector<float> kernel;
  std::vector<float> bias;
  friend bool operator==(const ConvWeights&, const ConvWeights&) = default;
};

//! `count` values uniform in [-1, 1) from `seed`, the same bits on every
//! machine (splitmix64; no std:: distributions, whose output is
//! implementation-defined): inputs of measured stages and of ios-run.
std::vector<float> SeededValues(size_t count, uint64_t seed);

//! Whether `op` (not a chain) carries weights: a convolution, or a
//! registered kind declaring them (common/op_kinds.h, OpKindSpec::weights).
bool CarriesWeights(const OpParams& op);

//! The shape `op`'s weights have when it reads `input` (all zero when it
//! carries none). A registered kind's weights live in a ConvWeights too,
//! shaped as its declaration says.
KindWeightShape ExpectedWeightShape(const OpParams& op, const Shape& input);

//! Seeded random weights for `op` reading `input`: RandomConvWeights for a
//! convolution; for a registered kind values uniform in [-0.1, 0.1) in its
//! declared shape.
ConvWeights RandomOpWeights(const OpParams& op, const Shape& input, uint64_t seed);

//! Seeded He-uniform kernel and small random bias for `conv` reading
//! `in_channels` channels: the same seed gives the same values on every
//! machine (no std:: distributions, whose output is implementation-defined).
ConvWeights RandomConvWeights(const ConvParams& conv, int in_channels, uint64_t seed);

//! The stacked weights of a merge stage (common/stage.h, MergedConv): each
//! member's kernel zero-padded and centred in the merged kernel size, members
//! stacked along output channels in the given order, biases stacked (a
//! member without bias contributes zeros; empty if no member has one).
//! Requires `members[i]` to be the parameters `weights[i]` belong to; throws
//! ios::Error when they do not merge or the weights' shapes disagree.
ConvWeights StackMergedWeights(const std::vector<ConvParams>& members,
                               const std::vector<const ConvWeights*>& weights);

//! Where an operator carrying weights sits in a network: its node and, for a kSequential
//! node, the index of the element in its chain (0 otherwise).
struct ConvSite {
  NodeId node = -1;
  int chain_index = 0;
  friend auto operator<=>(const ConvSite&, const ConvSite&) = default;
};

//! The weights of every operator of a network that carries weights.
class WeightStore {
 public:
  //! Seeded random weights for every operator of `graph` carrying weights
  //! (shapes inferred). The seed of each mixes `seed` with its node
  //! name and chain index, so values do not depend on node numbering.
  static WeightStore Random(const Graph& graph, uint64_t seed);
  //! Reads a weights file (format in docs/execution.md) and checks it
  //! against `graph`: every operator carrying weights present with its exact shape, no
  //! unknown node. Throws ios::Error naming the file, node and field.
  static WeightStore Load(const Graph& graph, const std::string& path);
  //! Writes the weights file read by Load. Throws ios::Error on I/O failure.
  void Save(const Graph& graph, const std::string& path) const;

  //! The weights of an operator; throws ios::Error when absent.
  const ConvWeights& At(ConvSite site) const;
  void Set(ConvSite site, ConvWeights weights);
  size_t size() const { return weights_.size(); }

 private:
  std::map<ConvSite, ConvWeights> weights_;
};

}  // namespace ios::exec
