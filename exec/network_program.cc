// BuildNetworkProgram: a whole network under a schedule, with its memory
// plan (where each tensor lives, concatenations as views, slot reuse).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/printable.h"
#include "common/slices.h"
#include "common/stage.h"
#include "exec/program.h"
#include "exec/program_builder.h"
#include "exec/tensor_layout.h"

namespace ios::exec {
namespace {

using detail::SubView;

// Where each operator runs.
struct Placement {
  std::vector<int> stage, group, position;
};

bool IsMerge(const Stage& stage) {
  return stage.strategy == Strategy::kMerge && stage.OperatorCount() > 1;
}

std::vector<NodeId> Members(const Stage& stage) {
  std::vector<NodeId> all;
  for (const auto& g : stage.groups) all.insert(all.end(), g.begin(), g.end());
  return all;
}

// Checks that `stages` run every operator once (with `io`: every operator
// they list), after its producers (with `io`: or received).
Placement Place(const Graph& graph, const std::vector<Stage>& stages, const DeviceProgramIo* io) {
  const size_t n = graph.nodes.size();
  Placement at{std::vector<int>(n, -1), std::vector<int>(n, -1), std::vector<int>(n, -1)};
  for (size_t s = 0; s < stages.size(); ++s) {
    const std::string where = "schedule: stage " + std::to_string(s);
    for (size_t g = 0; g < stages[s].groups.size(); ++g) {
      const auto& group = stages[s].groups[g];
      if (group.empty()) throw Error(where + ": group " + std::to_string(g) + " is empty");
      for (size_t i = 0; i < group.size(); ++i) {
        const NodeId id = group[i];
        if (id <= 0 || id >= static_cast<NodeId>(n)) {
          throw Error(where + ": operator #" + std::to_string(id) + " does not exist");
        }
        if (at.stage[static_cast<size_t>(id)] != -1) {
          throw Error(where + ": node " + Quoted(graph.node(id).name) +
                      " is already scheduled in stage " +
                      std::to_string(at.stage[static_cast<size_t>(id)]));
        }
        at.stage[static_cast<size_t>(id)] = static_cast<int>(s);
        at.group[static_cast<size_t>(id)] = static_cast<int>(g);
        at.position[static_cast<size_t>(id)] = static_cast<int>(i);
      }
    }
    if (IsMerge(stages[s]) && !CanMerge(graph, Members(stages[s]))) {
      throw Error(where + ": a merge stage whose operators do not merge");
    }
  }
  std::vector<bool> received(n, false);
  if (io != nullptr) {
    for (NodeId id : io->received) {
      if (id <= 0 || id >= static_cast<NodeId>(n)) {
        throw Error("device program: received operator #" + std::to_string(id) + " does not exist");
      }
      if (at.stage[static_cast<size_t>(id)] != -1) {
        throw Error("device program: node " + Quoted(graph.node(id).name) +
                    " is received but also computed here (stage " +
                    std::to_string(at.stage[static_cast<size_t>(id)]) + ")");
      }
      received[static_cast<size_t>(id)] = true;
    }
    for (NodeId id : io->sent) {
      if (id <= 0 || id >= static_cast<NodeId>(n) || at.stage[static_cast<size_t>(id)] == -1) {
        throw Error("device program: sent operator #" + std::to_string(id) +
                    " is not computed here");
      }
    }
  }
  for (NodeId id = 1; id < static_cast<NodeId>(n); ++id) {
    const auto u = static_cast<size_t>(id);
    if (at.stage[u] == -1) {
      if (io != nullptr) continue;  // another device's
      throw Error("schedule: node " + Quoted(graph.node(id).name) + " is in no stage");
    }
    for (const Term& term : graph.node(id).inputs) {
      for (const Slice& slice : term) {
        if (slice.producer == 0) continue;
        const auto p = static_cast<size_t>(slice.producer);
        if (received[p]) continue;
        if (at.stage[p] == -1) {
          throw Error("device program: node " + Quoted(graph.node(id).name) + " reads " +
                      Quoted(graph.node(slice.producer).name) +
                      ", which is neither computed here nor received");
        }
        const bool earlier_stage = at.stage[p] < at.stage[u];
        const bool earlier_in_group = at.stage[p] == at.stage[u] && at.group[p] == at.group[u] &&
                                      at.position[p] < at.position[u] &&
                                      !IsMerge(stages[static_cast<size_t>(at.stage[u])]);
        if (!earlier_stage && !earlier_in_group) {
          throw Error("schedule: node " + Quoted(graph.node(id).name) + " (stage " +
                      std::to_string(at.stage[u]) + ") reads " +
                      Quoted(graph.node(slice.producer).name) + " (stage " +
                      std::to_string(at.stage[p]) +
                      "), which does not run before it in its stage or an earlier one");
        }
      }
    }
  }
  return at;
}

// A concatenation of whole producer outputs: the producers, or empty when
// `node`'s input is not one (an eltwise combines its terms instead).
std::vector<NodeId> WholeConcatenation(const Graph& graph, const Node& node) {
  if (node.op.kind == OpKind::kEltwise || node.inputs.size() < 2) return {};
  std::vector<NodeId> producers;
  for (const Term& term : node.inputs) {
    if (term.size() != 1) return {};
    const Slice& s = term[0];
    if (s.producer == 0 || s.begin != 0 || s.end != graph.node(s.producer).output.c) return {};
    producers.push_back(s.producer);
  }
  if (std::set<NodeId>(producers.begin(), producers.end()).size() != producers.size()) return {};
  return producers;
}

// Builds a network program; without weights (`weights` null) it builds
// the same program with empty convolution weights, for its layout and plan.
class NetworkBuilder {
 public:
  NetworkBuilder(const Graph& graph, const std::vector<Stage>& stages, const WeightStore* weights,
                 const DeviceProgramIo* io)
      : graph_(graph),
        stages_(stages),
        weights_(weights),
        io_(io),
        at_(Place(graph, stages, io)),
        builder_(result_.program),
        home_(graph.nodes.size()),
        fixed_(graph.nodes.size(), false),
        alias_(graph.nodes.size(), false),
        temps_of_(graph.nodes.size()) {}

