// Import and export of the IOS reference implementation's JSON graph and
// schedule format ({"name", "input", "blocks": [{enter_node, inner_nodes,
// exit_node, stages}]}).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/graph.h"

namespace ios {

//! A graph together with the stages stored in the file, per block (names of
//! nodes, grouped). Blocks without stored stages have an empty list.
struct IosModel {
  Graph graph;
  std::vector<std::vector<std::vector<std::vector<std::string>>>>
      stages;  // [block][stage][group][node]
  bool HasSchedule() const;
};

//! Largest model or schedule file ReadJsonInputFile reads (64 MiB; the zoo's largest, NASNet,
//! is about a megabyte): a bound on the memory one bad argument can take.
inline constexpr std::uintmax_t kMaxModelFileBytes = std::uintmax_t{64} << 20;

//! Parses IOS JSON text; `source` names the file in error messages (and, its
//! stem, the model when the document has no top-level "name"). Throws
//! ios::Error naming the source, the node and the field on malformed input,
//! and runs InferShapes (checking stored output shapes against it), so a
//! model beyond the worker limits (common/limits.h) is refused.
IosModel ParseIosJson(const std::string& text, const std::string& source);
//! Reads and parses a model file with ReadJsonInputFile.
IosModel LoadIosJson(const std::string& path);

//! Reads a JSON input file (a model, a schedule) whole. Refuses anything but
//! a regular file (a directory, a FIFO, /dev/zero) and files larger than
//! kMaxModelFileBytes, before reading them, and stops reading at that bound
//! should the file grow. `kind` ("model", "schedule") words the messages.
//! Throws ios::Error naming the file and the reason.
std::string ReadJsonInputFile(const std::string& path, std::string_view kind);

//! Serialises a graph (and optionally per-block stages) in IOS JSON; what
//! ParseIosJson reads back is structurally identical, names and block parts
//! included (parts are stored as a block's "parts": lists of node names).
std::string ToIosJson(
    const Graph& graph,
    const std::vector<std::vector<std::vector<std::vector<std::string>>>>& stages = {});

//! True when both graphs have the same operators, parameters, shapes, edges
//! and blocks in the same order, names and block parts aside (the reference's
//! exports store no parts). On false, `difference` says
//! where they first differ.
bool StructurallyEqual(const Graph& a, const Graph& b, std::string* difference = nullptr);

}  // namespace ios
