// The simulated GPU: an analytical, deterministic latency model from public
// spec-sheet figures. Everything it produces is labelled "simulated".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "worker/backend.h"

namespace ios::worker {

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
};

//! Fills facts.operator_work_ms and stage_fixed_ms (StageCostFacts) when
//! `device` is a simulated GPU of this build's model (its fingerprint is one
//! this build gives, noise aside); leaves them empty otherwise.
void AddSimWorkFacts(const DeviceInfo& device, StageCostFacts& facts);

//! Throws ios::Error listing the known models if `model` is unknown.
std::unique_ptr<Backend> CreateSimBackend(const std::string& model, const SimOptions& options = {});

// --- For tests only (header-only, so the simulator's source is untouched) ---

//! Wraps `inner`: its first `answered` measurements are `inner`'s, and every
//! later one never returns, as on a hung device (ios-worker
//! --sim-hang-after, for tests of the worker's watchdog).
class HangAfterBackend final : public Backend {
 public:
  HangAfterBackend(std::unique_ptr<Backend> inner, int answered)
      : inner_(std::move(inner)), left_(answered) {}
  const DeviceInfo& Device() const override { return inner_->Device(); }
  MeasureResult Measure(const StageSpec& stage, int batch_size,
                        const MeasureSettings& settings) override {
    if (left_ > 0) {
      --left_;
      return inner_->Measure(stage, batch_size, settings);
    }
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }

 private:
  std::unique_ptr<Backend> inner_;
  int left_;
};

}  // namespace ios::worker
