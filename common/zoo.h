// The model zoo, built natively: the four networks the IOS paper
// benchmarks, and generated networks of the kinds the Serenity paper does
// (RandWire for CIFAR from a seed, DARTS).
#pragma once

#include <string>
#include <vector>

#include "common/graph.h"

namespace ios {

struct ZooEntry {
  std::string name;
  std::string description;
  //! Made by a generator (a benchmark kind of the Serenity paper), not one of
  //! the IOS paper's four. The search's default budgets are sized for those
  //! four; a random draw may exceed them (randwire_cifar10's seed 1 does).
  bool generated = false;
};

//! inception_v3, squeezenet, nasnet, randwire, then the generated
//! randwire_cifar10, randwire_cifar100, darts_cell, darts_imagenet.
const std::vector<ZooEntry>& ZooModels();

//! Whether `name` means a zoo model: a listed name, or a listed name followed
//! by ":" and parameters (which BuildZooModel then checks).
bool IsZooModelName(const std::string& name);

//! Builds a zoo model with shapes inferred. The RandWire CIFAR models take a
//! seed as "randwire_cifar10:s=7" (the plain name is seed 1); the graph is
//! named as asked. Throws ios::Error listing the known names when the name
//! is unknown, and naming the parameter and what was expected when a
//! parameter is unknown, malformed or given to a model that takes none.
Graph BuildZooModel(const std::string& name);

}  // namespace ios
