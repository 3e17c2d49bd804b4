#include "common/measurement.h"

namespace ios {

std::string MeasureSettings::Key() const {
  return "w" + std::to_string(warmup) + "-n" + std::to_string(number) + "-r" +
         std::to_string(repeat) + "-" + dtype;
}

const char* ToString(MeasureError error) {
  switch (error) {
    case MeasureError::kNone:
      return "none";
    case MeasureError::kOutOfMemory:
      return "out_of_memory";
    case MeasureError::kUnsupported:
      return "unsupported";
    case MeasureError::kBackendFailure:
      return "backend_failure";
    case MeasureError::kTimeout:
      return "timeout";
  }
  return "?";
}

bool IsTransient(MeasureError error) {
  return error == MeasureError::kTimeout || error == MeasureError::kBackendFailure;
}

}  // namespace ios
