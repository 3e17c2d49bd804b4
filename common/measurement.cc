#include "common/measurement.h"

#include <cmath>

namespace ios {

std::string MeasureSettings::Key() const {
  std::string key = "w" + std::to_string(warmup) + "-n" + std::to_string(number) + "-r" +
                    std::to_string(repeat) + "-";
  if (Adaptive()) {
    key += "max" + std::to_string(max_repeat) + "-spread" +
           std::to_string(std::lround(max_relative_spread * 100)) + "%-";
  }
  key += dtype;
  // Isolated keys keep their old text: rows stored before protocols were
  // keyed were measured that way and stay valid for it.
  if (protocol == StageProtocol::kExecuted) {
    key += warm_weights ? "-executed-wwarm" : "-executed-wcold";
  }
  return key;
}

const char* ToString(StageProtocol protocol) {
  switch (protocol) {
    case StageProtocol::kIsolated:
      return "isolated";
    case StageProtocol::kExecuted:
      return "executed";
  }
  return "?";
}

StageProtocol ProtocolOfSettingsKey(std::string_view settings_key) {
  return settings_key.ends_with("-executed-wcold") || settings_key.ends_with("-executed-wwarm")
             ? StageProtocol::kExecuted
             : StageProtocol::kIsolated;
}

MeasureSettings DefaultMeasureSettings(bool simulated_device) {
  MeasureSettings settings;
  // The simulator models a stage launched and synchronised on its own, so
  // it stays isolated and its keys (and every sim golden) do not move.
  if (!simulated_device) {
    settings.max_repeat = 30;
    settings.max_relative_spread = 0.05;
    settings.protocol = StageProtocol::kExecuted;
  }
  return settings;
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
