// The merge rule (common/stage.h): which convolutions can run as one, and
// the merged convolution's parameters.
#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/limits.h"
#include "common/stage.h"

namespace ios {

std::optional<MergeSignature> MergeSignatureOf(const OpParams& op) {
  if (op.kind != OpKind::kConv || op.conv.groups != 1) return std::nullopt;
  const ConvParams& c = op.conv;
  MergeSignature sig;
  sig.stride = c.stride;
  sig.dilation = c.dilation;
  sig.kernel_parity = {c.kernel.h % 2, c.kernel.w % 2};
  // 64-bit: extents up to 2^30 must not overflow.
  sig.centre_h = int64_t{c.dilation.h} * (c.kernel.h - 1) - 2 * int64_t{c.padding.h};
  sig.centre_w = int64_t{c.dilation.w} * (c.kernel.w - 1) - 2 * int64_t{c.padding.w};
  sig.padding_end_extra = c.padding_end_extra;
  sig.act = c.act;
  return sig;
}

namespace {

std::string Pair(int a, int b) { return std::to_string(a) + " and " + std::to_string(b); }

std::string KernelPad(const ConvParams& c, bool height) {
  return std::to_string(height ? c.kernel.h : c.kernel.w) + " pad " +
         std::to_string(height ? c.padding.h : c.padding.w);
}

}  // namespace

std::optional<MergeConflict> FindMergeConflict(const OpParams& a, const OpParams& b) {
  for (const OpParams* op : {&a, &b}) {
    if (op->kind != OpKind::kConv) {
      return MergeConflict{"kind",
                           std::string("only convolutions merge, not a ") + ToString(op->kind)};
    }
    if (op->conv.groups != 1) {
      return MergeConflict{"groups", "grouped convolutions (groups " +
                                         std::to_string(op->conv.groups) + ") do not merge"};
    }
  }
  const MergeSignature x = *MergeSignatureOf(a), y = *MergeSignatureOf(b);
  if (x == y) return std::nullopt;
  const ConvParams &p = a.conv, &q = b.conv;
  if (x.stride.h != y.stride.h) {
    return MergeConflict{"strideH", "strides " + Pair(p.stride.h, q.stride.h) + " differ"};
  }
  if (x.stride.w != y.stride.w) {
    return MergeConflict{"strideW", "strides " + Pair(p.stride.w, q.stride.w) + " differ"};
  }
  if (x.dilation.h != y.dilation.h) {
    return MergeConflict{"dilationH", "dilations " + Pair(p.dilation.h, q.dilation.h) + " differ"};
  }
  if (x.dilation.w != y.dilation.w) {
    return MergeConflict{"dilationW", "dilations " + Pair(p.dilation.w, q.dilation.w) + " differ"};
  }
  if (x.kernel_parity.h != y.kernel_parity.h) {
    return MergeConflict{"kernelH", "kernel heights " + Pair(p.kernel.h, q.kernel.h) +
                                        " differ by an odd amount: the smaller cannot be centred"};
  }
  if (x.kernel_parity.w != y.kernel_parity.w) {
    return MergeConflict{"kernelW", "kernel widths " + Pair(p.kernel.w, q.kernel.w) +
                                        " differ by an odd amount: the smaller cannot be centred"};
  }
  if (x.centre_h != y.centre_h) {
    return MergeConflict{"padH", "kernel height " + KernelPad(p, true) + " and " +
                                     KernelPad(q, true) + " centre on different rows"};
  }
  if (x.centre_w != y.centre_w) {
    return MergeConflict{"padW", "kernel width " + KernelPad(p, false) + " and " +
                                     KernelPad(q, false) + " centre on different columns"};
  }
  if (x.padding_end_extra.h != y.padding_end_extra.h) {
    return MergeConflict{
        "padEndH",
        "extra bottom paddings " + Pair(p.padding_end_extra.h, q.padding_end_extra.h) + " differ"};
  }
  if (x.padding_end_extra.w != y.padding_end_extra.w) {
    return MergeConflict{
        "padEndW",
        "extra right paddings " + Pair(p.padding_end_extra.w, q.padding_end_extra.w) + " differ"};
  }
  return MergeConflict{"activation", std::string("activations ") + ToString(p.act) + " and " +
                                         ToString(q.act) + " differ"};
}

bool CanMerge(const Graph& graph, const std::vector<NodeId>& nodes) {
  if (nodes.size() == 1) return true;
  if (nodes.empty()) return false;
  const Node& first = graph.node(nodes[0]);
  const std::optional<MergeSignature> signature = MergeSignatureOf(first.op);
  if (!signature) return false;
  int64_t out_channels = 0;
  for (NodeId id : nodes) {
    const Node& node = graph.node(id);
    if (node.inputs != first.inputs || MergeSignatureOf(node.op) != signature) return false;
    out_channels += node.op.conv.out_channels;
  }
  // The merged conv is one operator: its output channels obey the same
  // extent limit as any tensor's (else no worker could measure it).
  return out_channels <= limits::kMaxExtent;
}

namespace detail {

std::string WhyNotMergeable(const Graph& graph, const std::vector<NodeId>& nodes) {
  if (nodes.empty()) return "it has no operators";
  const Node& first = graph.node(nodes.at(0));
  for (NodeId id : nodes) {
    const Node& node = graph.node(id);
    const std::optional<MergeConflict> conflict = FindMergeConflict(first.op, node.op);
    if (conflict) return "'" + node.name + "': " + conflict->field + ": " + conflict->reason;
    if (node.inputs != first.inputs) {
      return "'" + node.name + "' and '" + first.name + "' read different inputs";
    }
  }
  int64_t out_channels = 0;
  for (NodeId id : nodes) out_channels += graph.node(id).op.conv.out_channels;
  if (out_channels > limits::kMaxExtent) {
    return "the merged convolution would have " + std::to_string(out_channels) +
           " output channels, more than " + std::to_string(limits::kMaxExtent);
  }
  return "its operators must be convolutions of one input";
}

}  // namespace detail

ConvParams MergedConv(const std::vector<ConvParams>& convs) {
  if (convs.empty()) throw Error("MergedConv: no convolutions to merge");
  OpParams first;
  first.kind = OpKind::kConv;
  first.conv = convs[0];
  ConvParams merged = convs[0];
  merged.bias = false;
  for (size_t i = 0; i < convs.size(); ++i) {
    OpParams op = first;
    op.conv = convs[i];
    if (const auto conflict = FindMergeConflict(first, op)) {
      throw Error("MergedConv: convolution " + std::to_string(i) +
                  " cannot merge with the first: " + conflict->field + ": " + conflict->reason);
    }
    const ConvParams& c = convs[i];
    merged.kernel.h = std::max(merged.kernel.h, c.kernel.h);
    merged.kernel.w = std::max(merged.kernel.w, c.kernel.w);
    // p + (kmax-k)/2*d is the same for every member, and it is the padding
    // of a member with the largest kernel: the maximum padding.
    merged.padding.h = std::max(merged.padding.h, c.padding.h);
    merged.padding.w = std::max(merged.padding.w, c.padding.w);
    merged.bias = merged.bias || c.bias;
  }
  int64_t out_channels = 0;
  for (const ConvParams& c : convs) out_channels += c.out_channels;
  if (out_channels > limits::kMaxExtent) {
    throw Error("MergedConv: the merged convolution would have " + std::to_string(out_channels) +
                " output channels, more than " + std::to_string(limits::kMaxExtent));
  }
  merged.out_channels = static_cast<int>(out_channels);
  return merged;
}

}  // namespace ios
