// Finding rewriting sites (memory/rewrite.h): which concatenations have
// only convolution readers that partition over their terms.
#include "memory/rewrite.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "memory/rewrite_reader.h"

namespace ios::memory {
namespace detail {

std::vector<OpParams> ChainOf(const OpParams& op) {
  return op.kind == OpKind::kSequential ? op.chain : std::vector<OpParams>{op};
}

int InputChannels(const Graph& graph, NodeId id) {
  int channels = 0;
  for (const Term& term : graph.node(id).inputs) channels += term.at(0).channels();
  return channels;
}

std::optional<ReaderPlan> PlanReader(const OpParams& op, int in_channels, std::string* why) {
  ReaderPlan plan;
  plan.chain = ChainOf(op);
  const auto& chain = plan.chain;
  const int size = static_cast<int>(chain.size());
  // Elementwise activations commute with concatenation: each partial
  // applies them to its own term.
  int i = 0;
  while (i < size && chain[i].kind == OpKind::kActivation) ++i;
  if (i == size || chain[i].kind != OpKind::kConv) {
    *why = "its op (" + Describe(op) + ") is not elementwise activations followed by a convolution";
    return std::nullopt;
  }
  const ConvParams& conv = chain[i].conv;
  if (conv.groups == 1) {
    plan.rule = RewriteRule::kChannelWise;
    plan.summed = i;
    plan.last = i;
    return plan;
  }
  if (conv.groups != in_channels || conv.out_channels % in_channels != 0) {
    *why = "its convolution has " + std::to_string(conv.groups) + " groups over " +
           std::to_string(in_channels) +
           " channels (partitioning needs groups 1 or a depthwise convolution)";
    return std::nullopt;
  }
  plan.depthwise = i;
  plan.multiplier = conv.out_channels / in_channels;
  // Activations after the depthwise are per channel too: they stay in the
  // partials. A groups-1 convolution after them is partitioned channel-wise.
  int j = i + 1;
  while (j < size && chain[j].kind == OpKind::kActivation) ++j;
  if (j < size && chain[j].kind == OpKind::kConv && chain[j].conv.groups == 1) {
    plan.rule = RewriteRule::kSeparable;
    plan.summed = j;
    plan.last = j;
  } else {
    plan.rule = RewriteRule::kKernelWise;
    plan.last = j - 1;
  }
  return plan;
}

Placement PlaceNodes(const Graph& graph) {
  Placement p;
  p.block.assign(graph.nodes.size(), -1);
  p.part.assign(graph.nodes.size(), -1);
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    for (NodeId id : graph.blocks[b].Operators()) p.block.at(id) = static_cast<int>(b);
    const auto& parts = graph.blocks[b].parts;
    for (size_t q = 0; q < parts.size(); ++q) {
      for (NodeId id : parts[q]) p.part.at(id) = static_cast<int>(q);
    }
  }
  return p;
}

void ForEachConv(const Graph& graph,
                 const std::function<void(exec::ConvSite, const ConvParams&, int)>& fn) {
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Node& node = graph.node(id);
    if (node.op.kind == OpKind::kEltwise) continue;
    // Only convolutions change the channel count along a chain.
    int channels = InputChannels(graph, id);
    const std::vector<OpParams> chain = ChainOf(node.op);
    for (size_t i = 0; i < chain.size(); ++i) {
      if (chain[i].kind != OpKind::kConv) continue;
      fn(exec::ConvSite{id, static_cast<int>(i)}, chain[i].conv,
         channels / std::max(1, chain[i].conv.groups));
      channels = chain[i].conv.out_channels;
    }
  }
}

}  // namespace detail

namespace {

using detail::PlanReader;

std::string Quote(const Graph& graph, NodeId id) { return "'" + graph.node(id).name + "'"; }

// The operators reading each node, ascending, once each.
std::vector<std::vector<NodeId>> ReadersOf(const Graph& graph) {
  std::vector<std::vector<NodeId>> readers(graph.nodes.size());
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    for (const Term& term : graph.node(id).inputs) {
      for (const Slice& s : term) {
        auto& r = readers.at(s.producer);
        if (r.empty() || r.back() != id) r.push_back(id);
      }
    }
  }
  return readers;
}

