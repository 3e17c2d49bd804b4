// A whole network under a schedule, as a worker runs it end to end: what
// the search verifies its best candidates with (docs/execution.md,
// "Verified schedules"). Self-contained like a StageSpec: a worker needs
// nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/stage.h"

namespace ios {

struct NetworkSpec {
  Graph graph;                // shapes inferred
  std::vector<Stage> stages;  // in execution order, every operator once
  //! Seeds the random weights and input (exec::WeightStore::Random): the
  //! latency does not depend on the values, but a rerun sees the same ones.
  uint64_t weight_seed = 1;

  //! "network squeezenet: 26 operators in 18 stages" (for logs).
  std::string Describe() const;
};

//! Checks that `stages` run every operator of `graph` (all nodes but the
//! input) exactly once, each after its producers, and that no group of a
//! stage is empty. Throws ios::Error naming the stage, the operator and
//! what is wrong.
void CheckScheduleCovers(const Graph& graph, const std::vector<Stage>& stages);

//! Canonical text that identifies `spec` in the profiling DB: the graph's
//! IOS JSON (compact), the stages by node id and strategy, and the seed.
std::string NetworkKey(const NetworkSpec& spec);

}  // namespace ios
