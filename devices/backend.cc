#include "devices/backend.h"

namespace ios::devices {

MeasureResult Backend::MeasureNetwork(const NetworkSpec& network, int, const MeasureSettings&) {
  MeasureResult result;
  result.error = MeasureError::kUnsupported;
  result.error_message =
      Device().backend + ": cannot time a whole network (" + network.Describe() + ")";
  return result;
}

}  // namespace ios::devices
