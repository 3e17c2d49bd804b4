// --link measure's store: a link measured once per fingerprint, device count
// and query, reused from the profiling DB after that.
#include "coordinator/measured_link.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "devices/registry.h"

namespace ios::coordinator {
namespace {

// Answers link queries with fixed figures and counts them.
class LinkMeasurer final : public OneAtATimeMeasurer {
 public:
  explicit LinkMeasurer(LinkMeasurement answer)
      : answer_(std::move(answer)),
        device_(devices::BuiltinRegistry().OpenBackend("sim:v100")->Device()) {}
  const DeviceInfo& Device() const override { return device_; }
  LinkMeasurement MeasureLink(const LinkQuery& query) override {
    ++calls;
    LinkMeasurement m = answer_;
    m.samples.clear();
    for (int64_t bytes : query.bytes) m.samples.push_back({bytes, 0.01 + bytes * 1e-7, 0.001});
    return m;
  }
  int calls = 0;

 protected:
  MeasureResult MeasureOne(const StageSpec&, int, const MeasureSettings&) override { return {}; }

 private:
  LinkMeasurement answer_;
  DeviceInfo device_;
};

LinkMeasurement Host() {
  LinkMeasurement m;
  m.kind = "host";
  m.latency_us = 4.5;
  m.gb_per_s = 6.25;
  return m;
}

TEST(MeasuredLinkTest, MeasuresOnceThenReusesTheStoredLink) {
  auto store = db::ProfileStore::Open(":memory:");
  LinkMeasurer measurer(Host());
  const MeasuredLink first = MeasureOrReuseLink(*store, measurer, 2, LinkQuery::Default());
  EXPECT_FALSE(first.reused);
  EXPECT_EQ(measurer.calls, 1);
  EXPECT_EQ(first.link.kind, hios::LinkKind::kHost);
  EXPECT_EQ(first.link.latency_us, 4.5);
  EXPECT_EQ(first.link.gb_per_s, 6.25);
  const MeasuredLink second = MeasureOrReuseLink(*store, measurer, 2, LinkQuery::Default());
  EXPECT_TRUE(second.reused);
  EXPECT_EQ(measurer.calls, 1);  // nothing measured
  EXPECT_EQ(second.link.latency_us, 4.5);
  EXPECT_EQ(second.link.gb_per_s, 6.25);
  EXPECT_EQ(second.measured.kind, "host");
  ASSERT_EQ(second.measured.samples.size(), first.measured.samples.size());
  for (size_t i = 0; i < first.measured.samples.size(); ++i) {
    EXPECT_EQ(second.measured.samples[i].bytes, first.measured.samples[i].bytes);
    EXPECT_EQ(second.measured.samples[i].median_ms, first.measured.samples[i].median_ms);
  }
  EXPECT_NE(FormatMeasuredLink(second).find("from the profiling DB"), std::string::npos);
}

TEST(MeasuredLinkTest, AnotherDeviceCountOrQueryIsMeasuredAgain) {
  auto store = db::ProfileStore::Open(":memory:");
  LinkMeasurer measurer(Host());
  MeasureOrReuseLink(*store, measurer, 2, LinkQuery::Default());
  MeasureOrReuseLink(*store, measurer, 4, LinkQuery::Default());
  EXPECT_EQ(measurer.calls, 2);
  LinkQuery fewer;
  fewer.bytes = {1024, 1 << 20};
  MeasureOrReuseLink(*store, measurer, 2, fewer);
  EXPECT_EQ(measurer.calls, 3);
  MeasureOrReuseLink(*store, measurer, 2, fewer);
  EXPECT_EQ(measurer.calls, 3);
}

TEST(MeasuredLinkTest, ALinkThatCannotBeMeasuredIsAnErrorSayingWhyAndNothingIsStored) {
  auto store = db::ProfileStore::Open(":memory:");
  LinkMeasurer failing(LinkMeasurement::Unsupported("no worker serving 'sim:v100' owns two"));
  try {
    MeasureOrReuseLink(*store, failing, 2, LinkQuery::Default());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no worker serving 'sim:v100' owns two"),
              std::string::npos)
        << e.what();
  }
  LinkMeasurer working(Host());
  EXPECT_FALSE(MeasureOrReuseLink(*store, working, 2, LinkQuery::Default()).reused);
}

TEST(MeasuredLinkTest, AnUnknownKindIsAGivenLinkWithItsFigures) {
  auto store = db::ProfileStore::Open(":memory:");
  LinkMeasurement odd = Host();
  odd.kind = "infiniband";
  LinkMeasurer measurer(odd);
  const MeasuredLink link = MeasureOrReuseLink(*store, measurer, 2, LinkQuery::Default());
  EXPECT_EQ(link.link.kind, hios::LinkKind::kGiven);
  EXPECT_EQ(link.link.gb_per_s, 6.25);
}

}  // namespace
}  // namespace ios::coordinator
