// The programs under test, as this build made them, and a helper for
// checking what they print.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace ios::testing {

inline constexpr const char* kCoordinator = IOS_BINARY_DIR "/coordinator/ios-coordinator";
inline constexpr const char* kWorker = IOS_BINARY_DIR "/worker/ios-worker";
inline constexpr const char* kIosDb = IOS_BINARY_DIR "/db/ios-db";
inline constexpr const char* kKeygen = IOS_BINARY_DIR "/net/ios-keygen";
inline constexpr const char* kIosRun = IOS_BINARY_DIR "/run/ios-run";

//! The lines of `text` that hold more than white space.
inline std::vector<std::string> NonEmptyLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

}  // namespace ios::testing