  TensorLayout Layout() {
    PlaceTensors();
    Emit();
    return MakeLayout();
  }

  NetworkProgram Build() {
    PlaceTensors();
    Emit();
    AssignSlots(MakeLayout());
    Program& p = result_.program;
    p.inputs = {home_[0].buffer};
    p.outputs = {Home(Last())};
    return std::move(result_);
  }

  DeviceProgram BuildForDevice() {
    PlaceTensors();
    Emit();
    AssignSlots(MakeLayout());
    DeviceProgram device;
    Program& p = result_.program;
    if (home_[0].buffer >= 0) {
      device.input = home_[0].buffer;
      p.inputs.push_back(device.input);
    }
    for (NodeId id : io_->received) {
      int first = static_cast<int>(stages_.size());
      for (NodeId reader = 1; reader < static_cast<NodeId>(graph_.nodes.size()); ++reader) {
        if (Local(reader) && Reads(reader, id)) first = std::min(first, StageOf(reader));
      }
      if (first == static_cast<int>(stages_.size())) {
        throw Error("device program: node " + Quoted(graph_.node(id).name) +
                    " is received but no operator here reads it");
      }
      device.received.push_back({id, Home(id).buffer, first});
      p.inputs.push_back(Home(id).buffer);
    }
    for (NodeId id : io_->sent) {
      device.sent.push_back({id, Home(id), StageOf(id)});
      p.outputs.push_back(Home(id));
    }
    if (Local(Last())) {
      device.output = Home(Last());
      p.outputs.push_back(*device.output);
    }
    device.program = std::move(p);
    device.memory = result_.memory;
    return device;
  }

