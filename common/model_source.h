// Where a model comes from on a command line: a zoo name or a graph file.
#pragma once

#include <string>
#include <string_view>

#include "common/graph.h"

namespace ios {

struct LoadedModel {
  Graph graph;
  std::string name;  // the zoo name, the file's "name", or else its stem
};

//! Names the zoo explicitly: "zoo:squeezenet".
inline constexpr std::string_view kZooPrefix = "zoo:";

//! A zoo name (common/zoo.h, optionally with kZooPrefix), or else the path
//! of an IOS JSON graph file (common/ios_json.h, with its checks). A bare
//! zoo name that is also an existing file is refused as ambiguous (the
//! message says to write ./NAME or zoo:NAME). Throws ios::Error listing the
//! zoo names when `model` is neither.
LoadedModel LoadModel(const std::string& model);

}  // namespace ios
