// Shared by the profile store tests: SQLite header fields, two devices, a
// good result and a key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/measurement.h"
#include "db/profile_store.h"

namespace ios::db::testing {

namespace fs = std::filesystem;

// SQLite file header fields (https://www.sqlite.org/fileformat.html), 4-byte
// big-endian: PRAGMA user_version and PRAGMA application_id.
constexpr std::streamoff kUserVersionOffset = 60;
constexpr std::streamoff kApplicationIdOffset = 68;

inline uint32_t ReadHeaderField(const fs::path& file, std::streamoff offset) {
  std::ifstream in(file, std::ios::binary);
  in.seekg(offset);
  unsigned char bytes[4] = {};
  in.read(reinterpret_cast<char*>(bytes), 4);
  if (!in) throw std::runtime_error("cannot read header of " + file.string());
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
         uint32_t{bytes[3]};
}

inline void WriteHeaderField(const fs::path& file, std::streamoff offset, uint32_t value) {
  std::fstream io(file, std::ios::binary | std::ios::in | std::ios::out);
  io.seekp(offset);
  const char bytes[4] = {static_cast<char>(value >> 24), static_cast<char>(value >> 16),
                         static_cast<char>(value >> 8), static_cast<char>(value)};
  io.write(bytes, 4);
  if (!io) throw std::runtime_error("cannot write header of " + file.string());
}

inline DeviceInfo SimV100() { return {"sim", "sim:v100", "sim:v100|sm80|peak15.7", true}; }
inline DeviceInfo RealH100() {
  return {"cuda", "NVIDIA H100 80GB HBM3", "cuda|H100|sm90|132|cudnn9", false};
}

inline MeasureResult Ok(double median_ms) {
  MeasureResult result;
  result.median_ms = median_ms;
  result.spread_ms = median_ms / 10;
  result.samples = 36;
  return result;
}

inline MeasurementKey Key(const std::string& stage, const DeviceInfo& device, int batch = 1,
                          const std::string& settings = "w2-n6-r6-float32") {
  return {stage, device.fingerprint, batch, settings};
}

// The device and settings the ios-db tool tests write rows for: their
// fingerprint and settings appear in the tools' expected output.
inline const DeviceInfo kToolV100{"sim", "sim:v100", "sim:v100|sm70", true};
inline constexpr const char* kToolSettings = "w2-n6-r6-float32";

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace ios::db::testing
