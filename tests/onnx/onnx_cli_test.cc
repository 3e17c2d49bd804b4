// The tools on crafted ONNX files (issue 21): a stride of 2^32 with SAME
// padding killed ios-coordinator and ios-run with SIGFPE, and a zero stride
// did so inside ONNX's own shape inference. Each now exits 1, the code a
// model that does not load has (README), with one line on stderr.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/onnx/onnx_builder.h"
#include "tests/testing/binaries.h"
#include "tests/testing/process.h"

namespace ios::onnx_import {
namespace {

using ::ios::testing::CliResult;
using ::ios::testing::NonEmptyLines;
using ::ios::testing::RunBinary;
using ::ios::testing::ShellQuote;
using ::ios::testing::TempDir;
using ::ios::testing::WriteFile;
using ::testing::HasSubstr;
using testing::IntsAttr;
using testing::OnnxBuilder;
using testing::StringAttr;

struct CraftedFile {
  const char* name;
  std::string bytes;
  std::string says;  // in the one line on stderr
};

std::vector<CraftedFile> CraftedFiles() {
  constexpr int64_t k2To32 = int64_t{1} << 32;
  OnnxBuilder same(4, 8, 8);
  const std::string w = same.Weight({4, 4, 3, 3}, 1);
  const std::string conv =
      same.Node("Conv", {"input", w},
                {IntsAttr("strides", {k2To32, k2To32}), StringAttr("auto_pad", "SAME_UPPER")});
  OnnxBuilder zero(4, 8, 8);
  const std::string pool = zero.Node(
      "MaxPool", {"input"}, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {0, 0})});
  return {{"same_stride.onnx", same.UninferredBytes(conv), "attribute 'strides' is 4294967296"},
          {"zero_stride.onnx", zero.UninferredBytes(pool), "attribute 'strides' is 0"}};
}

TEST(OnnxCliTest, ToolsRefuseCraftedStridesWithExitCodeOneAndOneLine) {
  const TempDir dir("ios_onnx_cli");
  ASSERT_FALSE(dir.path().empty());
  for (const CraftedFile& file : CraftedFiles()) {
    const std::string path = (dir.path() / file.name).string();
    ASSERT_TRUE(WriteFile(path, file.bytes));
    const std::vector<std::string> commands = {
        std::string(::ios::testing::kCoordinator) + " --device sim:v100 --model ",
        std::string(::ios::testing::kIosRun) + " --device reference --model "};
    for (const std::string& command : commands) {
      SCOPED_TRACE(command + file.name);
      const std::string binary = command.substr(0, command.find(' '));
      const CliResult r =
          RunBinary(dir.path(), binary, command.substr(command.find(' ') + 1) + ShellQuote(path));
      EXPECT_EQ(r.exit_code, 1) << r.err;
      const std::vector<std::string> lines = NonEmptyLines(r.err);
      ASSERT_EQ(lines.size(), 1u) << r.err;
      EXPECT_THAT(lines[0], HasSubstr(file.name));
      EXPECT_THAT(lines[0], HasSubstr(file.says));
    }
  }
}

// TensorFlow's converters keep an N,H,W,C input and transpose it first:
// ios-run reads such a model's --input file in that order.
TEST(OnnxCliTest, IosRunReadsTheInputOfAChannelsLastModelInItsOwnOrder) {
  const TempDir dir("ios_onnx_cli_nhwc");
  ASSERT_FALSE(dir.path().empty());
  OnnxBuilder b(3, 2, 2);
  b.InputDim(1, 2);  // the input is 1 x 2 x 2 x 3: N, H, W, C
  b.InputDim(3, 3);
  const std::string x = b.Node("Transpose", {"input"}, {IntsAttr("perm", {0, 3, 1, 2})});
  const std::vector<float> w = {1, 10, 100, -1, 0, 2};  // 2 x 3 x 1 x 1
  const std::string y = b.Node("Conv", {x, b.Weight({2, 3, 1, 1}, w)});
  ASSERT_TRUE(WriteFile((dir.path() / "nhwc.onnx").string(), b.Bytes(y)));
  std::vector<float> nhwc(12), expected(8);  // pixel p, channel c at p * 3 + c
  for (int i = 0; i < 12; ++i) nhwc[i] = static_cast<float>(i + 1);
  for (int o = 0; o < 2; ++o) {
    for (int p = 0; p < 4; ++p) {
      for (int c = 0; c < 3; ++c) expected[o * 4 + p] += w[o * 3 + c] * nhwc[p * 3 + c];
    }
  }
  const auto bytes = [](const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  ASSERT_TRUE(WriteFile((dir.path() / "in.bin").string(), bytes(nhwc)));
  ASSERT_TRUE(WriteFile((dir.path() / "out.bin").string(), bytes(expected)));
  const CliResult r = RunBinary(dir.path(), ::ios::testing::kIosRun,
                                "--device reference --schedule sequential --model nhwc.onnx "
                                "--input in.bin --expect out.bin --runs 1 --warmup 0 --no-predict");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("expect: PASSED")) << r.out << r.err;
}

