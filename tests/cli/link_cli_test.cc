// ios-coordinator --devices ... --link measure: the link timed by a worker
// that owns the devices (here the embedded sim worker), printed, used to
// price copies, and reused from the profiling DB by a rerun.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "tests/testing/binaries.h"
#include "tests/testing/process.h"

namespace ios {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class LinkCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ios_link_cli.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  ::ios::testing::CliResult Run(const std::string& binary, const std::string& args) const {
    ::ios::testing::CliResult r = ::ios::testing::RunBinary(dir_, binary, args);
    EXPECT_NE(r.exit_code, 124) << "timed out: " << binary << " " << args;
    return r;
  }
  fs::path dir_;
};

TEST_F(LinkCliTest, MeasuresTheLinkOnceUsesItAndReusesItFromTheDb) {
  const std::string args = "--model squeezenet --devices sim:v100x2 --link measure --db p.db -q";
  const ::ios::testing::CliResult first = Run(::ios::testing::kCoordinator, args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("Link (simulated): nvlink, 50 GB/s, 10 us latency"));
  EXPECT_THAT(first.out, HasSubstr("bytes   median ms   spread ms     fit ms"));
  EXPECT_THAT(first.out, HasSubstr("    67108864"));  // the largest size of the default query
  EXPECT_THAT(first.out, HasSubstr("HIOS-LP on 2 devices, link nvlink (50 GB/s, 10 us)"));
  const ::ios::testing::CliResult second = Run(::ios::testing::kCoordinator, args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("Link (simulated, from the profiling DB): nvlink"));
  // The stored link is an end-to-end figure of the reserved model "(link)".
  const ::ios::testing::CliResult runs = Run(::ios::testing::kIosDb, "--db p.db runs");
  ASSERT_EQ(runs.exit_code, 0) << runs.err;
  EXPECT_THAT(runs.out, HasSubstr("(link)"));
}

TEST_F(LinkCliTest, AGivenLinkIsUsedAsGivenAndNothingIsMeasured) {
  const ::ios::testing::CliResult r =
      Run(::ios::testing::kCoordinator,
          "--model squeezenet --devices sim:v100x2 --link 12:7 --db p.db -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("Link (")));
  EXPECT_THAT(r.out, HasSubstr("link given (12 GB/s, 7 us)"));
}

}  // namespace
}  // namespace ios
