// Backend selection by command-line name.
#include "worker/backend.h"

#include <string_view>

#include "common/error.h"
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
bool IsUnbuiltBackend(const std::string& name) {
  return name == "cuda" || (!kHaveCpu && IsCpuName(name));
}

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
  if (IsUnbuiltBackend(name)) {
    throw Error("backend '" + name +
                "' is not available in this build; available: " + ValidNames());
  }
  throw Error("unknown backend '" + name + "'; valid names: " + ValidNames() +
              (kHaveCpu ? " (cuda is not available in this build)"
                        : " (cuda and cpu are not available in this build)"));
}

}  // namespace ios::worker
