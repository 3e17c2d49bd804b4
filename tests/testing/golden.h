// Golden files: formats that outlive the binary (stage keys are DB keys,
// frames cross versions) are pinned by files under tests/data/golden/. A
// test compares against them and fails on any difference; a deliberate
// change of format is re-recorded with one command:
//     IOS_UPDATE_GOLDENS=1 ctest --test-dir build -R Golden
// which rewrites the files in the source tree (review the diff, commit it).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "tests/testing/paths.h"

namespace ios::testing {

inline bool UpdateGoldens() {
  const char* value = std::getenv("IOS_UPDATE_GOLDENS");
  return value != nullptr && std::string_view(value) == "1";
}

inline std::string GoldenPath(const std::string& name) { return TestData("golden/" + name); }

//! The golden file's text; with IOS_UPDATE_GOLDENS=1 it is first rewritten
//! to `current`. A missing file fails the test, saying how to create it.
inline std::string Golden(const std::string& name, const std::string& current) {
  const std::string path = GoldenPath(name);
  if (UpdateGoldens()) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << current;
    if (!out) ADD_FAILURE() << "cannot write " << path;
    std::cout << "[ golden   ] wrote " << path << "\n";
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << path << " is missing; record it with IOS_UPDATE_GOLDENS=1 (see golden.h)";
    return {};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

//! Bytes as lines of 32 lowercase hex digits (16 bytes), so a golden frame
//! diffs readably.
inline std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    hex += kDigits[b >> 4];
    hex += kDigits[b & 0xf];
    if (i % 16 == 15 || i + 1 == bytes.size()) hex += '\n';
  }
  return hex;
}

//! Inverse of ToHex; whitespace is ignored. Fails the test on other text.
inline std::string FromHex(std::string_view hex) {
  std::string bytes;
  int high = -1;
  for (char c : hex) {
    if (c == '\n' || c == ' ' || c == '\r' || c == '\t') continue;
    int value = -1;
    if (c >= '0' && c <= '9') value = c - '0';
    if (c >= 'a' && c <= 'f') value = c - 'a' + 10;
    if (value < 0) {
      ADD_FAILURE() << "not a hex digit in a golden frame: '" << c << "'";
      return {};
    }
    if (high < 0) {
      high = value;
    } else {
      bytes += static_cast<char>(high * 16 + value);
      high = -1;
    }
  }
  if (high >= 0) ADD_FAILURE() << "odd number of hex digits in a golden frame";
  return bytes;
}

}  // namespace ios::testing
