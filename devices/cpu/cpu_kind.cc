// The cpu kind (devices/kinds.h): oneDNN on this machine's cores.
#include "devices/cpu/cpu_device.h"
#include "devices/exec_backend.h"
#include "devices/kinds.h"

namespace ios::devices {

BackendKind CpuKind() {
  BackendKind kind;
  kind.prefix = "cpu";
  kind.grammar = "cpu[,threads=N][,cpus=LIST][,cache=cold|warm]";
  kind.timing = DeviceTiming::kHostLaunched;
  kind.open_backend = [](const std::string& name, const BackendOptions&) {
    return MakeExecBackend(MakeCpuDevice(ParseCpuOptions(name)));
  };
  kind.open_device = [](const std::string& name, const BackendOptions&) {
    return MakeCpuDevice(ParseCpuOptions(name));
  };
  kind.cost_facts = [](const DeviceInfo& device, StageCostFacts& facts) {
    // A lane never runs faster on fewer threads than the stage's budget.
    facts.max_parallelism = static_cast<int>(FingerprintNumber(device.fingerprint, "|threads="));
    facts.cache_bytes =
        static_cast<int64_t>(FingerprintNumber(device.fingerprint, "|llc_kib=")) * 1024;
  };
  return kind;
}

}  // namespace ios::devices
