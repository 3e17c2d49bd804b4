// The cpu kind where CMake found no oneDNN or OpenMP: the name is right,
// the library is missing, and the error says so.
#include "common/error.h"
#include "devices/kinds.h"

namespace ios::devices {
namespace {

[[noreturn]] void Unbuilt(const std::string& name, const BackendOptions&) {
  throw Error("backend '" + name +
              "' is not available in this build (CMake found no oneDNN or no OpenMP: install "
              "libdnnl-dev and ocl-icd-opencl-dev, docs/cpu-backend.md)");
}

}  // namespace

BackendKind CpuKind() {
  BackendKind kind;
  kind.prefix = "cpu";
  kind.grammar = "cpu[,threads=N][,cpus=LIST][,cache=cold|warm] (not in this build)";
  RefuseToOpen(kind, Unbuilt);
  return kind;
}

}  // namespace ios::devices