 private:
  NodeId Last() const { return static_cast<NodeId>(graph_.nodes.size()) - 1; }
  int StageOf(NodeId id) const { return at_.stage[static_cast<size_t>(id)]; }
  // Computed by this program (always, for a whole network).
  bool Local(NodeId id) const { return id > 0 && StageOf(id) >= 0; }
  bool Reads(NodeId reader, NodeId producer) const {
    for (const Term& term : graph_.node(reader).inputs) {
      for (const Slice& slice : term) {
        if (slice.producer == producer) return true;
      }
    }
    return false;
  }

  // The view holding a node's output; its own buffer unless placed.
  View Home(NodeId id) {
    View& home = home_[static_cast<size_t>(id)];
    if (home.buffer < 0) {
      const Node& node = graph_.node(id);
      home = {builder_.AddBuffer(node.output, node.name), 0, node.output.c};
    }
    return home;
  }

  // Decides, before any step exists, where tensors that are not plain own
  // buffers live: merge members in their stage's stacked output, producers
  // of a whole concatenation in one buffer at channel offsets, single-view
  // identities as aliases.
  void PlaceTensors() {
    // The network input is written by the caller, never moved; a device
    // program has it only where an operator reads it.
    bool reads_input = io_ == nullptr;
    for (NodeId id = 1; id < static_cast<NodeId>(graph_.nodes.size()) && !reads_input; ++id) {
      reads_input = Local(id) && Reads(id, 0);
    }
    if (reads_input) Home(0);
    fixed_[0] = true;
    // Received tensors are written by the caller too, whole.
    if (io_ != nullptr) {
      for (NodeId id : io_->received) {
        Home(id);
        fixed_[static_cast<size_t>(id)] = true;
      }
    }
    for (size_t s = 0; s < stages_.size(); ++s) {
      if (!IsMerge(stages_[s])) continue;
      const std::vector<NodeId> members = Members(stages_[s]);
      int channels = 0;
      for (NodeId m : members) channels += graph_.node(m).output.c;
      const Shape& first = graph_.node(members[0]).output;
      std::string label = "merge(";
      for (NodeId m : members) label += (m == members[0] ? "" : ", ") + graph_.node(m).name;
      const int buffer = builder_.AddBuffer({channels, first.h, first.w}, label + ")");
      int offset = 0;
      for (NodeId m : members) {
        const int c = graph_.node(m).output.c;
        home_[static_cast<size_t>(m)] = {buffer, offset, c};
        fixed_[static_cast<size_t>(m)] = true;
        offset += c;
      }
    }
    std::map<std::vector<NodeId>, View> concat_views;
    for (NodeId id = 1; id < static_cast<NodeId>(graph_.nodes.size()); ++id) {
      if (!Local(id)) continue;
      const Node& node = graph_.node(id);
      const std::vector<NodeId> producers = WholeConcatenation(graph_, node);
      if (!producers.empty() && !concat_views.count(producers)) {
        const bool all_free = std::none_of(producers.begin(), producers.end(), [&](NodeId p) {
          return fixed_[static_cast<size_t>(p)];
        });
        if (all_free) {
          std::vector<Shape> shapes;
          std::string label = "concat(";
          for (NodeId p : producers) {
            shapes.push_back(graph_.node(p).output);
            label += (p == producers[0] ? "" : ", ") + graph_.node(p).name;
          }
          const Shape shape = InputShape(shapes, node.name);
          const int buffer = builder_.AddBuffer(shape, label + ")");
          int offset = 0;
          for (NodeId p : producers) {
            const int c = graph_.node(p).output.c;
            home_[static_cast<size_t>(p)] = {buffer, offset, c};
            fixed_[static_cast<size_t>(p)] = true;
            offset += c;
          }
          concat_views.emplace(producers, View{buffer, 0, shape.c});
          ++result_.memory.concat_views;
        }
      }
      if (node.op.kind != OpKind::kIdentity || fixed_[static_cast<size_t>(id)]) continue;
      // An identity is free when its input already is one view: a single
      // slice, or a concatenation served as a view. It aliases it.
      if (node.inputs.size() == 1 && node.inputs[0].size() == 1) {
        const Slice& s = node.inputs[0][0];
        home_[static_cast<size_t>(id)] = SubView(Home(s.producer), s.begin, s.end);
        fixed_[static_cast<size_t>(s.producer)] = true;
      } else if (const auto it = concat_views.find(producers);
                 !producers.empty() && it != concat_views.end()) {
        home_[static_cast<size_t>(id)] = it->second;
      } else {
        continue;
      }
      fixed_[static_cast<size_t>(id)] = true;
      alias_[static_cast<size_t>(id)] = true;
    }
  }

