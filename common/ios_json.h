// Import and export of the IOS reference implementation's JSON graph and
// schedule format ({"name", "input", "blocks": [{enter_node, inner_nodes,
// exit_node, stages}]}).
#pragma once

#include <string>
#include <vector>

#include "common/graph.h"

namespace ios {

//! A graph together with the stages stored in the file, per block (names of
//! nodes, grouped). Blocks without stored stages have an empty list.
struct IosModel {
  Graph graph;
  std::vector<std::vector<std::vector<std::vector<std::string>>>> stages;  // [block][stage][group][node]
  bool HasSchedule() const;
};

//! Parses IOS JSON text; `source` names the file in error messages. Throws
//! ios::Error naming the source, the node and the field on malformed input,
//! and runs InferShapes (checking stored output shapes against it).
IosModel ParseIosJson(const std::string& text, const std::string& source);
IosModel LoadIosJson(const std::string& path);

//! Serialises a graph (and optionally per-block stages) in IOS JSON; what
//! ParseIosJson reads back is structurally identical.
std::string ToIosJson(const Graph& graph,
                      const std::vector<std::vector<std::vector<std::vector<std::string>>>>& stages = {});

//! True when both graphs have the same operators, parameters, shapes, edges
//! and blocks in the same order, names aside. On false, `difference` says
//! where they first differ.
bool StructurallyEqual(const Graph& a, const Graph& b, std::string* difference = nullptr);

}  // namespace ios
