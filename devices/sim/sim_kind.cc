// The sim kind's names and facts (devices/kinds.h).
#include "common/error.h"
#include "devices/kinds.h"
#include "devices/sim/sim_backend.h"

namespace ios::devices {

BackendKind SimKind() {
  std::string models;
  for (const SimGpuSpec& gpu : SimGpuSpecs()) models += (models.empty() ? "" : "|") + gpu.name;
  BackendKind kind;
  kind.prefix = "sim";
  kind.grammar = "sim:" + models;
  kind.timing = DeviceTiming::kModelled;
  kind.open_backend = [grammar = kind.grammar](const std::string& name,
                                               const BackendOptions& options) {
    if (!name.starts_with("sim:")) {
      throw Error("backend '" + name + "': a simulated GPU is named " + grammar);
    }
    if (options.sim_delay_ms < 0) throw Error("sim delay must be >= 0 ms");
    SimOptions sim;
    sim.delay_ms = options.sim_delay_ms;
    if (options.devices < 1) throw Error("sim: devices must be >= 1");
    sim.devices = options.devices;
    return CreateSimBackend(name.substr(4), sim);
  };
  kind.open_device = [](const std::string& name,
                        const BackendOptions&) -> std::unique_ptr<exec::Device> {
    throw Error("device '" + name +
                "': a simulated device models latencies and cannot run a network; use cpu");
  };
  kind.cost_facts = [](const DeviceInfo& device, StageCostFacts& facts) {
    // One host thread launches every kernel of a stage, launch_us each.
    facts.serial_op_ms = FingerprintNumber(device.fingerprint, "|launch_us=") / 1000;
    // An operator's kernels take the same time in a chain as alone.
    facts.chain_discount_sound = true;
    AddSimWorkFacts(device, facts);
  };
  return kind;
}

}  // namespace ios::devices