  // The node's input by the one resolution (common/slices.h), as views of
  // where its producers live.
  std::vector<std::vector<View>> Terms(NodeId id) {
    const Node& node = graph_.node(id);
    ResolvedInput input;
    try {
      input = ResolveNodeInput(graph_, id, node.op.kind, node.inputs);
    } catch (const InputError& e) {
      throw Error("node " + Quoted(node.name) + ": " + e.what());
    }
    std::vector<std::vector<View>> terms;
    for (const ResolvedTerm& term : input.terms) {
      std::vector<View> views;
      for (const SliceView& s : term.slices) {
        views.push_back(SubView(Home(s.source), s.begin, s.end));
      }
      terms.push_back(std::move(views));
    }
    return terms;
  }

  // Emits every stage, recording which temps each operator's steps need.
  void Emit() {
    for (size_t s = 0; s < stages_.size(); ++s) {
      const Stage& stage = stages_[s];
      if (IsMerge(stage)) {
        const std::vector<NodeId> members = Members(stage);
        EmitMerge(members);
        const std::vector<int> temps = builder_.TakeTemps();
        for (NodeId m : members) temps_of_[static_cast<size_t>(m)] = temps;
      } else {
        builder_.AddStage(static_cast<int>(stage.groups.size()));
        for (size_t g = 0; g < stage.groups.size(); ++g) {
          for (NodeId id : stage.groups[g]) {
            if (alias_[static_cast<size_t>(id)]) continue;
            const Node& node = graph_.node(id);
            const auto weights_for = [this, id](int chain_index, const OpParams&, const Shape&) {
              return weights_ == nullptr ? ConvWeights{} : weights_->At({id, chain_index});
            };
            builder_.EmitOp(static_cast<int>(g), node.op, Terms(id), Home(id), weights_for,
                            node.name);
            temps_of_[static_cast<size_t>(id)] = builder_.TakeTemps();
          }
        }
      }
    }
  }

  void EmitMerge(const std::vector<NodeId>& members) {
    builder_.AddStage(1);
    std::vector<ConvParams> convs;
    std::vector<const ConvWeights*> member_weights;
    std::string label = "merged";
    for (NodeId m : members) {
      convs.push_back(graph_.node(m).op.conv);
      if (weights_ != nullptr) member_weights.push_back(&weights_->At({m, 0}));
      label += " " + graph_.node(m).name;
    }
    Step step;
    step.op.kind = OpKind::kConv;
    step.op.conv = MergedConv(convs);
    step.inputs = {builder_.Gather(0, Terms(members[0]), label)};
    const View first = home_[static_cast<size_t>(members[0])];
    step.output = {first.buffer, 0, step.op.conv.out_channels};
    result_.program.weights.push_back(
        weights_ == nullptr ? ConvWeights{} : StackMergedWeights(convs, member_weights));
    step.weights = static_cast<int>(result_.program.weights.size()) - 1;
    step.label = label;
    builder_.AddStep(0, std::move(step));
  }

