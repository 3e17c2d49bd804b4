// The cpu kind where CMake found no oneDNN or OpenMP: the name is right,
// the library is missing, and the error says so.
#include "common/error.h"
#include "devices/kinds.h"

namespace ios::devices {
namespace {

[[noreturn]] void Unbuilt(const std::string& name) {
  throw Error("backend '" + name +
              "' is not available in this build (CMake found no oneDNN or no OpenMP: install "
              "libdnnl-dev and ocl-icd-opencl-dev, docs/cpu-backend.md)");
}

}  // namespace

BackendKind CpuKind() {
  BackendKind kind;
  kind.prefix = "cpu";
  kind.grammar = "cpu[,threads=N][,cache=cold|warm] (not in this build)";
  kind.open_backend = [](const std::string& name,
                         const BackendOptions&) -> std::unique_ptr<Backend> { Unbuilt(name); };
  kind.open_device = [](const std::string& name,
                        const BackendOptions&) -> std::unique_ptr<exec::Device> { Unbuilt(name); };
  return kind;
}

}  // namespace ios::devices
