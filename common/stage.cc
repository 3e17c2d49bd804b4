#include "common/stage.h"

#include <algorithm>
#include <charconv>
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

void AppendInt(std::string& out, int value) {
  char buffer[16];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, end);
}

void AppendRange(std::string& out, int begin, int end) {
  out += '[';
  AppendInt(out, begin);
  out += ':';
  AppendInt(out, end);
  out += "]+";
}

// A group described without reference to other groups: externals are named
// by their shape and by first use inside the group. Sorting groups by this
// text gives an order that does not depend on node names or positions.
// `nodes` must be sorted (graph order is topological).
void DescribeGroupLocally(const Graph& graph, const std::vector<NodeId>& nodes,
                          const std::vector<std::string>& op_text,
                          const std::vector<std::string>& shape_text, std::string& sig) {
  sig.clear();
  std::vector<NodeId> externals;  // a group has a handful of inputs: linear search wins
  for (NodeId id : nodes) {
    sig += op_text[id];
    sig += '<';
    for (const Term& term : graph.node(id).inputs) {
      for (const Slice& s : term) {
        const auto local = std::find(nodes.begin(), nodes.end(), s.producer);
        if (local != nodes.end()) {
          sig += 'L';
          AppendInt(sig, static_cast<int>(local - nodes.begin()));
        } else {
          auto ext = std::find(externals.begin(), externals.end(), s.producer);
          if (ext == externals.end()) ext = externals.insert(externals.end(), s.producer);
          sig += 'X';
          AppendInt(sig, static_cast<int>(ext - externals.begin()));
          sig += ':';
          sig += shape_text[s.producer];
        }
        AppendRange(sig, s.begin, s.end);
      }
      sig += '|';
    }
    sig += '>';
  }
}

std::vector<std::string> OpTexts(const Graph& graph) {
  std::vector<std::string> texts(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) AppendOpKey(texts[i], graph.nodes[i].op);
  return texts;
}

std::vector<std::string> ShapeTexts(const Graph& graph) {
  std::vector<std::string> texts(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) AppendShape(texts[i], graph.nodes[i].output);
  return texts;
}

// Groups sorted by their local description: the canonical group order.
void CanonicalGroups(const Graph& graph, const Stage& stage, const std::vector<std::string>& op_text,
                     const std::vector<std::string>& shape_text,
                     std::vector<std::pair<std::string, std::vector<NodeId>>>& groups) {
  groups.resize(stage.groups.size());
  for (size_t g = 0; g < stage.groups.size(); ++g) {
    if (stage.groups[g].empty()) throw Error("stage has an empty group");
    groups[g].second = stage.groups[g];
    std::sort(groups[g].second.begin(), groups[g].second.end());
    DescribeGroupLocally(graph, groups[g].second, op_text, shape_text, groups[g].first);
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

Strategy EffectiveStrategy(const Stage& stage) {
  return stage.OperatorCount() == 1 ? Strategy::kParallel : stage.strategy;
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
  spec.strategy = EffectiveStrategy(stage);
  if (spec.strategy == Strategy::kMerge) {
    std::vector<NodeId> all;
    for (const auto& g : stage.groups) all.insert(all.end(), g.begin(), g.end());
    if (!CanMerge(graph, all)) {
      throw Error("stage is not mergeable: its operators must be convolutions of one input");
    }
  }
  std::vector<std::pair<std::string, std::vector<NodeId>>> groups;
  CanonicalGroups(graph, stage, OpTexts(graph), ShapeTexts(graph), groups);
  std::unordered_map<NodeId, int> external_index;
  for (const auto& [signature, nodes] : groups) {
    std::vector<StageOp> ops;
    for (NodeId id : nodes) {
      const Node& node = graph.node(id);
      StageOp op{node.op, {}, node.output};
      for (const Term& term : node.inputs) {
        std::vector<SliceRef> refs;
        for (const Slice& s : term) {
          const auto local = std::find(nodes.begin(), nodes.end(), s.producer);
          if (local != nodes.end()) {
            refs.push_back({false, static_cast<int>(local - nodes.begin()), s.begin, s.end});
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

StageKeyer::StageKeyer(const Graph& graph)
    : graph_(graph), op_text_(OpTexts(graph)), shape_text_(ShapeTexts(graph)) {}

// Must produce exactly StageSpec::Key() of MakeStageSpec(graph, stage).
const std::string& StageKeyer::Key(const Stage& stage) {
  CanonicalGroups(graph_, stage, op_text_, shape_text_, scratch_);
  std::vector<NodeId>& externals = externals_;
  externals.clear();
  for (const auto& [signature, nodes] : scratch_) {
    for (NodeId id : nodes) {
      for (const Term& term : graph_.node(id).inputs) {
        for (const Slice& s : term) {
          if (std::find(nodes.begin(), nodes.end(), s.producer) == nodes.end() &&
              std::find(externals.begin(), externals.end(), s.producer) == externals.end()) {
            externals.push_back(s.producer);
          }
        }
      }
    }
  }
  std::string& key = key_;
  key = "v1;";
  key += ToString(EffectiveStrategy(stage));
  key += ";in=";
  for (NodeId e : externals) {
    key += shape_text_[e];
    key += ',';
  }
  for (const auto& [signature, nodes] : scratch_) {
    key += ";g=";
    for (NodeId id : nodes) {
      key += op_text_[id];
      key += '<';
      for (const Term& term : graph_.node(id).inputs) {
        for (const Slice& s : term) {
          const auto local = std::find(nodes.begin(), nodes.end(), s.producer);
          if (local != nodes.end()) {
            key += 'L';
            AppendInt(key, static_cast<int>(local - nodes.begin()));
          } else {
            key += 'X';
            AppendInt(key, static_cast<int>(std::find(externals.begin(), externals.end(),
                                                      s.producer) -
                                            externals.begin()));
          }
          AppendRange(key, s.begin, s.end);
        }
        key += '|';
      }
      key += '>';
    }
  }
  return key;
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
          AppendInt(key, r.index);
          AppendRange(key, r.begin, r.end);
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
