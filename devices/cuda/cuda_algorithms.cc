#include "devices/cuda/cuda_algorithms.h"

#include <spdlog/spdlog.h>

#include <sstream>
#include <vector>

namespace ios::devices::cuda_detail {

using cuda::Code;

int AlignmentOf(const void* address) {
  const auto bits = reinterpret_cast<uintptr_t>(address);
  int alignment = 1;
  while (alignment < 256 && bits % (2 * static_cast<uintptr_t>(alignment)) == 0) alignment *= 2;
  return alignment;
}

std::string ProblemKey(const cuda::TensorLayout& x, const void* x_address,
                       const exec::ConvWeights& w, const void* w_address,
                       const cuda::ConvGeometry& geometry, const cuda::TensorLayout& y,
                       const void* y_address, const CudaOptions& options) {
  std::ostringstream problem;
  problem << "x=" << Describe(x) << " w=" << w.out_channels << "x" << w.in_per_group << "x"
          << w.kernel_h << "x" << w.kernel_w << " pad=" << geometry.pad_h << "," << geometry.pad_w
          << " stride=" << geometry.stride_h << "," << geometry.stride_w
          << " dil=" << geometry.dilation_h << "," << geometry.dilation_w
          << " groups=" << geometry.groups << " math=" << static_cast<int>(geometry.math)
          << " y=" << Describe(y) << " align=" << AlignmentOf(x_address) << ","
          << AlignmentOf(w_address) << "," << AlignmentOf(y_address)
          << (options.algo == CudaOptions::Algo::kExhaustive ? " find" : " heuristic")
          << " cap_mb=" << options.workspace_mb;
  return problem.str();
}

cuda::AlgoResult AlgorithmSearch::Choose(const std::string& problem, cuda::DnnHandle dnn,
                                         cuda::TensorDesc x, const void* input,
                                         cuda::FilterDesc filter, const void* kernel,
                                         cuda::ConvDesc conv, cuda::TensorDesc y, void* output,
                                         const std::string& where) {
  const bool exhaustive = options_.algo == CudaOptions::Algo::kExhaustive;
  const size_t cap = static_cast<size_t>(options_.workspace_mb) * 1024 * 1024;
  const auto known = cache_.chosen.find(problem);
  if (known != cache_.chosen.end()) return known->second;
  std::vector<cuda::AlgoResult> results;
  if (exhaustive) {
    if (!scratch_tried_) AllocateScratch(cap);
    Check(api_.FindConvolutionAlgorithms(dnn, x, input, filter, kernel, conv, y, output,
                                         pool_.scratch().get(), pool_.scratch_bytes(), results),
          where + ": finding its algorithm");
  } else {
    Check(api_.HeuristicConvolutionAlgorithms(dnn, x, filter, conv, y, results),
          where + ": ranking its algorithms");
  }
  const size_t usable = exhaustive ? pool_.scratch_bytes() : cap;
  for (const cuda::AlgoResult& result : results) {
    if (result.status != Code::kOk || result.workspace_bytes > usable) continue;
    // Strict FP32 was asked for: a result whose math may use TF32 is not.
    if (options_.math == CudaOptions::Math::kFp32 && result.math != cuda::MathType::kFma) continue;
    spdlog::debug("cuda: {}: algorithm {} ({} workspace, {:.3f} ms when found)", problem,
                  result.algo, MiB(double(result.workspace_bytes)), result.ms);
    // A choice made within less scratch than the cap (the GPU was short of
    // memory) is not kept: the next prepare may get the whole cap.
    if (usable == cap) cache_.chosen.emplace(problem, result);
    return result;
  }
  throw exec::ExecError(
      MeasureError::kUnsupported,
      "cuda: " + where + ": none of the " + std::to_string(results.size()) +
          " convolution algorithms cuDNN reported runs " + problem +
          " within workspace_mb=" + std::to_string(options_.workspace_mb) +
          (usable < cap ? " (only " + MiB(double(usable)) + " could be allocated)" : ""));
}

void AlgorithmSearch::Finish() {
  const size_t cap = static_cast<size_t>(options_.workspace_mb) * 1024 * 1024;
  if (pool_.scratch_bytes() < cap) {
    pool_.scratch() = DeviceMemory();
    pool_.scratch_bytes() = 0;
  }
}

void AlgorithmSearch::AllocateScratch(size_t cap) {
  scratch_tried_ = true;
  if (pool_.scratch_bytes() == cap) return;  // kept from an earlier search (or no cap)
  pool_.scratch() = DeviceMemory();
  pool_.scratch_bytes() = 0;
  for (size_t bytes = cap; bytes >= (size_t{1} << 20); bytes /= 2) {
    void* pointer = nullptr;
    const cuda::Status status = api_.Malloc(bytes, pointer);
    if (status.ok()) {
      pool_.scratch() = DeviceMemory(api_, pointer);
      pool_.scratch_bytes() = bytes;
      return;
    }
    if (status.code != Code::kOutOfMemory) {
      Fail(status, "allocating the algorithm search's workspace");
    }
  }
}

bool FusionRuns(AlgorithmCache& cache, const std::string& key,
                const std::function<cuda::Status()>& trial, const std::string& where) {
  const auto known = cache.fused_relu_runs.find(key);
  if (known != cache.fused_relu_runs.end()) return known->second;
  const cuda::Status status = trial();
  if (status.code == Code::kDeviceLost) {
    Fail(status, where + ": trying the convolution fused with bias and relu");
  }
  if (!status.ok()) {
    // Once per problem: the answer is remembered below. NOT_SUPPORTED is
    // the expected refusal; anything else is worth a line at info.
    spdlog::log(status.code == Code::kUnsupported ? spdlog::level::debug : spdlog::level::info,
                "cuda: {}: cuDNN does not run bias and relu fused into {} ({}: {}); three calls "
                "instead",
                where, key, status.call, status.message);
  }
  cache.fused_relu_runs.emplace(key, status.ok());
  return status.ok();
}

}  // namespace ios::devices::cuda_detail
