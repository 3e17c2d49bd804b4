#include "run/devices.h"

#include "common/error.h"
#include "worker/cpu_device.h"
#include "worker/exec_backend.h"

namespace ios::run {

std::unique_ptr<exec::Device> OpenDevice(const std::string& name) {
  if (name == "reference") return exec::MakeReferenceDevice();
  if (name == "cpu" || name.starts_with("cpu,")) {
    return worker::MakeCpuDevice(worker::ParseCpuOptions(name));
  }
  if (name.starts_with("sim:")) {
    throw Error("--device " + name +
                ": a simulated device models latencies and cannot run a network; use cpu");
  }
  throw Error("unknown --device '" + name + "'; valid: cpu, cpu,threads=N, reference");
}

std::unique_ptr<worker::Backend> OpenMeasuringBackend(const std::string& name) {
  return worker::MakeExecBackend(OpenDevice(name));
}

}  // namespace ios::run
