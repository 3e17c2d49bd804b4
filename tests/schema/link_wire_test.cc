// Protocol 7: a worker's devices and links in its hello, link queries and
// their answers, round trips and refusals.
#include "tests/schema/protocol_testing.h"

namespace ios::schema {
namespace {

using namespace protocol_testing;

LinkMeasurement SampleLink() {
  LinkMeasurement m;
  m.kind = "host";
  m.simulated = false;
  m.latency_us = 3.25;
  m.gb_per_s = 7.5;
  m.samples = {{1024, 0.004, 0.001}, {1 << 20, 0.15, 0.02}, {int64_t{64} << 20, 9.1, 0.4}};
  return m;
}

TEST(LinkWireTest, AWorkerOfTheVersionBeforeLinksIsRefused) {
  EXPECT_GE(kProtocolVersion, 7u);
  const DecodeError error = Failure(EncodeWithVersion(SampleHello(), 6));
  EXPECT_EQ(error.kind, Kind::kVersionMismatch);
  EXPECT_EQ(error.version, 6u);
}

TEST(LinkWireTest, HelloCarriesItsDevicesAndLinks) {
  Hello sent = SampleHello();
  EXPECT_EQ(RoundTrip(sent).devices, 1u);
  EXPECT_TRUE(RoundTrip(sent).links.empty());
  sent.devices = 4;
  sent.links = {{"nvlink", 50, 10, false}, {"host", 6.5, 2.75, true}};
  const Hello got = RoundTrip(sent);
  EXPECT_EQ(got.devices, 4u);
  ASSERT_EQ(got.links.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got.links[i].kind, sent.links[i].kind);
    EXPECT_EQ(got.links[i].gb_per_s, sent.links[i].gb_per_s);
    EXPECT_EQ(got.links[i].latency_us, sent.links[i].latency_us);
    EXPECT_EQ(got.links[i].measured, sent.links[i].measured);
  }
}

TEST(LinkWireTest, HelloWithoutDevicesOrWithABadLinkIsRefusedNamingTheField) {
  Hello none = SampleHello();
  none.devices = 0;
  DecodeError error = Failure(Encode(none));
  EXPECT_EQ(error.kind, Kind::kInvalid);
  EXPECT_NE(error.message.find("hello.devices"), std::string::npos) << error.message;
  for (double bad : {0.0, -1.0, std::nan("")}) {
    Hello hello = SampleHello();
    hello.devices = 2;
    hello.links = {{"host", 5, 2, false}, {"pcie", bad, 10, false}};
    error = Failure(Encode(hello));
    EXPECT_EQ(error.kind, Kind::kInvalid);
    EXPECT_NE(error.message.find("hello.links[1].gbPerS"), std::string::npos) << error.message;
  }
  Hello unnamed = SampleHello();
  unnamed.links = {{"", 5, 2, false}};
  EXPECT_NE(Failure(Encode(unnamed)).message.find("hello.links[0].kind"), std::string::npos);
}

TEST(LinkWireTest, ALinkQueryRoundTripsWithoutAStage) {
  LinkQuery link = LinkQuery::Default();
  link.repeats = 7;
  const std::string bytes = EncodeLinkQuery(42, link, 5000);
  const Message message = Decoded(bytes);
  const auto* query = std::get_if<StageQuery>(&message);
  ASSERT_NE(query, nullptr);
  EXPECT_EQ(query->query_id, 42u);
  EXPECT_EQ(query->timeout_ms, 5000u);
  ASSERT_TRUE(query->link.has_value());
  EXPECT_EQ(query->link->bytes, link.bytes);
  EXPECT_EQ(query->link->repeats, 7);
  EXPECT_TRUE(query->stage.groups.empty());
  EXPECT_EQ(query->network, nullptr);
  EXPECT_EQ(query->Describe(), "link (9 sizes)");
  // The same bytes as encoding the StageQuery value.
  StageQuery value;
  value.query_id = 42;
  value.timeout_ms = 5000;
  value.link = link;
  EXPECT_EQ(Encode(value), bytes);
  // A stage query carries no link.
  EXPECT_FALSE(RoundTrip(SampleQuery()).link.has_value());
}

TEST(LinkWireTest, ALinkQueryOutOfRangeIsRefusedWithItsId) {
  const auto refused = [](LinkQuery link, const std::string& field) {
    const DecodeError error = Failure(EncodeLinkQuery(77, link));
    EXPECT_EQ(error.kind, Kind::kInvalid);
    EXPECT_NE(error.message.find(field), std::string::npos) << error.message;
    EXPECT_EQ(error.query_id, 77u);  // so the worker answers instead of staying silent
  };
  refused(LinkQuery{}, "query.link.bytes");
  refused(LinkQuery{{1024, 0}, 5}, "query.link.bytes[1]");
  refused(LinkQuery{{kMaxLinkBytes + 1}, 5}, "query.link.bytes[0]");
  refused(LinkQuery{{1024}, 0}, "query.link.repeats");
  refused(LinkQuery{std::vector<int64_t>(kMaxLinkSizes + 1, 1024), 5}, "query.link.bytes");
}

TEST(LinkWireTest, ALinkQueryBesideAStageIsRefused) {
  capnp::MallocMessageBuilder builder;
  auto envelope = builder.initRoot<wire::Envelope>();
  envelope.setVersion(kProtocolVersion);
  auto query = envelope.initQuery();
  query.setQueryId(5);
  query.setBatchSize(1);
  query.setDtype("float32");
  query.setNumber(1);
  query.setRepeat(1);
  query.initStage();
  auto bytes = query.initLink().initBytes(1);
  bytes.set(0, 1024);
  query.getLink().setRepeats(1);
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  const DecodeError error = Failure(std::string_view(
      reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size()));
  EXPECT_EQ(error.kind, Kind::kInvalid);
  EXPECT_NE(error.message.find("beside query.link"), std::string::npos) << error.message;
}

TEST(LinkWireTest, ALinkResultRoundTripsExactly) {
  StageResult sent{9, {}};
  sent.link = SampleLink();
  const StageResult got = RoundTrip(sent);
  EXPECT_TRUE(got.result.ok());
  ASSERT_TRUE(got.link.has_value());
  EXPECT_EQ(got.link->kind, "host");
  EXPECT_FALSE(got.link->simulated);
  EXPECT_EQ(got.link->latency_us, 3.25);
  EXPECT_EQ(got.link->gb_per_s, 7.5);
  ASSERT_EQ(got.link->samples.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got.link->samples[i].bytes, sent.link->samples[i].bytes);
    EXPECT_EQ(got.link->samples[i].median_ms, sent.link->samples[i].median_ms);
    EXPECT_EQ(got.link->samples[i].spread_ms, sent.link->samples[i].spread_ms);
  }
  sent.link->simulated = true;
  EXPECT_TRUE(RoundTrip(sent).link->simulated);
  // A stage's answer carries none; a failed link is an error like any other.
  EXPECT_FALSE(RoundTrip(StageResult{9, {}}).link.has_value());
}

TEST(LinkWireTest, ALinkResultWithImpossibleFiguresIsRefusedNamingTheField) {
  StageResult zero{9, {}};
  zero.link = SampleLink();
  zero.link->gb_per_s = 0;
  EXPECT_NE(Failure(Encode(zero)).message.find("result.ok.link.gbPerS"), std::string::npos);
  StageResult negative{9, {}};
  negative.link = SampleLink();
  negative.link->samples[2].median_ms = -1;
  EXPECT_NE(Failure(Encode(negative)).message.find("result.ok.link.samples[2].medianMs"),
            std::string::npos);
}

}  // namespace
}  // namespace ios::schema
