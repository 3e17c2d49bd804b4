#include "common/stage.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

#include "common/error.h"

namespace ios {

const char* ToString(Strategy strategy) {
  return strategy == Strategy::kMerge ? "merge" : "parallel";
}

int Stage::OperatorCount() const {
  int n = 0;
  for (const auto& g : groups) n += static_cast<int>(g.size());
  return n;
}

int StageSpec::OperatorCount() const {
  int n = 0;
  for (const auto& g : groups) n += static_cast<int>(g.size());
  return n;
}

namespace {

void AppendWindow(std::string& out, const Window& w) {
  out += std::to_string(w.h);
  out += 'x';
  out += std::to_string(w.w);
}

void AppendShape(std::string& out, const Shape& s) {
  out += std::to_string(s.c);
  out += 'x';
  out += std::to_string(s.h);
  out += 'x';
  out += std::to_string(s.w);
}

// Every parameter of the op, in a fixed order: this text is part of DB keys,
// so it must never change meaning between versions.
void AppendOpKey(std::string& out, const OpParams& op) {
  switch (op.kind) {
    case OpKind::kConv: {
      const ConvParams& c = op.conv;
      out += "conv(o";
      out += std::to_string(c.out_channels);
      out += ",k";
      AppendWindow(out, c.kernel);
      out += ",s";
      AppendWindow(out, c.stride);
      out += ",p";
      AppendWindow(out, c.padding);
      out += ",d";
      AppendWindow(out, c.dilation);
      out += ",g";
      out += std::to_string(c.groups);
      out += c.bias ? ",b1," : ",b0,";
      out += ToString(c.act);
      out += ')';
      break;
    }
    case OpKind::kPool:
      out += "pool(";
      out += ToString(op.pool.type);
      out += ",k";
      AppendWindow(out, op.pool.kernel);
      out += ",s";
      AppendWindow(out, op.pool.stride);
      out += ",p";
      AppendWindow(out, op.pool.padding);
      out += ')';
      break;
    case OpKind::kActivation:
      out += "act(";
      out += ToString(op.act);
      out += ')';
      break;
    case OpKind::kEltwise:
      out += op.eltwise == EltwiseType::kAdd ? "add" : "mul";
      break;
    case OpKind::kIdentity:
      out += "id";
      break;
    case OpKind::kSequential:
      out += "seq[";
      for (const OpParams& inner : op.chain) {
        AppendOpKey(out, inner);
        out += ';';
      }
      out += ']';
      break;
    case OpKind::kInput:
      out += "input";
      break;
  }
}

// A group described without reference to other groups: externals are named
// by their shape and by first use inside the group. Sorting groups by this
// text gives an order that does not depend on node names or positions.
struct LocalGroup {
  std::vector<NodeId> nodes;
  std::string signature;
};

LocalGroup DescribeGroupLocally(const Graph& graph, const std::vector<NodeId>& nodes) {
  LocalGroup local{nodes, {}};
  std::sort(local.nodes.begin(), local.nodes.end());  // graph order is topological
  std::unordered_map<NodeId, int> position, external_index;
  for (size_t i = 0; i < local.nodes.size(); ++i) position[local.nodes[i]] = static_cast<int>(i);
  std::string& sig = local.signature;
  for (NodeId id : local.nodes) {
    const Node& node = graph.node(id);
    AppendOpKey(sig, node.op);
    sig += '<';
    for (const Term& term : node.inputs) {
      for (const Slice& s : term) {
        auto it = position.find(s.producer);
        if (it != position.end()) {
          sig += 'L';
          sig += std::to_string(it->second);
        } else {
          auto [ext, inserted] =
              external_index.emplace(s.producer, static_cast<int>(external_index.size()));
          sig += 'X';
          sig += std::to_string(ext->second);
          sig += ':';
          AppendShape(sig, graph.node(s.producer).output);
        }
        sig += '[';
        sig += std::to_string(s.begin);
        sig += ':';
        sig += std::to_string(s.end);
        sig += ']';
        sig += '+';
      }
      sig += '|';
    }
    sig += '>';
  }
  return local;
}

}  // namespace

bool CanMerge(const Graph& graph, const std::vector<NodeId>& nodes) {
  if (nodes.size() == 1) return true;
  if (nodes.empty()) return false;
  const Node& first = graph.node(nodes[0]);
  for (NodeId id : nodes) {
    const Node& node = graph.node(id);
    if (node.op.kind != OpKind::kConv || node.op.conv.groups != 1) return false;
    if (node.inputs.size() != 1 || node.inputs[0].size() != 1) return false;
    if (!(node.inputs[0][0] == first.inputs[0][0])) return false;
    if (node.output.h != first.output.h || node.output.w != first.output.w) return false;
    if (!(node.op.conv.stride == first.op.conv.stride)) return false;
    if (node.op.conv.act != first.op.conv.act) return false;
  }
  // Same input slice implies the same input resolution.
  return true;
}

ConvParams MergedConv(const std::vector<ConvParams>& convs) {
  if (convs.empty()) throw Error("MergedConv: no convolutions to merge");
  ConvParams merged = convs[0];
  merged.out_channels = 0;
  for (const ConvParams& c : convs) {
    merged.out_channels += c.out_channels;
    merged.kernel.h = std::max(merged.kernel.h, c.kernel.h);
    merged.kernel.w = std::max(merged.kernel.w, c.kernel.w);
    merged.padding.h = std::max(merged.padding.h, c.padding.h);
    merged.padding.w = std::max(merged.padding.w, c.padding.w);
    merged.bias = merged.bias || c.bias;
  }
  return merged;
}

StageSpec MakeStageSpec(const Graph& graph, const Stage& stage) {
  StageSpec spec;
  spec.strategy = stage.OperatorCount() == 1 ? Strategy::kParallel : stage.strategy;
  if (spec.strategy == Strategy::kMerge) {
    std::vector<NodeId> all;
    for (const auto& g : stage.groups) all.insert(all.end(), g.begin(), g.end());
    if (!CanMerge(graph, all)) {
      throw Error("stage is not mergeable: its operators must be convolutions of one input");
    }
  }
  std::vector<LocalGroup> locals;
  locals.reserve(stage.groups.size());
  for (const auto& g : stage.groups) {
    if (g.empty()) throw Error("stage has an empty group");
    locals.push_back(DescribeGroupLocally(graph, g));
  }
  std::stable_sort(locals.begin(), locals.end(), [](const LocalGroup& a, const LocalGroup& b) {
    return a.signature < b.signature;
  });
  std::unordered_map<NodeId, int> external_index;
  for (const LocalGroup& local : locals) {
    std::unordered_map<NodeId, int> position;
    for (size_t i = 0; i < local.nodes.size(); ++i) position[local.nodes[i]] = static_cast<int>(i);
    std::vector<StageOp> ops;
    for (NodeId id : local.nodes) {
      const Node& node = graph.node(id);
      StageOp op{node.op, {}, node.output};
      for (const Term& term : node.inputs) {
        std::vector<SliceRef> refs;
        for (const Slice& s : term) {
          auto it = position.find(s.producer);
          if (it != position.end()) {
            refs.push_back({false, it->second, s.begin, s.end});
            continue;
          }
          auto [ext, inserted] =
              external_index.emplace(s.producer, static_cast<int>(spec.externals.size()));
          if (inserted) spec.externals.push_back(graph.node(s.producer).output);
          refs.push_back({true, ext->second, s.begin, s.end});
        }
        op.inputs.push_back(std::move(refs));
      }
      ops.push_back(std::move(op));
    }
    spec.groups.push_back(std::move(ops));
  }
  return spec;
}

std::string StageSpec::Key() const {
  std::string key = "v1;";
  key += ToString(strategy);
  key += ";in=";
  for (const Shape& s : externals) {
    AppendShape(key, s);
    key += ',';
  }
  for (const auto& group : groups) {
    key += ";g=";
    for (const StageOp& op : group) {
      AppendOpKey(key, op.op);
      key += '<';
      for (const auto& term : op.inputs) {
        for (const SliceRef& r : term) {
          key += r.external ? 'X' : 'L';
          key += std::to_string(r.index);
          key += '[';
          key += std::to_string(r.begin);
          key += ':';
          key += std::to_string(r.end);
          key += "]+";
        }
        key += '|';
      }
      key += '>';
    }
  }
  return key;
}

std::string StageSpec::Describe() const {
  std::string text = ToString(strategy);
  text += " ";
  for (size_t g = 0; g < groups.size(); ++g) {
    text += g ? " || " : "";
    for (size_t i = 0; i < groups[g].size(); ++i) {
      text += i ? " -> " : "";
      text += ios::Describe(groups[g][i].op);
    }
  }
  text += " on ";
  for (size_t i = 0; i < externals.size(); ++i) {
    text += i ? ", " : "";
    AppendShape(text, externals[i]);
  }
  return text;
}

}  // namespace ios
