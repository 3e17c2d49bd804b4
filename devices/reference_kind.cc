// The reference kind (devices/kinds.h): exec's naive device, the arithmetic
// every other backend is checked against. Slow by design.
#include "common/error.h"
#include "devices/exec_backend.h"
#include "devices/kinds.h"

namespace ios::devices {

BackendKind ReferenceKind() {
  BackendKind kind;
  kind.prefix = "reference";
  kind.grammar = "reference";
  const auto open = [](const std::string& name) {
    if (name != "reference")
      throw Error("backend '" + name + "': the reference device has no options");
    return exec::MakeReferenceDevice();
  };
  kind.open_backend = [open](const std::string& name, const BackendOptions&) {
    return MakeExecBackend(open(name));
  };
  kind.open_device = [open](const std::string& name, const BackendOptions&) { return open(name); };
  return kind;
}

}  // namespace ios::devices
