#include "hios/hios.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "hios/link.h"

namespace ios::hios {
namespace {

TEST(HiosTest, NeverReturnsMoreThanOneDeviceWouldTake) {
  // mr_test's case: MR's record spreads the diamond over two devices (62 ms)
  // where one device takes 22 ms; the result starts from one device.
  const Dag dag = Dag::Make(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  const TableCosts costs(2, {1, 10, 10, 1}, {50, 50, 50, 50});
  HiosOptions options;
  options.mapper = Mapper::kMr;
  const HiosResult r = Schedule(dag, costs, options);
  EXPECT_DOUBLE_EQ(r.mapped_ms, 62);
  EXPECT_DOUBLE_EQ(r.one_device_ms, 22);
  EXPECT_TRUE(r.one_device_won);
  EXPECT_DOUBLE_EQ(r.final_ms, 22);  // a concurrent stage costs the sum here: nothing to merge
  EXPECT_TRUE(r.final.stages[1].empty());
}

TEST(HiosTest, TheWindowMergesOnTopOfTheMappingAndHandsItsCandidatesOutFirst) {
  // Two independent ops between a source and a sink: with transfers too dear
  // to split, one device runs 1 and 2 together for 6 instead of 10.
  const Dag dag = Dag::Make(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  const TableCosts costs(2, {1, 5, 5, 1}, {50, 50, 50, 50},
                         [](std::span<const OpId>, int) { return 6.0; });
  std::vector<std::vector<OpId>> asked;
  const HiosResult r =
      Schedule(dag, costs, {}, [&](const auto& candidates) { asked = candidates; });
  EXPECT_DOUBLE_EQ(r.mapped_ms, 12);
  EXPECT_DOUBLE_EQ(r.final_ms, 8);
  EXPECT_EQ(asked, (std::vector<std::vector<OpId>>{{1, 2}}));
}

TEST(HiosTest, RefusesAnUnknownMapperAndABadWindow) {
  EXPECT_EQ(ParseMapper("lp"), Mapper::kLp);
  EXPECT_EQ(ParseMapper("mr"), Mapper::kMr);
  EXPECT_THROW(ParseMapper("LP"), Error);
  const Dag dag = Dag::Make(1, {});
  HiosOptions options;
  options.window.window = 0;
  EXPECT_THROW(Schedule(dag, TableCosts(1, {1}, {}), options), Error);
}

TEST(LinkTest, PricesLatencyPlusBytesOverBandwidth) {
  const Link given = ParseLink("12:10");
  EXPECT_EQ(given.kind, LinkKind::kGiven);
  EXPECT_DOUBLE_EQ(given.Ms(12'000'000), 0.010 + 1.0);
  EXPECT_DOUBLE_EQ(ParseLink("nvlink").gb_per_s, 50);
  EXPECT_DOUBLE_EQ(ParseLink("pcie").Ms(0), 0.010);
  EXPECT_EQ(ParseLink("host").kind, LinkKind::kHost);
  EXPECT_EQ(Describe(given), "given (12 GB/s, 10 us)");
}

TEST(LinkTest, RefusesALinkItCannotRead) {
  for (const char* text : {"", "fast", "0:10", "-1:10", "12:-1", "12:10x", "12", "nan:1"}) {
    try {
      ParseLink(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected nvlink, pcie, host, or GBPS:US"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace ios::hios
