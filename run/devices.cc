#include "run/devices.h"

#include "common/error.h"
#include "worker/cpu_device.h"
#include "worker/cuda/cuda_device.h"
#ifdef IOS_HAVE_CUDA_BACKEND
#include "worker/cuda/cuda_api_real.h"
#endif
#include "worker/exec_backend.h"

namespace ios::run {

std::unique_ptr<exec::Device> OpenDevice(const std::string& name) {
  if (name == "reference") return exec::MakeReferenceDevice();
  if (name == "cpu" || name.starts_with("cpu,")) {
    return worker::MakeCpuDevice(worker::ParseCpuOptions(name));
  }
  if (worker::IsCudaName(name)) {
#ifdef IOS_HAVE_CUDA_BACKEND
    return worker::MakeRealCudaDevice(worker::ParseCudaOptions(name));
#else
    worker::ParseCudaOptions(name);  // a bad option is said first
    throw Error("--device " + name +
                ": this ios-run was built without the cuda backend (CMake found no nvcc or no "
                "cuDNN; docs/gpu.md says how to build it)");
#endif
  }
  if (name.starts_with("sim:")) {
    throw Error("--device " + name +
                ": a simulated device models latencies and cannot run a network; use cpu");
  }
  throw Error("unknown --device '" + name +
              "'; valid: cpu[,threads=N], cuda[:GPU][,math=fp32|tf32][,algo=...]"
              "[,workspace_mb=M], reference");
}

std::unique_ptr<worker::Backend> OpenMeasuringBackend(const std::string& name) {
  return worker::MakeExecBackend(OpenDevice(name));
}

}  // namespace ios::run
