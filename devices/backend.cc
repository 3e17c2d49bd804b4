#include "devices/backend.h"

namespace ios::devices {

MeasureResult Backend::MeasureNetwork(const NetworkSpec& network, int, const MeasureSettings&) {
  MeasureResult result;
  result.error = MeasureError::kUnsupported;
  result.error_message =
      Device().backend + ": cannot time a whole network (" + network.Describe() + ")";
  return result;
}

LinkMeasurement Backend::MeasureLink(const LinkQuery&) {
  return LinkMeasurement::Unsupported(Device().backend + " (" + Device().name +
                                      "): this backend cannot time copies between devices");
}

}  // namespace ios::devices
