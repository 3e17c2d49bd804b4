// ios-run's multi-GPU path on a real GPU (label `gpu`, docs/gpu.md,
// "Multi-GPU runs"): tests/data/tiny_model.multi.json on the same GPU twice
// (two stream sets, copies between them as a second GPU would get them)
// and, where the host has two GPUs, on cudax2, each passing --check against
// single-device sequential execution and the naive reference device.
// Without a GPU (or a driver), or with one GPU for the two-GPU case, the
// test skips and says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
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

// The build tree's, unless the environment names another: the GPU host
// bundle runs this test far from its build tree (scripts/gpu-check.sh sets
// IOS_RUN and IOS_TEST_DATA to the packed ios-run and test data).
std::string FromEnvironmentOr(const char* variable, const std::string& fallback) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : fallback;
}

json RunTiny(const std::string& devices) {
  ::ios::testing::TempDir dir("cuda_multi_gpu_test");
  const std::string tiny =
      (std::filesystem::path(FromEnvironmentOr("IOS_TEST_DATA", IOS_TEST_DATA_DIR)) /
       "tiny_model.multi.json")
          .string();
  const std::string ios_run = FromEnvironmentOr("IOS_RUN", ::ios::testing::kIosRun);
  const ::ios::testing::CliResult r = ::ios::testing::RunBinary(
      dir.path(), ios_run,
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
