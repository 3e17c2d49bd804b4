// Core groups as devices and the host link between them (devices/cpu/cpu_link.h).
// Timings are checked for shape, never for speed.
#include "devices/cpu/cpu_link.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "devices/sim/sim_backend.h"

namespace ios::devices {
namespace {

TEST(CpuLinkTest, SplitsCoresIntoContiguousGroupsOfNearlyEqualSize) {
  EXPECT_EQ(SplitCores({0, 1, 2, 3, 4}, 2), (std::vector<std::vector<int>>{{0, 1}, {2, 3, 4}}));
  EXPECT_EQ(SplitCores({3, 7}, 2), (std::vector<std::vector<int>>{{3}, {7}}));
  EXPECT_EQ(SplitCores({0, 1, 2}, 1), (std::vector<std::vector<int>>{{0, 1, 2}}));
}

TEST(CpuLinkTest, RefusesMoreGroupsThanCores) {
  try {
    SplitCores({0}, 2);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 devices need as many cores"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(SplitCores({0, 1}, 0), Error);
}

TEST(CpuLinkTest, TimesEverySizeOfTheQueryAndFitsAPositiveLink) {
  // Unpinned: this checks the protocol, whatever cores the test may use.
  const LinkQuery query = LinkQuery::Default();
  const LinkMeasurement m = MeasureHostLink(query, {}, {});
  ASSERT_EQ(m.samples.size(), query.bytes.size()) << m.error_message;
  for (size_t i = 0; i < m.samples.size(); ++i) {
    EXPECT_EQ(m.samples[i].bytes, query.bytes[i]);
    EXPECT_GT(m.samples[i].median_ms, 0);
    EXPECT_GE(m.samples[i].spread_ms, 0);
  }
  // Timings on a shared machine (tests run side by side) can be too noisy
  // for a line; then the fit is refused as such, never a wrong link.
  if (!m.ok()) {
    EXPECT_NE(m.error_message.find("does not grow with the size"), std::string::npos)
        << m.error_message;
    return;
  }
  EXPECT_EQ(m.kind, "host");
  EXPECT_FALSE(m.simulated);
  EXPECT_GT(m.gb_per_s, 0);
  EXPECT_GE(m.latency_us, 0);
}

TEST(CpuLinkTest, AnswersAnInvalidQueryWithAnErrorValue) {
  LinkQuery empty;
  EXPECT_EQ(MeasureHostLink(empty, {}, {}).error, MeasureError::kUnsupported);
  LinkQuery huge;
  huge.bytes = {kMaxLinkBytes + 1};
  const LinkMeasurement m = MeasureHostLink(huge, {}, {});
  EXPECT_EQ(m.error, MeasureError::kUnsupported);
  EXPECT_NE(m.error_message.find("bytes"), std::string::npos) << m.error_message;
  LinkQuery no_repeats = LinkQuery::Default();
  no_repeats.repeats = 0;
  EXPECT_EQ(MeasureHostLink(no_repeats, {}, {}).error, MeasureError::kUnsupported);
}

TEST(CpuLinkTest, AnUnpinnableCoreIsAnErrorValueNotAHang) {
  // CPU_SETSIZE - 1 exists on no machine this runs on.
  const LinkMeasurement m = MeasureHostLink(LinkQuery::Default(), {CPU_SETSIZE - 1}, {});
  EXPECT_EQ(m.error, MeasureError::kBackendFailure);
  EXPECT_NE(m.error_message.find("pthread_setaffinity_np"), std::string::npos) << m.error_message;
}

TEST(CpuLinkTest, AKindWithCpuLinksOwnsTheDevicesItIsOpenedWith) {
  if (AllowedCores().size() < 2) GTEST_SKIP() << "needs two cores this process may run on";
  BackendKind kind;
  kind.prefix = "fake";
  kind.open_backend = [](const std::string&, const BackendOptions&) {
    return CreateSimBackend("v100");
  };
  kind = WithCpuLinks(kind);
  BackendOptions one, two;
  two.devices = 2;
  EXPECT_EQ(kind.open_backend("fake", one)->Devices(), 1);
  std::unique_ptr<Backend> linked = kind.open_backend("fake", two);
  EXPECT_EQ(linked->Devices(), 2);
  EXPECT_EQ(linked->Device().name, "sim:v100");  // stages still measured by the inner backend
  ASSERT_EQ(linked->Links().size(), 1u);
  EXPECT_FALSE(linked->Links()[0].measured);  // the host preset until measured
  // Two sizes far apart: the line through them rises unless a 4 KiB copy's
  // median took longer than a 32 MiB one's. On a machine busy enough for
  // that (CI runs tests side by side) the fit is refused, and a refused
  // measurement must not mark the link measured: both outcomes are checked.
  LinkQuery query;
  query.bytes = {4096, 32 << 20};
  const LinkMeasurement m = linked->MeasureLink(query);
  ASSERT_EQ(linked->Links().size(), 1u);
  ASSERT_EQ(m.samples.size(), 2u) << m.error_message;
  if (m.ok()) {
    EXPECT_TRUE(linked->Links()[0].measured);
    EXPECT_EQ(linked->Links()[0].gb_per_s, m.gb_per_s);
  } else {
    EXPECT_NE(m.error_message.find("does not grow with the size"), std::string::npos)
        << m.error_message;
    EXPECT_FALSE(linked->Links()[0].measured);
  }
  BackendOptions zero;
  zero.devices = 0;
  EXPECT_THROW(kind.open_backend("fake", zero), Error);
}

}  // namespace
}  // namespace ios::devices