  // The buffers as emitted, with the nodes touching each: a node touches
  // its home's buffer (an alias too), its producers' and its temps.
  TensorLayout MakeLayout() {
    const Program& p = result_.program;
    TensorLayout layout;
    layout.buffers.resize(p.buffers.size());
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const Shape& shape = p.buffers[b].shape;
      layout.buffers[b].elements = int64_t{shape.c} * shape.h * shape.w;
    }
    const size_t n = graph_.nodes.size();
    layout.home.assign(n, -1);
    layout.buffers_of.resize(n);
    layout.temp_elements.assign(n, 0);
    for (NodeId id = 1; id < static_cast<NodeId>(n); ++id) {
      if (!Local(id)) continue;
      std::vector<int>& of = layout.buffers_of[static_cast<size_t>(id)];
      of.push_back(Home(id).buffer);
      for (const Term& term : graph_.node(id).inputs) {
        for (const Slice& slice : term) of.push_back(Home(slice.producer).buffer);
      }
      for (int t : temps_of_[static_cast<size_t>(id)]) {
        of.push_back(t);
        layout.buffers[static_cast<size_t>(t)].temp = true;
        layout.temp_elements[static_cast<size_t>(id)] +=
            layout.buffers[static_cast<size_t>(t)].elements;
      }
      std::sort(of.begin(), of.end());
      of.erase(std::unique(of.begin(), of.end()), of.end());
      for (int b : of) layout.buffers[static_cast<size_t>(b)].touch.push_back(id);
    }
    for (size_t u = 0; u < n; ++u) layout.home[u] = home_[u].buffer;
    // A program runs many times: the input lives throughout (the caller
    // writes it once), the output and sent tensors from their writer to the
    // end; received tensors, touched by their readers only, from their first
    // reader (the caller writes them just before it) to their last.
    if (home_[0].buffer >= 0) layout.buffers[static_cast<size_t>(home_[0].buffer)].pinned = true;
    if (Local(Last())) layout.buffers[static_cast<size_t>(Home(Last()).buffer)].to_end = true;
    if (io_ != nullptr) {
      for (NodeId id : io_->sent) {
        layout.buffers[static_cast<size_t>(Home(id).buffer)].to_end = true;
      }
    }
    layout.concat_views = result_.memory.concat_views;
    return layout;
  }

  void AssignSlots(const TensorLayout& layout) {
    MemoryPlan plan = PlanSlots(layout, at_.stage, static_cast<int>(stages_.size()));
    Program& p = result_.program;
    for (size_t b = 0; b < p.buffers.size(); ++b) p.buffers[b].slot = plan.slot[b];
    p.slot_elements = std::move(plan.slot_elements);
    result_.memory = plan.summary;
  }

  const Graph& graph_;
  const std::vector<Stage>& stages_;
  const WeightStore* weights_;  // null: a layout and plan only
  const DeviceProgramIo* io_;   // null: the whole network
  const Placement at_;
  NetworkProgram result_;
  detail::ProgramBuilder builder_;
  std::vector<View> home_;
  std::vector<bool> fixed_;                 // may not move into a concatenation buffer
  std::vector<bool> alias_;                 // an identity computed by no step
  std::vector<std::vector<int>> temps_of_;  // per node: temp buffers its steps use
};

}  // namespace

NetworkProgram BuildNetworkProgram(const Graph& graph, const std::vector<Stage>& stages,
                                   const WeightStore& weights) {
  return NetworkBuilder(graph, stages, &weights, nullptr).Build();
}

DeviceProgram BuildDeviceProgram(const Graph& graph, const std::vector<Stage>& stages,
                                 const WeightStore& weights, const DeviceProgramIo& io) {
  return NetworkBuilder(graph, stages, &weights, &io).BuildForDevice();
}

TensorLayout LayoutTensors(const Graph& graph, const std::vector<Stage>& stages) {
  if (!stages.empty()) return NetworkBuilder(graph, stages, nullptr, nullptr).Layout();
  // Without merges every schedule gives the same layout: node order.
  std::vector<Stage> sequential;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    sequential.push_back({Strategy::kParallel, {{id}}});
  }
  return NetworkBuilder(graph, sequential, nullptr, nullptr).Layout();
}

MemoryPlanSummary PlanMemory(const Graph& graph, const std::vector<Stage>& stages) {
  return NetworkBuilder(graph, stages, nullptr, nullptr).Build().memory;
}

}  // namespace ios::exec
