// One instance of the HIOS simulation fixtures (shared/fixtures/hios-sim,
// FORMAT.md): a random DAG, its costs, and what the reference code reported.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hios/costs.h"
#include "hios/dag.h"
#include "hios/schedule.h"

namespace ios::hios {

//! The reference's results; absent on the instances where it failed.
struct UpstreamResults {
  double sequential = 0;
  std::optional<double> ios;
  double lp_inter_only = 0, hios_lp = 0, mr_inter_only = 0, hios_mr = 0;
  std::vector<int> lp_device_of, mr_device_of;  // per op
  //! Per GPU, stages as listed (in id order: NOT an executable order).
  MultiSchedule lp_stages, mr_stages;
};

struct SimInstance {
  std::string path;
  int seed = 0;
  int devices = 0;
  int window_size = 0;
  int max_streams = 0;
  Dag dag;
  std::vector<double> op_ms, utilization;
  //! t(S) = α·Σt + (1-α)·max(Σ t·u, max t) for every stage, as the reference
  //! computed it (pair_group_times is only checked against it).
  std::shared_ptr<const TableCosts> costs;
  std::optional<UpstreamResults> upstream;
  std::string upstream_error;  // "" when it completed
};

//! Reads `path` ("format": "hios-sim-instance/v1"). Throws ios::Error naming
//! the file, the field (e.g. "operators[3].time"), what was found and what
//! was expected.
SimInstance LoadSimInstance(const std::string& path);

}  // namespace ios::hios
