// Where a model comes from on a command line: a zoo name or a graph file.
#pragma once

#include <string>

#include "common/graph.h"

namespace ios {

struct LoadedModel {
  Graph graph;
  std::string name;  // the zoo name, the file's "name", or else its stem
};

//! A zoo name (common/zoo.h), or else the path of an IOS JSON graph file
//! (common/ios_json.h, with its checks). Throws ios::Error listing the zoo
//! names when `model` is neither.
LoadedModel LoadModel(const std::string& model);

}  // namespace ios
