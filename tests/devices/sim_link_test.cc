// The simulator's link: hios::PresetLink(kNvlink), exactly, labelled simulated.
#include <gtest/gtest.h>

#include "devices/registry.h"
#include "devices/sim/sim_backend.h"
#include "hios/link.h"

namespace ios::devices {
namespace {

TEST(SimLinkTest, AnswersWithThePresetNvlinkExactlyAndSaysItIsSimulated) {
  BackendOptions options;
  options.devices = 4;
  std::unique_ptr<Backend> sim = BuiltinRegistry().OpenBackend("sim:v100", options);
  EXPECT_EQ(sim->Devices(), 4);
  const hios::Link nvlink = hios::PresetLink(hios::LinkKind::kNvlink);
  const LinkQuery query = LinkQuery::Default();
  const LinkMeasurement m = sim->MeasureLink(query);
  ASSERT_TRUE(m.ok()) << m.error_message;
  EXPECT_TRUE(m.simulated);
  EXPECT_EQ(m.kind, "nvlink");
  EXPECT_EQ(m.latency_us, nvlink.latency_us);
  EXPECT_EQ(m.gb_per_s, nvlink.gb_per_s);
  ASSERT_EQ(m.samples.size(), query.bytes.size());
  for (const LinkSample& s : m.samples) {
    EXPECT_EQ(s.median_ms, nvlink.Ms(s.bytes));
    EXPECT_EQ(s.spread_ms, 0);
  }
  // Its own samples fit back to the preset.
  const LinkFit fit = FitLink(m.samples);
  EXPECT_NEAR(fit.latency_us, nvlink.latency_us, 1e-6);
  EXPECT_NEAR(fit.gb_per_s, nvlink.gb_per_s, 1e-6);
  ASSERT_EQ(sim->Links().size(), 1u);
  EXPECT_EQ(sim->Links()[0].kind, "nvlink");
  EXPECT_FALSE(sim->Links()[0].measured);
}

TEST(SimLinkTest, OneSimulatedGpuHasNoLink) {
  std::unique_ptr<Backend> sim = BuiltinRegistry().OpenBackend("sim:v100");
  EXPECT_EQ(sim->Devices(), 1);
  EXPECT_TRUE(sim->Links().empty());
  const LinkMeasurement m = sim->MeasureLink(LinkQuery::Default());
  EXPECT_EQ(m.error, MeasureError::kUnsupported);
  EXPECT_NE(m.error_message.find("--devices 2"), std::string::npos) << m.error_message;
}

TEST(SimLinkTest, ABackendThatCannotTimeLinksSaysSoAsAValue) {
  // The reference device keeps Backend's default.
  std::unique_ptr<Backend> reference = BuiltinRegistry().OpenBackend("reference");
  const LinkMeasurement m = reference->MeasureLink(LinkQuery::Default());
  EXPECT_EQ(m.error, MeasureError::kUnsupported);
  EXPECT_NE(m.error_message.find("cannot time copies"), std::string::npos) << m.error_message;
}

}  // namespace
}  // namespace ios::devices
