// The importer on damaged files: torchvision exports with bytes flipped,
// cut short or with varint fields rewritten (seeded). Each must import or be
// refused with an ios::Error - never a crash, a hang or another exception
// (the suite runs this under ASan and UBSan too).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "common/error.h"
#include "onnx/onnx_import.h"

namespace ios::onnx_import {
namespace {

std::string Fixture(const std::string& model) {
  std::ifstream in(std::string(IOS_TEST_DATA_DIR) + "/onnx/" + model + ".onnx", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(OnnxFuzzTest, DamagedExportsImportOrAreRefusedWithAnError) {
  for (const char* model : {"squeezenet1_1", "googlenet"}) {
    const std::string good = Fixture(model);
    ASSERT_GT(good.size(), 1000u) << model;
    std::mt19937_64 rng(20261125);
    int refused = 0, imported = 0;
    for (int trial = 0; trial < 400; ++trial) {
      std::string bytes = good;
      switch (trial % 3) {
        case 0:  // a few bytes flipped
          for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
            bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
          }
          break;
        case 1:  // cut short
          bytes.resize(rng() % bytes.size());
          break;
        case 2:  // one byte set to a small integer (dims, attribute values)
          bytes[rng() % bytes.size()] = static_cast<char>(rng() % 16);
          break;
      }
      try {
        ImportOnnx(bytes, std::string(model) + ".onnx");
        ++imported;
      } catch (const Error&) {
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << model << " trial " << trial << ": not an ios::Error: " << e.what();
      }
    }
    EXPECT_GT(refused, 0) << model;
    EXPECT_EQ(refused + imported, 400) << model;
  }
}

}  // namespace
}  // namespace ios::onnx_import
