// Backend selection by command-line name.
#include "worker/backend.h"

#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "worker/cuda/cuda_device.h"
#include "worker/sim_backend.h"
#ifdef IOS_HAVE_CPU_BACKEND
#include "worker/cpu_device.h"
#include "worker/exec_backend.h"
#endif

namespace ios::worker {
namespace {

constexpr std::string_view kSimPrefix = "sim:";

#ifdef IOS_HAVE_CPU_BACKEND
constexpr bool kHaveCpu = true;
#else
constexpr bool kHaveCpu = false;
#endif

bool IsCpuName(const std::string& name) { return name == "cpu" || name.starts_with("cpu,"); }

//! Real-device backends: named here so the message can tell a user that the
//! name is right but this build lacks the library (cuDNN, oneDNN).
bool IsUnbuiltBackend(const std::string& name) { return !kHaveCpu && IsCpuName(name); }

std::string ValidNames() {
  std::string names = kHaveCpu ? "cpu[,threads=N][,cache=cold|warm]" : "";
  for (const SimGpuSpec& gpu : SimGpuSpecs()) {
    names += (names.empty() ? "" : ", ") + std::string(kSimPrefix) + gpu.name;
  }
  return names;
}

}  // namespace

std::unique_ptr<Backend> CreateBackend(const std::string& name, const BackendOptions& options) {
  if (name.starts_with(kSimPrefix)) {
    if (options.sim_delay_ms < 0) throw Error("sim delay must be >= 0 ms");
    SimOptions sim;
    sim.delay_ms = options.sim_delay_ms;
    return CreateSimBackend(name.substr(kSimPrefix.size()), sim);
  }
#ifdef IOS_HAVE_CPU_BACKEND
  if (IsCpuName(name)) return MakeExecBackend(MakeCpuDevice(ParseCpuOptions(name)));
#endif
  // Served by ios-worker and ios-run only (they link CUDA; this may not).
  if (IsCudaName(name)) {
    throw Error("backend '" + name +
                "': the cuda backend runs in ios-worker (and ios-run), which link CUDA; this "
                "process does not. Start `ios-worker --backend " +
                name +
                " --connect tcp://HOST:PORT` on the GPU host and give ios-coordinator --bind "
                "tcp://*:PORT (docs/gpu.md)");
  }
  if (IsUnbuiltBackend(name)) {
    throw Error("backend '" + name +
                "' is not available in this build; available: " + ValidNames());
  }
  throw Error("unknown backend '" + name + "'; valid names: " + ValidNames() +
              (kHaveCpu ? "; cuda[:GPU] in ios-worker and ios-run"
                        : "; cuda[:GPU] in ios-worker and ios-run (cpu is not available in this "
                          "build)"));
}

namespace {

//! The number after `name` (e.g. "|threads=") in a fingerprint, or 0.
double FingerprintNumber(const std::string& fingerprint, std::string_view name) {
  const size_t at = fingerprint.find(name);
  if (at == std::string::npos) return 0;
  const char* text = fingerprint.c_str() + at + name.size();
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  return end == text || !(value > 0) || value > 1e6 ? 0 : value;
}

}  // namespace

StageCostFacts StageCostFactsOf(const DeviceInfo& device) {
  StageCostFacts facts;
  if (device.backend == "sim") {
    facts.serial_op_ms = FingerprintNumber(device.fingerprint, "|launch_us=") / 1000;
    AddSimWorkFacts(device, facts);
  } else if (device.backend == "cpu") {
    facts.max_parallelism = static_cast<int>(FingerprintNumber(device.fingerprint, "|threads="));
  }
  return facts;
}

}  // namespace ios::worker
