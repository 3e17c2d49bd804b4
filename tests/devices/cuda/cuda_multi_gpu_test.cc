// ios-run's multi-GPU path on a real GPU (label `gpu`, docs/gpu.md,
// "Multi-GPU runs"): tests/data/tiny_model.multi.json on the same GPU twice
// (two stream sets, copies between them as a second GPU would get them)
// and, where the host has two GPUs, on cudax2, each passing --check against
// single-device sequential execution and the naive reference device.
// Without a GPU (or a driver), or with one GPU for the two-GPU case, the
// test skips and says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "devices/cuda/cuda_api_real.h"
#include "tests/testing/binaries.h"
#include "tests/testing/process.h"

namespace ios::devices {
namespace {

using nlohmann::json;

// GPUs this process sees; 0 without a driver.
int GpuCount() {
  int count = 0;
  if (!cuda::MakeRealApi()->DeviceCount(count).ok()) return 0;
  return count;
}

json RunTiny(const std::string& devices) {
  ::ios::testing::TempDir dir("cuda_multi_gpu_test");
  const std::string tiny =
      (std::filesystem::path(IOS_TEST_DATA_DIR) / "tiny_model.multi.json").string();
  const ::ios::testing::CliResult r = ::ios::testing::RunBinary(
      dir.path(), ::ios::testing::kIosRun,
      "--schedule " + ::ios::testing::ShellQuote(tiny) + " --devices " +
          ::ios::testing::ShellQuote(devices) + " --check --format json --runs 2",
      300);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  try {
    return json::parse(r.out);
  } catch (const json::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out << "\n" << r.err;
    return json::object();
  }
}

void ExpectPeerCopiesThatPassCheck(const json& out) {
  EXPECT_EQ(out.value("copies_by", ""), "device") << out.dump(2);
  EXPECT_EQ(out.value("copies", 0), 1);
  ASSERT_TRUE(out.contains("check")) << out.dump(2);
  EXPECT_TRUE(out["check"]["against_sequential"]["passed"].get<bool>()) << out.dump(2);
  EXPECT_TRUE(out["check"]["against_reference"]["passed"].get<bool>()) << out.dump(2);
}

TEST(CudaMultiGpuTest, TinyModelOnOneGpuTwicePassesCheck) {
  if (GpuCount() < 1) GTEST_SKIP() << "no GPU to run on (or no driver)";
  ExpectPeerCopiesThatPassCheck(RunTiny("cuda:0;cuda:0"));
}

TEST(CudaMultiGpuTest, TinyModelOnTwoGpusPassesCheck) {
  if (GpuCount() < 2) GTEST_SKIP() << "needs two GPUs; this host has " << GpuCount();
  ExpectPeerCopiesThatPassCheck(RunTiny("cudax2"));
}

}  // namespace
}  // namespace ios::devices
