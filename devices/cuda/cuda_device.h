// The cuda device: exec programs played with cuDNN and CUDA streams
// (docs/gpu.md). Everything it decides — descriptors per view, algorithm
// choice, which stream and handle run a lane, fork and join events, what a
// capture records — is here, in plain C++ on top of cuda::Api, so it is
// compiled and tested (against a recording fake) on machines without CUDA.
// The library calls themselves are in cuda_api_real.cc.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "devices/cuda/cuda_api.h"
#include "exec/device.h"

namespace ios::devices {

struct CudaOptions {
  int gpu = 0;
  //! fp32: strict FP32 (cuDNN's FMA math); tf32: TF32 tensor cores where
  //! the GPU has them (Ampere and newer). Part of the fingerprint.
  enum class Math { kFp32, kTf32 } math = Math::kFp32;
  //! exhaustive: time every algorithm once per convolution shape
  //! (cudnnFindConvolutionForwardAlgorithmEx); heuristic: take cuDNN's
  //! ranking without running anything.
  enum class Algo { kExhaustive, kHeuristic } algo = Algo::kExhaustive;
  //! The most workspace one convolution may use, per stream.
  int workspace_mb = 256;
};

//! How many copies of a measured stage one recorded graph holds
//! (TimedRunsAsExecuted, docs/gpu.md): a replay's own start (a few
//! microseconds between graphs on one stream, which no stage inside a
//! network graph pays) is shared by 4 copies, within about 1 us of the
//! in-network cost at batch 1; more copies would cost capture and
//! instantiation time per measurement (profiling speed) for less than that.
constexpr int kExecutedCopies = 4;

//! Parses "cuda[:GPU][,math=fp32|tf32][,algo=heuristic|exhaustive]
//! [,workspace_mb=M]"; `default_gpu` (ios-worker --gpu) applies when the
//! name gives none. Throws ios::Error naming the option and the grammar.
CudaOptions ParseCudaOptions(const std::string& name, int default_gpu = 0);

//! Whether `name` asks for the cuda backend ("cuda", "cuda:1", "cuda,...").
bool IsCudaName(const std::string& name);

//! Set once, never reset: whether something that is said once per process
//! (the unlocked-clocks warning) has been said.
class OnceLatch {
 public:
  bool Done() const { return done_.load(); }
  //! True for the one caller that sets it.
  bool Set() { return !done_.exchange(true); }

 private:
  std::atomic<bool> done_{false};
};

//! A cuda device on `api`. Throws exec::ExecError when there is no such GPU
//! (or no driver) with the library's message, ios::Error for bad options.
std::unique_ptr<exec::Device> MakeCudaDevice(std::unique_ptr<cuda::Api> api,
                                             const CudaOptions& options);
//! The same, saying what is said once per process once per `said` instead
//! (tests hand each device under test a latch of their own).
std::unique_ptr<exec::Device> MakeCudaDevice(std::unique_ptr<cuda::Api> api,
                                             const CudaOptions& options, OnceLatch& said);

}  // namespace ios::devices