// TensorFlow's way out (BlazeFace): a head transposed to channels-last and
// reshaped to [1, anchors, k], beside a second output; --expect holds both
// in turn, as onnxruntime_reference.js writes them.
TEST(OnnxCliTest, IosRunComparesSeveralOutputsInTheFilesOrder) {
  const TempDir dir("ios_onnx_cli_outputs");
  ASSERT_FALSE(dir.path().empty());
  OnnxBuilder b(3, 2, 2);
  const std::vector<float> w = {1, 10, 100, -1, 0, 2};  // 2 x 3 x 1 x 1
  const std::string conv = b.Node("Conv", {"input", b.Weight({2, 3, 1, 1}, w)});
  const std::string last = b.Node("Transpose", {conv}, {IntsAttr("perm", {0, 2, 3, 1})});
  const std::string head = b.Node("Reshape", {last, b.Ints({1, 8, 1})});
  const std::string relu = b.Node("Relu", {"input"});
  const std::vector<std::string> outputs = {head, relu};
  ASSERT_TRUE(WriteFile((dir.path() / "heads.onnx").string(), b.Bytes(outputs)));
  std::vector<float> in(12), expected(8);  // channel c, pixel p at c * 4 + p
  for (int i = 0; i < 12; ++i) in[i] = static_cast<float>(i % 5) - 2;
  for (int p = 0; p < 4; ++p) {
    for (int o = 0; o < 2; ++o) {
      for (int c = 0; c < 3; ++c) expected[p * 2 + o] += w[o * 3 + c] * in[c * 4 + p];
    }
  }
  for (float v : in) expected.push_back(std::max(v, 0.0f));
  const auto bytes = [](const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  ASSERT_TRUE(WriteFile((dir.path() / "in.bin").string(), bytes(in)));
  ASSERT_TRUE(WriteFile((dir.path() / "out.bin").string(), bytes(expected)));
  const std::string args =
      "--device reference --schedule greedy --model heads.onnx --input in.bin --expect out.bin "
      "--runs 1 --warmup 0 --no-predict";
  const CliResult text = RunBinary(dir.path(), ::ios::testing::kIosRun, args);
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("outputs:             2, each sample's values in turn"));
  EXPECT_THAT(text.out,
              HasSubstr("'" + head + "' [1,8,1] channels last, '" + relu + "' [1,3,2,2]"));
  EXPECT_THAT(text.out, HasSubstr("expect: PASSED")) << text.out << text.err;
  const CliResult json = RunBinary(dir.path(), ::ios::testing::kIosRun, args + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json out = nlohmann::json::parse(json.out);
  ASSERT_EQ(out["outputs"].size(), 2u) << json.out;
  EXPECT_EQ(out["outputs"][0]["values_per_sample"], 8);
  EXPECT_EQ(out["outputs"][0]["channels_last"], true);
  EXPECT_EQ(out["outputs"][1]["dims"], (std::vector<int64_t>{1, 3, 2, 2}));
  EXPECT_TRUE(out["expect"]["passed"].get<bool>());
}

}  // namespace
}  // namespace ios::onnx_import
