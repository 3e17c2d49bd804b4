#include "devices/linked.h"

#include "common/error.h"
#include "devices/cuda/cuda_device.h"
#include "devices/exec_backend.h"
#include "devices/kinds.h"
#ifdef IOS_HAVE_CUDA_BACKEND
#include "devices/cuda/cuda_api_real.h"
#endif

namespace ios::devices {
namespace {

#ifdef IOS_HAVE_CUDA_BACKEND
// The by-name cuda kind with its devices opened on the real runtime.
BackendKind WithRealCuda(BackendKind kind) {
  kind.open_device = [](const std::string& name, const BackendOptions& options) {
    return devices::MakeRealCudaDevice(devices::ParseCudaOptions(name, options.gpu));
  };
  kind.open_backend = [open = kind.open_device](const std::string& name,
                                                const BackendOptions& options) {
    return MakeExecBackend(open(name, options));
  };
  return kind;
}
#else
// Said where this build was made without nvcc or cuDNN.
[[noreturn]] void NotBuilt(const std::string& name, const BackendOptions& options) {
  devices::ParseCudaOptions(name, options.gpu);  // a bad option is said first
  throw Error("backend '" + name +
              "': this build has no cuda backend (CMake found no nvcc or no cuDNN; docs/gpu.md "
              "says how to build it)");
}

BackendKind WithRealCuda(BackendKind kind) {
  RefuseToOpen(kind, NotBuilt);
  return kind;
}
#endif

}  // namespace

const Registry& LinkedRegistry() {
  static const Registry registry = [] {
    Registry linked;
    for (const BackendKind& kind : BuiltinRegistry().kinds()) {
      linked.Add(kind.prefix == "cuda" ? WithRealCuda(kind) : kind);
    }
    return linked;
  }();
  return registry;
}

}  // namespace ios::devices
