// FitLink: the line latency + bytes / bandwidth through a link's timings.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/error.h"
#include "common/link_measurement.h"

namespace ios {
namespace {

std::vector<LinkSample> Line(double latency_us, double gb_per_s, const LinkQuery& query) {
  std::vector<LinkSample> samples;
  for (int64_t bytes : query.bytes) {
    samples.push_back(
        {bytes, latency_us / 1000 + static_cast<double>(bytes) / (gb_per_s * 1e6), 0});
  }
  return samples;
}

TEST(LinkFitTest, DefaultQueryCoversOneKibToSixtyFourMibInPowersOfFour) {
  const LinkQuery query = LinkQuery::Default();
  ASSERT_EQ(query.bytes.size(), 9u);
  EXPECT_EQ(query.bytes.front(), 1024);
  EXPECT_EQ(query.bytes.back(), int64_t{64} << 20);
  for (size_t i = 1; i < query.bytes.size(); ++i) {
    EXPECT_EQ(query.bytes[i], 4 * query.bytes[i - 1]);
  }
  EXPECT_EQ(query.Key(), "r5-1024,4096,16384,65536,262144,1048576,4194304,16777216,67108864");
}

TEST(LinkFitTest, RecoversAnExactLine) {
  for (auto [latency, bandwidth] : {std::pair{10.0, 50.0}, {2.0, 5.0}, {0.0, 12.0}}) {
    const LinkFit fit = FitLink(Line(latency, bandwidth, LinkQuery::Default()));
    EXPECT_NEAR(fit.latency_us, latency, 1e-6) << latency << " us, " << bandwidth << " GB/s";
    EXPECT_NEAR(fit.gb_per_s, bandwidth, bandwidth * 1e-9);
  }
}

TEST(LinkFitTest, RecoversANoisyLineWithinItsNoise) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  std::vector<LinkSample> samples = Line(20, 8, LinkQuery::Default());
  for (LinkSample& s : samples) s.median_ms *= noise(random);
  const LinkFit fit = FitLink(samples);
  // 3% noise on every size: the bandwidth comes out within a few percent,
  // the latency within a few microseconds (the 1 KiB copy is ~20 us).
  EXPECT_NEAR(fit.gb_per_s, 8, 8 * 0.05);
  EXPECT_NEAR(fit.latency_us, 20, 3);
}

TEST(LinkFitTest, FitsANegativeInterceptThroughTheOrigin) {
  // Times proportional to the size, the small ones a little fast: the free
  // fit would give a negative latency.
  std::vector<LinkSample> samples = Line(0, 10, LinkQuery::Default());
  samples[0].median_ms *= 0.9;
  samples[1].median_ms *= 0.95;
  const LinkFit fit = FitLink(samples);
  EXPECT_EQ(fit.latency_us, 0);
  EXPECT_GT(fit.gb_per_s, 9);
  EXPECT_LT(fit.gb_per_s, 11);
}

TEST(LinkFitTest, RefusesFewerThanTwoDistinctSizes) {
  EXPECT_THROW(FitLink({}), Error);
  const std::vector<LinkSample> one_size = {{4096, 0.01, 0}, {4096, 0.011, 0}};
  try {
    FitLink(one_size);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 distinct copy sizes"), std::string::npos) << e.what();
  }
}

TEST(LinkFitTest, RefusesTimesThatDoNotGrowWithTheSize) {
  const std::vector<LinkSample> shrinking = {{1024, 0.5, 0}, {1 << 20, 0.2, 0}, {4 << 20, 0.1, 0}};
  try {
    FitLink(shrinking);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bandwidth <= 0"), std::string::npos) << e.what();
  }
}

TEST(LinkFitTest, RefusesATimeThatIsNotPositive) {
  for (double bad : {0.0, -1.0, std::nan("")}) {
    const std::vector<LinkSample> samples = {{1024, 0.01, 0}, {4096, bad, 0}};
    try {
      FitLink(samples);
      FAIL() << "expected a refusal of " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("copy of 4096 bytes"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ios
