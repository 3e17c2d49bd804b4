// What the real cuda::Api needs beside the library calls
// (cuda_real_support.h). No legacy cuDNN call is used here: cuDNN's
// deprecation warnings are on, so none creeps in.
#define CUDNN_WARN_DEPRECATED

#include "devices/cuda/cuda_real_support.h"

#include <dlfcn.h>

#include <string>

namespace ios::cuda {
namespace {

// NVML, opened at run time (it comes with the driver, not the toolkit):
// only to tell whether application clocks are set. C declarations of the
// few entry points used, as documented in nvml.h.
using NvmlDevice = void*;
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlByBusId = int (*)(const char*, NvmlDevice*);
using NvmlClock = int (*)(NvmlDevice, int, unsigned*);
constexpr int kNvmlClockSm = 1;

// cuDNN 8.0 introduced strict-FP32 math (TF32 arrived with it); before it
// the default math of FP32 convolutions was FP32.
#if CUDNN_MAJOR >= 8
constexpr cudnnMathType_t kStrictFp32Math = CUDNN_FMA_MATH;
#else
constexpr cudnnMathType_t kStrictFp32Math = CUDNN_DEFAULT_MATH;
#endif

}  // namespace

cudnnMathType_t ToDnn(MathType math) {
  switch (math) {
    case MathType::kFma:
      return kStrictFp32Math;
    case MathType::kDefault:
      return CUDNN_DEFAULT_MATH;
    case MathType::kTensorOp:
      return CUDNN_TENSOR_OP_MATH;
  }
  return kStrictFp32Math;
}

MathType MathFromDnn(cudnnMathType_t math) {
  if (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) {
    return MathType::kTensorOp;
  }
  return math == kStrictFp32Math ? MathType::kFma : MathType::kDefault;
}

bool IsSticky(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
#if CUDART_VERSION >= 13000
    // Newer sticky errors (CUDA 13 headers): the context is gone too.
    case cudaErrorContained:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorExternalDevice:
    case cudaErrorMpsClientTerminated:
#endif
      return true;
    default:
      return false;
  }
}

Status FromCuda(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return Ok();
  Status status;
  status.call = call;
  status.message = std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
  if (error == cudaErrorMemoryAllocation) {
    status.code = Code::kOutOfMemory;
  } else if (IsSticky(error)) {
    status.code = Code::kDeviceLost;
  } else if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver ||
             error == cudaErrorInvalidDevice) {
    status.code = Code::kNoDevice;
  } else {
    status.code = Code::kFailure;
  }
  // A non-sticky error must not be reported again by the next call.
  (void)cudaGetLastError();
  return status;
}

Status FromDnn(cudnnStatus_t error, const char* call) {
  if (error == CUDNN_STATUS_SUCCESS) return Ok();
  Status status;
  status.call = call;
  status.message = cudnnGetErrorString(error);
#if CUDNN_MAJOR >= 9
  // cuDNN 9 reports sub-codes (CUDNN_STATUS_BAD_PARAM_*: 2000-2999,
  // CUDNN_STATUS_NOT_SUPPORTED_*: 3000-3999) and keeps the details of the
  // last error.
  const int category = error / 1000 * 1000;
  // NOT_SUPPORTED sub-codes about this machine's installation, not about
  // the problem: a fixed installation would run the stage.
  const bool installation = error == CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER ||
                            error == CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART ||
                            error == CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING ||
                            error == CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE;
  const bool refused = category == CUDNN_STATUS_BAD_PARAM;
  const bool unsupported = category == CUDNN_STATUS_NOT_SUPPORTED && !installation;
  const bool out_of_memory = error == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                             error == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
  char details[512] = {};
  cudnnGetLastErrorString(details, sizeof details);
  if (details[0] != '\0') status.message += std::string(" (") + details + ")";
#else
  const bool refused = error == CUDNN_STATUS_BAD_PARAM || error == CUDNN_STATUS_INVALID_VALUE;
  const bool unsupported =
      error == CUDNN_STATUS_NOT_SUPPORTED || error == CUDNN_STATUS_ARCH_MISMATCH;
  const bool out_of_memory = error == CUDNN_STATUS_ALLOC_FAILED;
#endif
  if (out_of_memory) {
    status.code = Code::kOutOfMemory;
  } else if (refused) {
    status.code = Code::kRefused;
  } else if (unsupported) {
    status.code = Code::kUnsupported;
  } else {
    // An execution failure may hide a sticky CUDA error; an internal error
    // or a failed execution may pass: both are measured again.
    const cudaError_t cuda_error = cudaPeekAtLastError();
    status.code = IsSticky(cuda_error) ? Code::kDeviceLost : Code::kFailure;
  }
  return status;
}

bool ApplicationClocksSet(int device, void*& nvml) {
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (nvml == nullptr) nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) return false;
  const auto init = reinterpret_cast<NvmlInit>(dlsym(nvml, "nvmlInit_v2"));
  const auto by_bus =
      reinterpret_cast<NvmlByBusId>(dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
  const auto app = reinterpret_cast<NvmlClock>(dlsym(nvml, "nvmlDeviceGetApplicationsClock"));
  const auto fallback =
      reinterpret_cast<NvmlClock>(dlsym(nvml, "nvmlDeviceGetDefaultApplicationsClock"));
  const auto shutdown = reinterpret_cast<NvmlShutdown>(dlsym(nvml, "nvmlShutdown"));
  if (init == nullptr || shutdown == nullptr || by_bus == nullptr || app == nullptr ||
      fallback == nullptr || init() != 0) {
    return false;
  }
  NvmlDevice handle = nullptr;
  unsigned current = 0, default_clock = 0;
  const bool read = by_bus(bus_id, &handle) == 0 && app(handle, kNvmlClockSm, &current) == 0 &&
                    fallback(handle, kNvmlClockSm, &default_clock) == 0;
  // Every successful nvmlInit is paired with one nvmlShutdown.
  (void)shutdown();
  // Set application clocks (nvidia-smi -ac) differ from the default ones.
  return read && current != default_clock;
}

}  // namespace ios::cuda
