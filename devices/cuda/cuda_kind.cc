// The cuda kind by name (devices/kinds.h): its grammar and options are
// known everywhere, so a coordinator without CUDA can check a name and
// start an ios-worker for it; its devices open only where a tool links
// the CUDA runtime (LinkedRegistry, devices/linked.h).
#include "common/error.h"
#include "devices/cuda/cuda_device.h"
#include "devices/kinds.h"

namespace ios::devices {
namespace {

[[noreturn]] void NotLinked(const std::string& name, const BackendOptions& options) {
  devices::ParseCudaOptions(name, options.gpu);  // a bad option is said first
  throw Error("backend '" + name +
              "': the cuda backend runs in ios-worker and ios-run built with CUDA; this process "
              "does not link it. Start `ios-worker --backend " +
              name +
              " --connect tcp://HOST:PORT` on the GPU host and give ios-coordinator --bind "
              "tcp://*:PORT (docs/gpu.md)");
}

}  // namespace

BackendKind CudaKind() {
  BackendKind kind;
  kind.prefix = "cuda";
  kind.grammar = "cuda[:GPU][,math=fp32|tf32][,algo=exhaustive|heuristic][,workspace_mb=M]";
  RefuseToOpen(kind, NotLinked);
  kind.needs_own_process = true;
  kind.replays_graphs = true;
  // Stages are timed as executed by replaying a graph of their copies
  // (CudaPreparedProgram::TimedRunsAsExecuted): its own, quieter defaults.
  kind.timing = DeviceTiming::kGraphReplayed;
  kind.cross_check_on = "cpu";
  return kind;
}

}  // namespace ios::devices
