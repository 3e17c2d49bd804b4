// The model zoo: the four networks the IOS paper benchmarks, built natively.
#pragma once

#include <string>
#include <vector>

#include "common/graph.h"

namespace ios {

struct ZooEntry {
  std::string name;
  std::string description;
};

//! inception_v3, squeezenet, nasnet, randwire.
const std::vector<ZooEntry>& ZooModels();

//! Builds a zoo model with shapes inferred. Throws ios::Error listing the
//! known names when `name` is unknown.
Graph BuildZooModel(const std::string& name);

}  // namespace ios
