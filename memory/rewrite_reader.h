#pragma once
// Internal to memory/rewrite*.cc: how one reader of a concatenation is cut
// into partials, and where each node sits in the blocks.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/graph.h"
#include "exec/weights.h"
#include "memory/rewrite.h"

namespace ios::memory::detail {

//! A reader's op as a chain [act*, conv, ...], and the elements each
//! partial takes: chain[0..last] (with `depthwise` cut by output channels
//! and `summed` by input channels). The rest, after the combining point, is
//! the reader's activation (when `summed` has one) then chain[last+1..].
struct ReaderPlan {
  RewriteRule rule = RewriteRule::kChannelWise;
  std::vector<OpParams> chain;
  int depthwise = -1;  // index of the depthwise convolution; -1 for kChannelWise
  int summed = -1;     // index of the groups-1 convolution summed; -1 for kKernelWise
  int last = 0;        // last chain element inside each partial
  int multiplier = 1;  // depthwise output channels per input channel
};

//! The plan for `op` reading `in_channels` channels, or nullopt with the
//! reason in `why`.
std::optional<ReaderPlan> PlanReader(const OpParams& op, int in_channels, std::string* why);

//! The chain of `op`: its elements for kSequential, itself otherwise.
std::vector<OpParams> ChainOf(const OpParams& op);

//! Where each node sits: its block and its part in that block (-1: not an
//! operator of a block / the block has no parts).
struct Placement {
  std::vector<int> block, part;
};
Placement PlaceNodes(const Graph& graph);

//! Calls `fn(site, conv, in_channels_per_group)` for every convolution of
//! `graph` (shapes inferred), in ConvSite order.
void ForEachConv(const Graph& graph,
                 const std::function<void(exec::ConvSite, const ConvParams&, int)>& fn);

//! Channels of the tensor node `id` reads (its terms concatenated).
int InputChannels(const Graph& graph, NodeId id);

}  // namespace ios::memory::detail
