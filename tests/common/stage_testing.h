// Building hand-made graphs and stages for the stage-key tests
// (stage_test.cc, stage_key_change_test.cc).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "common/stage.h"
#include "tests/testing/ops.h"

namespace ios::stage_testing {

inline OpParams ConcatOp() { return ::ios::testing::IdentityOp(); }

// Builds a graph node by node; every input is a whole producer tensor.
// Names get `prefix` so the same structure can be built under other names.
class Net {
 public:
  explicit Net(Shape input, std::string prefix = "") : prefix_(std::move(prefix)) {
    Node in;
    in.name = prefix_ + "in";
    in.op.kind = OpKind::kInput;
    in.output = input;
    graph_.nodes.push_back(in);
  }

  //! `name` = op over `terms` (producers by unprefixed name; one term each
  //! unless given as a list).
  NodeId Add(const std::string& name, const OpParams& op,
             const std::vector<std::vector<std::string>>& terms) {
    Node node;
    node.name = prefix_ + name;
    node.hint = "hint-" + prefix_ + name;
    node.op = op;
    std::vector<Shape> term_shapes;
    for (const auto& term : terms) {
      Term t;
      for (const std::string& producer : term) {
        const NodeId id = Id(producer);
        t.push_back({id, 0, graph_.node(id).output.c});
      }
      term_shapes.push_back(graph_.node(t[0].producer).output);
      node.inputs.push_back(std::move(t));
    }
    node.output = InferOpOutput(op, term_shapes, node.name);
    graph_.nodes.push_back(std::move(node));
    return static_cast<NodeId>(graph_.nodes.size()) - 1;
  }
  NodeId Add(const std::string& name, const OpParams& op, const std::string& producer) {
    return Add(name, op, std::vector<std::vector<std::string>>{{producer}});
  }

  NodeId Id(const std::string& name) const {
    const auto id = graph_.Find(prefix_ + name);
    if (!id) throw Error("test graph has no node " + prefix_ + name);
    return *id;
  }

  //! Closes the graph into blocks ending at `exits` (default: one block
  //! ending at the last node) and checks it with InferShapes. Later calls
  //! return the same graph.
  Graph Done(std::vector<std::string> exits = {}) {
    if (!graph_.blocks.empty()) return graph_;
    std::vector<NodeId> exit_ids;
    for (const auto& e : exits) exit_ids.push_back(Id(e));
    if (exit_ids.empty()) exit_ids.push_back(static_cast<NodeId>(graph_.nodes.size()) - 1);
    NodeId enter = 0;
    for (NodeId exit : exit_ids) {
      Block block;
      block.enter = enter;
      for (NodeId id = enter + 1; id < exit; ++id) block.inner.push_back(id);
      block.exit = exit;
      graph_.blocks.push_back(block);
      enter = exit;
    }
    InferShapes(graph_);
    return graph_;
  }

  //! A stage over unprefixed names.
  Stage Make(Strategy strategy, const std::vector<std::vector<std::string>>& groups) const {
    Stage stage{strategy, {}};
    for (const auto& g : groups) {
      std::vector<NodeId> ids;
      for (const auto& n : g) ids.push_back(Id(n));
      stage.groups.push_back(std::move(ids));
    }
    return stage;
  }

 private:
  std::string prefix_;
  Graph graph_;
};

inline std::string KeyOf(const Graph& graph, const Stage& stage) {
  return MakeStageSpec(graph, stage).Key();
}

}  // namespace ios::stage_testing
