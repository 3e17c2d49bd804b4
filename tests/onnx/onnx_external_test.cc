// Weights in external data files (onnx/onnx_external.h): a model whose
// kernel lies in a file beside it imports and computes as the same model
// with the kernel inside; each way such a reference can be wrong is one
// line naming the initializer and the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "onnx/onnx_import.h"
#include "tests/onnx/onnx_builder.h"
#include "tests/onnx/onnx_import_testing.h"
#include "tests/testing/process.h"

namespace ios::onnx_import {
namespace external_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::OnnxBuilder;

constexpr int kChannels = 8;

class OnnxExternalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    OnnxBuilder builder(kChannels, 4, 4);
    const std::string w = builder.Weight({kChannels, kChannels, 3, 3}, 5);
    inline_ = builder.Bytes(
        builder.Node("Conv", {"input", w}, {testing::IntsAttr("pads", {1, 1, 1, 1})}));
  }

  //! The model with its kernel moved to `data` (written at `offset` of
  //! "weights.bin" after that many bytes of padding) and the entries
  //! `entries` as its external_data; returns the model file's path.
  std::string Write(const std::vector<std::pair<std::string, std::string>>& entries,
                    size_t offset = 0) {
    ::onnx::ModelProto model;
    EXPECT_TRUE(model.ParseFromString(inline_));
    ::onnx::TensorProto& kernel = *model.mutable_graph()->mutable_initializer(0);
    std::ofstream(dir_ / "weights.bin", std::ios::binary)
        << std::string(offset, '\x7f') << kernel.raw_data();
    kernel.clear_raw_data();
    kernel.set_data_location(::onnx::TensorProto_DataLocation_EXTERNAL);
    for (const auto& [key, value] : entries) {
      ::onnx::StringStringEntryProto& entry = *kernel.add_external_data();
      entry.set_key(key);
      entry.set_value(value);
    }
    const std::string path = (dir_ / "model.onnx").string();
    std::ofstream(path, std::ios::binary) << model.SerializeAsString();
    return path;
  }

  std::string FileRefusal(const std::string& path) {
    try {
      ImportOnnxFile(path);
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      return what;
    }
    ADD_FAILURE() << "imported";
    return "";
  }

  ::ios::testing::TempDir temp_{"onnx_external_test"};
  const fs::path dir_ = temp_.path();
  std::string inline_;
};

TEST_F(OnnxExternalTest, AKernelInAFileBesideTheModelComputesAsOneInside) {
  const size_t bytes = size_t{kChannels} * kChannels * 9 * sizeof(float);
  const std::string path = Write(
      {{"location", "weights.bin"}, {"offset", "100"}, {"length", std::to_string(bytes)}}, 100);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> value(-1, 1);
  std::vector<float> input(size_t{kChannels} * 16);
  for (float& v : input) v = value(rng);
  const std::vector<float> outside = RunImported(ImportOnnxFile(path), input);
  const std::vector<float> inside = RunImported(ImportOnnx(inline_, "inline.onnx"), input);
  ASSERT_EQ(outside.size(), input.size());
  EXPECT_EQ(outside, inside);
}

TEST_F(OnnxExternalTest, EachWrongReferenceIsOneLineNamingTheInitializer) {
  const struct {
    std::vector<std::pair<std::string, std::string>> entries;
    std::string says;
  } cases[] = {
      {{{"offset", "0"}}, "external data without a location"},
      {{{"location", "/etc/passwd"}}, "must be a relative path inside the model's directory"},
      {{{"location", "../weights.bin"}}, "must be a relative path inside the model's directory"},
      {{{"location", "missing.bin"}}, "missing.bin: cannot open file: not found"},
      {{{"location", "weights.bin"}, {"offset", "-4"}},
       "offset '-4' is not a non-negative integer"},
      {{{"location", "weights.bin"}, {"length", "12x"}}, "length '12x' is not a non-negative"},
      {{{"location", "weights.bin"}, {"offset", "99999"}}, "reaches past 'weights.bin'"},
      {{{"location", "weights.bin"}, {"offset", "4"}, {"length", "18446744073709551615"}},
       "reaches past"},
      {{{"location", "weights.bin"}, {"length", "16"}}, "its data holds 16 bytes, 2304 expected"},
  };
  for (const auto& c : cases) {
    const std::string what = FileRefusal(Write(c.entries));
    EXPECT_THAT(what, HasSubstr(c.says));
    EXPECT_THAT(what, HasSubstr("model.onnx: initializer"));
  }
}

TEST_F(OnnxExternalTest, AModelReadFromMemoryCannotHaveExternalData) {
  const std::string path = Write({{"location", "weights.bin"}});
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_THAT(Refusal(bytes), HasSubstr("a model read from memory cannot have"));
}

}  // namespace external_test
}  // namespace ios::onnx_import
