// What the simulated GPU's files share (devices/sim/sim_backend.h is the
// public face): the performance model of sim_model.cc, as the backend and
// its work facts in sim_backend.cc use it. Not for use outside devices/sim.
#pragma once

#include <string>
#include <vector>

#include "devices/sim/sim_backend.h"

namespace ios::devices::sim_detail {

// ---- Model constants. Changing any of them changes the fingerprint; bump
// kModelVersion when the formulas change so old DB entries are not reused.
constexpr int kModelVersion = 1;
constexpr double kBytesPerValue = 4;           // float32 everywhere
constexpr double kConvEfficiency = 0.70;       // cuDNN implicit GEMM vs FP32 peak
constexpr double kDepthwiseEfficiency = 0.25;  // direct kernels, little reuse
constexpr double kElementwiseEfficiency = 0.50;
constexpr double kBandwidthEfficiency = 0.80;  // achievable share of DRAM peak
constexpr double kThreadsPerBlock = 256;       // elementwise: one output per thread
constexpr double kConvTile = 64;               // output pixels x channels per conv block
constexpr double kSplitKChunk = 256;           // reduction length worth its own block
constexpr double kPlanesPerBlock = 8;          // global pooling: one warp per plane
constexpr double kBlocksPerSm = 2;             // resident blocks that fill one SM
constexpr int kDepthwiseMaxChannels = 8;       // grouped convs this thin run as direct kernels
constexpr double kInterference = 0.05;         // extra slowdown of oversubscribed SMs
constexpr double kStageSyncUs = 3.0;           // events + stream waits closing a stage
constexpr double kMaxWorkspaceBytes = 512.0 * (1 << 20);
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

//! Thread blocks the whole GPU holds at once: a kernel with fewer leaves SMs idle.
double BlockCapacity(const SimGpuSpec& gpu);

//! One kernel as the device sees it, for the whole batch, plus the memory it
//! keeps allocated.
struct KernelWork {
  double flops = 0;
  double bytes = 0;   // DRAM traffic: inputs + weights + output
  double blocks = 0;  // thread blocks launched
  double efficiency = kElementwiseEfficiency;
  double output_bytes = 0;
  double weight_bytes = 0;
  double workspace_bytes = 0;
  bool no_op = false;  // costs its launch only (e.g. an identity that only renames)
};

//! What a work estimate needs besides the op itself.
struct WorkContext {
  double batch = 1;
  double capacity = 1;  // thread blocks the whole GPU holds at once
};

//! A stage as the simulator runs it: kernels per stream, and its memory.
struct StagePlan {
  std::vector<std::vector<KernelWork>> streams;
  double memory_bytes = 0;
};

//! The kernels of `spec` per stream and the memory they keep, for ctx's
//! batch; throws ios::Error for a stage the model cannot run.
StagePlan PlanStage(const StageSpec& spec, const WorkContext& ctx);

//! What the kernels of `plan` keep one full GPU busy, in microseconds:
//! however they overlap, they cannot finish sooner after the first launch.
double FullGpuMicroseconds(const StagePlan& plan, const SimGpuSpec& gpu);

//! The stage's latency in microseconds: its streams replayed with the
//! launches and SM sharing, plus the stage's closing synchronisation.
double StageMicroseconds(const StagePlan& plan, const SimGpuSpec& gpu);

//! Everything of the model that decides a figure: the model version, the
//! GPU's figures and every constant above.
std::string ModelFingerprint(const SimGpuSpec& gpu);

}  // namespace ios::devices::sim_detail
