// The simulated GPU: an analytical, deterministic latency model from public
// spec-sheet figures. Everything it produces is labelled "simulated".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "devices/backend.h"

namespace ios::devices {

//! Public figures of one GPU model.
struct SimGpuSpec {
  std::string name;  // "v100", ...
  int sm_count = 0;
  double peak_tflops = 0;    // FP32
  double bandwidth_gbs = 0;  // DRAM
  double launch_us = 0;      // per-kernel launch overhead
  double memory_gib = 0;     // a stage that needs more fails with out-of-memory
};

//! The built-in GPU models (v100, k80, 2080ti, a100, h100).
const std::vector<SimGpuSpec>& SimGpuSpecs();

struct SimOptions {
  //! Relative standard deviation of multiplicative noise; 0 = exact model.
  double noise = 0;
  uint64_t noise_seed = 0;
  //! Sleep this long per measurement, to stand in for a real GPU's cost in
  //! scaling benchmarks. Does not change the reported latency.
  double delay_ms = 0;
  //! GPUs of this model the backend stands for, joined by NVLink
  //! (hios::PresetLink(kNvlink)): MeasureLink answers with that preset.
  int devices = 1;
};

//! Fills facts.operator_work_ms and stage_fixed_ms (StageCostFacts) when
//! `device` is a simulated GPU of this build's model (its fingerprint is one
//! this build gives, noise aside); leaves them empty otherwise.
void AddSimWorkFacts(const DeviceInfo& device, StageCostFacts& facts);

//! Throws ios::Error listing the known models if `model` is unknown.
std::unique_ptr<Backend> CreateSimBackend(const std::string& model, const SimOptions& options = {});

}  // namespace ios::devices
