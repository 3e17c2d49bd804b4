// The CUDA runtime and cuDNN behind cuda::Api (cuda_api_real.cc), and the
// cuda backend they make. Only ios-worker and ios-run link this: the
// coordinator must start on machines without CUDA.
#pragma once

#include <memory>

#include "devices/cuda/cuda_api.h"
#include "devices/cuda/cuda_device.h"
#include "exec/device.h"

namespace ios::cuda {

//! The real thing. Creating it touches no GPU; the first call does.
std::unique_ptr<Api> MakeRealApi();

}  // namespace ios::cuda

namespace ios::devices {

//! A cuda device on the real API. Throws exec::ExecError when there is no
//! driver or no such GPU.
inline std::unique_ptr<exec::Device> MakeRealCudaDevice(const CudaOptions& options) {
  return MakeCudaDevice(cuda::MakeRealApi(), options);
}

}  // namespace ios::devices