bool IsBlockExit(const Graph& graph, NodeId id) {
  return std::any_of(graph.blocks.begin(), graph.blocks.end(),
                     [&](const Block& b) { return b.exit == id; });
}

// Every term producer is an operator of `block` or the block's entry.
bool TermsInBlock(const Graph& graph, const detail::Placement& place, const Inputs& terms,
                  int block) {
  for (const Term& term : terms) {
    for (const Slice& s : term) {
      if (place.block.at(s.producer) != block &&
          graph.blocks.at(static_cast<size_t>(block)).enter != s.producer) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

SiteSearch FindSites(const Graph& graph) {
  SiteSearch out;
  const auto readers = ReadersOf(graph);
  const detail::Placement place = detail::PlaceNodes(graph);
  auto skip = [&](NodeId id, std::string reason) {
    out.skipped.push_back({id, graph.node(id).name, std::move(reason)});
  };
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Node& node = graph.node(id);
    if (node.inputs.size() < 2 || node.op.kind == OpKind::kEltwise) continue;
    std::string why;
    if (place.block[id] < 0) {
      skip(id, "it is in no block");
      continue;
    }
    if (node.op.kind != OpKind::kIdentity) {
      // A reader of its own concatenation.
      const auto plan = PlanReader(node.op, detail::InputChannels(graph, id), &why);
      if (!plan) {
        skip(id, "reads a concatenation, but " + why);
      } else if (!TermsInBlock(graph, place, node.inputs, place.block[id])) {
        skip(id, "reads a concatenation from outside its block");
      } else {
        out.sites.push_back({-1, {id}, {plan->rule}, node.inputs});
      }
      continue;
    }
    // An identity concatenation: all its readers are rewritten, or none
    // (rewriting some frees nothing).
    if (IsBlockExit(graph, id)) {
      skip(id, "is a block's exit (v1 does not rewrite across block boundaries)");
      continue;
    }
    RewriteSite site{id, {}, {}, node.inputs};
    const Term whole = {Slice{id, 0, node.output.c}};
    for (NodeId r : readers[id]) {
      const Node& reader = graph.node(r);
      if (reader.inputs != Inputs{whole}) {
        why = "reader " + Quote(graph, r) + " does not read it whole as its only input";
      } else if (place.block[r] != place.block[id]) {
        why = "reader " + Quote(graph, r) + " is in another block";
      } else if (const auto plan = PlanReader(reader.op, node.output.c, &why)) {
        site.readers.push_back(r);
        site.rules.push_back(plan->rule);
        continue;
      } else {
        why = "reader " + Quote(graph, r) + ": " + why;
      }
      break;
    }
    if (readers[id].empty()) why = "nobody reads it";
    if (site.readers.size() != readers[id].size() || readers[id].empty()) {
      skip(id, why);
    } else {
      out.sites.push_back(std::move(site));
    }
  }
  return out;
}

std::vector<RewriteForm> FormsOf(const RewriteSite& site) {
  const bool sums = std::any_of(site.rules.begin(), site.rules.end(),
                                [](RewriteRule r) { return r != RewriteRule::kKernelWise; });
  if (!sums) return {RewriteForm::kConcat};
  if (site.terms.size() >= 3) return {RewriteForm::kSumAll, RewriteForm::kChain};
  return {RewriteForm::kSumAll};
}

const char* ToString(RewriteRule rule) {
  switch (rule) {
    case RewriteRule::kChannelWise:
      return "channel-wise";
    case RewriteRule::kKernelWise:
      return "kernel-wise";
    case RewriteRule::kSeparable:
      return "kernel-wise then channel-wise";
  }
  return "?";
}

const char* ToString(RewriteForm form) {
  switch (form) {
    case RewriteForm::kSumAll:
      return "sum-all";
    case RewriteForm::kChain:
      return "chain";
    case RewriteForm::kConcat:
      return "concat";
  }
  return "?";
}

std::string DescribeSite(const Graph& graph, const RewriteSite& site) {
  std::string text = site.concat >= 0 ? graph.node(site.concat).name + " -> " : "";
  for (size_t i = 0; i < site.readers.size(); ++i) {
    text +=
        (i ? ", " : "") + graph.node(site.readers[i]).name + " (" + ToString(site.rules[i]) + ")";
  }
  return text + ", " + std::to_string(site.terms.size()) + " terms";
}

}  // namespace ios::memory
